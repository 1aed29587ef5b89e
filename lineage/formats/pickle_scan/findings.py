"""What a pickle scan reports, and the state one scan keeps while it runs.

`GlobalRef`, `PickleFinding` and `PickleScan` are the results (`PickleScan.verdict` comes from
the worst finding); `Collector` gathers globals and findings under the per-scan caps, and
`Scan` carries the caps and the shared byte budget through every part of the scanner. The
finding kinds and severities are described in the package docstring.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

DEFAULT_MAX_MEMBER_BYTES = 64 * 2**20
DEFAULT_MAX_TOTAL_BYTES = 256 * 2**20
DEFAULT_MAX_DEPTH = 3
MAX_FINDINGS = 1000  # per scan; beyond it one `more-findings` per severity keeps the verdict
MAX_GLOBALS = 10_000  # GlobalRefs listed per scan (all are still classified)

SEVERITIES = ("dangerous", "unknown", "unverifiable", "info")

FINDING_KINDS = (
    "dangerous-global",
    "dangerous-call",
    "unresolved-global",
    "unresolved-call",
    "zip-slip",
    "unknown-global",
    "data-after-stop",
    "duplicate-member",
    "local-name-mismatch",
    "compression-bomb",
    "unknown-opcode",
    "broken-opcode",
    "stack-error",
    "memo-trick",
    "depth-limit",
    "scan-limit",
    "encrypted-member",
    "unsupported-compression",
    "crc-mismatch",
    "bad-zip",
    "read-error",
    "legacy-layout",
    "more-findings",
    "calls",
    "persistent-id",
    "nested-pickle",
    "nested-archive",
    "storage-data",
    "pickle-like-data",
    "npy-array",
    "bad-npy",
    "compressed",
)


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class GlobalRef:
    module: str
    name: str
    opcode: str  # GLOBAL, INST or STACK_GLOBAL
    position: int  # byte offset of the opcode in its stream
    member: str | None  # zip member, `<member>@<offset>` for a nested pickle, None for the file


@dataclass
class PickleFinding:
    member: str | None
    kind: str
    severity: str  # "dangerous" | "unknown" | "unverifiable" | "info"
    detail: str


@dataclass
class PickleScan:
    path: str
    format: str  # "pickle", "torch-zip", "torch-legacy", "npy", "npz", "compressed-pickle", "zip"
    globals: list[GlobalRef]
    findings: list[PickleFinding]
    members_scanned: list[str]  # archive members decoded as pickles (empty for a plain file)
    bytes_read: int  # bytes read from the file on disk, archive directory included

    @property
    def verdict(self) -> str:
        return _verdict(self.findings)


def _verdict(findings: Iterable[PickleFinding]) -> str:
    severities = {finding.severity for finding in findings}
    if "dangerous" in severities:
        return "dangerous"
    if severities & {"unknown", "unverifiable"}:
        return "unknown"
    return "ok"


class Collector:
    """Globals and findings of one scan, capped; repeated identical global findings are merged."""

    def __init__(self) -> None:
        self.globals: list[GlobalRef] = []
        self.findings: list[PickleFinding] = []
        self.structural = 0  # unknown/broken opcodes, stack errors, memo tricks
        self._held_back: Counter[str] = Counter()  # severity -> findings past MAX_FINDINGS
        self._seen: set[tuple[str | None, str, str]] = set()

    def add(self, member: str | None, kind: str, severity: str, detail: str) -> None:
        if kind in ("unknown-opcode", "broken-opcode", "stack-error", "memo-trick"):
            self.structural += 1
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(PickleFinding(member, kind, severity, detail))
        else:
            self._held_back[severity] += 1

    def add_once(
        self, key: tuple[str | None, str, str], kind: str, severity: str, detail: str
    ) -> None:
        if key not in self._seen:
            self._seen.add(key)
            self.add(key[0], kind, severity, detail)

    def add_global(self, ref: GlobalRef) -> None:
        if len(self.globals) < MAX_GLOBALS:
            self.globals.append(ref)

    def merge(self, other: Collector) -> None:
        for ref in other.globals:
            self.add_global(ref)
        for finding in other.close():
            self.add(finding.member, finding.kind, finding.severity, finding.detail)

    def close(self) -> list[PickleFinding]:
        """The findings, with one `more-findings` line per severity that went past the cap."""
        for severity in SEVERITIES:
            count = self._held_back.pop(severity, 0)
            if count:
                detail = f"{count} more {severity} finding(s) not listed (cap {MAX_FINDINGS})"
                self.findings.append(PickleFinding(None, "more-findings", severity, detail))
        return self.findings


class Budget:
    """Bytes the whole scan may still pull from its streams (max_total_bytes)."""

    def __init__(self, total: int) -> None:
        self.left = total


@dataclass
class Scan:
    max_member_bytes: int
    max_depth: int
    budget: Budget
    collector: Collector = field(default_factory=Collector)
    members_scanned: list[str] = field(default_factory=list)

    def add(self, member: str | None, kind: str, severity: str, detail: str) -> None:
        self.collector.add(member, kind, severity, detail)

    def child(self) -> Scan:
        """A scan whose findings can be judged before they are merged (or dropped)."""
        return Scan(self.max_member_bytes, self.max_depth, self.budget)

    def merge(self, other: Scan) -> None:
        self.collector.merge(other.collector)
        self.members_scanned.extend(other.members_scanned)


# ---------------------------------------------------------------------------------------------
# Message helpers


def describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."
