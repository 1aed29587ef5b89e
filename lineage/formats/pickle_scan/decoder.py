"""The opcode-stream scanner: decodes pickles on a symbolic stack and judges what loading
them would import and call, without running anything.

`Decoder` decodes one pickle: it reads each opcode's argument, applies the opcode (a handler
of module handlers, or the `pickletools` stack effect), and judges every imported name and
call. `scan_pickles` decodes the consecutive pickles of a stream; a string or bytes value that
holds a pickle is scanned in turn (`_scan_nested`), down to max_depth.
"""

from __future__ import annotations

import io
import pickletools
import struct
from collections import Counter

from lineage.formats.messages import show as _show
from lineage.formats.pickle_scan.classify import classify_global
from lineage.formats.pickle_scan.findings import GlobalRef, Scan
from lineage.formats.pickle_scan.handlers import HANDLERS
from lineage.formats.pickle_scan.opcodes import (
    EFFECTS,
    FIXED_ARGS,
    KEEP_VALUE_BYTES,
    LINE_ARGS,
    OPCODES,
    SIZED_ARGS,
    SNIFF_BYTES,
    STRICT_LINES,
    VALUE_ARGS,
    Imported,
    Made,
    Stop,
    Token,
    Value,
    may_hold_pickle,
    nested_payloads,
)
from lineage.formats.pickle_scan.source import Source

MAX_PICKLES_PER_STREAM = 256  # consecutive pickles in one stream
MAX_STACK_ITEMS = 1_000_000  # symbolic stack + memo entries per pickle
LEGACY_PICKLES = 5  # magic number, protocol version, sys info, the object, storage keys


class Decoder:
    """Decodes one pickle from a source, reporting into a scan; never executes anything."""

    def __init__(
        self, source: Source, member: str | None, scan: Scan, depth: int, *, strict: bool = False
    ) -> None:
        self.strict = strict
        self.source = source
        self.member = member
        self.scan = scan
        self.depth = depth
        self.stack: list[Value] = []
        self.memo: dict[int, Value] = {}
        self.calls: Counter[str] = Counter()
        self.persistent = 0
        self.opcodes = 0  # opcodes started, the last one possibly cut short
        self.clean_calls = 0  # calls decoded before any structural problem
        self.stack_error_reported = False

    def run(self) -> bool:
        """True if the pickle ended with STOP, False if decoding had to stop before."""
        try:
            while True:
                pos = self.source.pos
                self.opcodes += 1
                code = self.source.read(1)
                if not code:
                    self._truncated(pos, "the pickle ends without a STOP opcode")
                op = OPCODES.get(code[0])
                if op is None:
                    raise Stop(
                        "unknown-opcode",
                        "unverifiable",
                        f"byte 0x{code[0]:02x} at {pos} is not a pickle opcode",
                    )
                arg = self._read_arg(op, pos)
                if self._apply(op, arg, pos):
                    return True
                if len(self.stack) + len(self.memo) > MAX_STACK_ITEMS:
                    raise Stop(
                        "scan-limit",
                        "unverifiable",
                        f"more than {MAX_STACK_ITEMS} stack and memo items at byte {pos}",
                    )
        except Stop as stop:
            self.scan.add(self.member, stop.kind, stop.severity, stop.detail)
            return False
        finally:
            self._report_counts()

    def finding(self, kind: str, severity: str, detail: str) -> None:
        self.scan.add(self.member, kind, severity, detail)

    def _truncated(self, pos: int, what: str) -> None:
        if self.source.limited:
            raise Stop(
                "scan-limit",
                "unverifiable",
                f"stopped at byte {pos}: the byte cap of this scan was reached",
            )
        raise Stop("broken-opcode", "unverifiable", f"at byte {pos}: {what} (truncated?)")

    # -- arguments -----------------------------------------------------------------------------

    def _read_arg(self, op: pickletools.OpcodeInfo, pos: int) -> object:
        if op.arg is None:
            return None
        kind = op.arg.name
        if kind in FIXED_ARGS:
            fmt = FIXED_ARGS[kind]
            return struct.unpack(fmt, self._exact(struct.calcsize(fmt), pos, op.name))[0]
        if kind == "float8":
            return self._exact(8, pos, op.name)
        if kind in SIZED_ARGS:
            return self._read_sized(op.name, kind, pos)
        if kind in LINE_ARGS or kind == "unicodestringnl":
            return self._checked(kind, self._line(pos, op.name), pos, op.name)
        if kind == "stringnl_noescape_pair":
            pair = self._line(pos, op.name), self._line(pos, op.name)
            return tuple(self._checked(kind, line, pos, op.name) for line in pair)
        raise Stop(
            "broken-opcode",
            "unverifiable",
            f"{op.name} at byte {pos} has an argument this scanner cannot read",
        )

    def _checked(self, kind: str, line: bytes, pos: int, name: str) -> bytes:
        """In strict mode (sniffing), text arguments must be what the unpickler accepts."""
        accepts = STRICT_LINES.get(kind) if self.strict else None
        if accepts is not None and not accepts(line):
            detail = f"{name} at byte {pos}: argument {line[:40]!r} is not of its form"
            raise Stop("broken-opcode", "unverifiable", detail)
        return line

    def _exact(self, n: int, pos: int, name: str) -> bytes:
        data = self.source.read(n)
        if len(data) < n:
            self._truncated(pos, f"{name} needs {n} argument bytes, {len(data)} remain")
        return data

    def _line(self, pos: int, name: str) -> bytes:
        line = self.source.read_line()
        if line is None:
            self._truncated(pos, f"{name} argument has no end of line")
        assert line is not None
        return line[:-1]

    def _read_sized(self, name: str, kind: str, pos: int) -> bytes | None:
        """The value of a length-prefixed argument, or None when it was skipped unread."""
        fmt = SIZED_ARGS[kind]
        (length,) = struct.unpack(fmt, self._exact(struct.calcsize(fmt), pos, name))
        if length < 0:
            detail = f"{name} at byte {pos} has a negative length {length}"
            raise Stop("broken-opcode", "unverifiable", detail)
        keep = kind in VALUE_ARGS  # numbers (LONG1/LONG4) are only passed over
        if keep and length <= KEEP_VALUE_BYTES:
            return self._exact(length, pos, name)
        # A large value is read in full only if it may hold a nested pickle.
        head = self._exact(min(length, SNIFF_BYTES), pos, name) if keep else b""
        if keep and may_hold_pickle(head):
            return head + self._exact(length - len(head), pos, name)
        if not self.source.skip(length - len(head)):
            self._truncated(pos, f"{name} declares {length} bytes, more than remain")
        return None

    # -- stack effects ---------------------------------------------------------------------------

    def _apply(self, op: pickletools.OpcodeInfo, arg: object, pos: int) -> bool:
        handler = HANDLERS.get(op.name)
        if handler is not None:
            return handler(self, arg, pos)
        self._generic(op.name, pos)
        return False

    def _generic(self, name: str, pos: int) -> None:
        below, to_mark, pushed = EFFECTS[name]
        if to_mark:
            self.pop_to_mark(pos, name)
        for _ in range(below):
            self.pop(pos, name)
        self.stack.extend([Token.OPAQUE] * pushed)

    def stack_error(self, pos: int, what: str) -> None:
        # The unpickler would fail here; keep scanning so nothing after it goes unreported.
        if not self.stack_error_reported:
            self.stack_error_reported = True
            self.finding("stack-error", "unverifiable", f"at byte {pos}: {what}")

    def pop(self, pos: int, name: str) -> Value:
        if not self.stack or self.stack[-1] is Token.MARK:
            self.stack_error(pos, f"{name} pops from an empty stack or below a MARK")
            return Token.OPAQUE
        return self.stack.pop()

    def top(self, pos: int, name: str) -> Value:
        if not self.stack or self.stack[-1] is Token.MARK:
            self.stack_error(pos, f"{name} needs an object on the stack")
            return Token.OPAQUE
        return self.stack[-1]

    def pop_to_mark(self, pos: int, name: str) -> list[Value]:
        """The objects above the topmost MARK, which is removed with them."""
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index] is Token.MARK:
                items = self.stack[index + 1 :]
                del self.stack[index:]
                return items
        self.stack_error(pos, f"{name} finds no MARK on the stack")
        items = self.stack[:]
        self.stack.clear()
        return items

    def _report_counts(self) -> None:
        if self.calls:
            shown = ", ".join(f"{count} {name}" for name, count in sorted(self.calls.items()))
            self.finding("calls", "info", f"{shown}: loading calls the objects named above")
        if self.persistent:
            self.finding(
                "persistent-id",
                "info",
                f"{self.persistent} persistent id(s): resolved by the loader's persistent_load "
                "(torch: tensor storages), not by pickle itself",
            )

    # -- globals ----------------------------------------------------------------------------------

    def _record_global(self, module: str, name: str, opcode: str, pos: int) -> None:
        self.scan.collector.add_global(GlobalRef(module, name, opcode, pos, self.member))
        verdict, reason = classify_global(module, name)
        if verdict == "safe":
            return
        kind = "dangerous-global" if verdict == "dangerous" else "unknown-global"
        key = (self.member, module, name)
        detail = f"{opcode} {_show(module)} {_show(name)} at byte {pos}: {reason}"
        self.scan.collector.add_once(key, kind, verdict, detail)

    def unresolved(self, pos: int, what: str) -> None:
        self.finding("unresolved-global", "dangerous", f"at byte {pos}: {what}")

    def imported(self, module: str, name: str, opcode: str, pos: int) -> Imported:
        self._record_global(module, name, opcode, pos)
        return Imported(module, name, classify_global(module, name)[0])

    # -- calls ------------------------------------------------------------------------------------

    def call(self, callee: Value, opcode: str, pos: int) -> Made:
        """Judge what a REDUCE / NEWOBJ / NEWOBJ_EX / OBJ / INST runs; the result it pushes."""
        self.calls[opcode] += 1
        if not self.scan.collector.structural:  # the unpickler gets this far and runs it
            self.clean_calls += 1
        if isinstance(callee, Imported):
            if callee.verdict == "unknown":  # dangerous names were reported when imported
                key = (self.member, f"{callee.module} {callee.name}", "call")
                detail = (
                    f"{opcode} at byte {pos} calls {_show(callee.module)} {_show(callee.name)}, "
                    "which is not on the allowlist: loading runs it"
                )
                self.scan.collector.add_once(key, "dangerous-call", "dangerous", detail)
            return Made(callee if callee.verdict == "safe" else None)
        what = "the result of another call" if isinstance(callee, Made) else "not an imported name"
        detail = (
            f"{opcode} at byte {pos} calls a value that is {what}: what runs cannot be told "
            "without running it"
        )
        self.scan.collector.add_once((self.member, "", f"unresolved-call {opcode}"),
                                     "unresolved-call", "dangerous", detail)
        return Made(None)

    # -- nested pickles ---------------------------------------------------------------------------

    def check_nested(self, value: bytes | str, pos: int) -> None:
        for how, payload in nested_payloads(value):
            _scan_nested(
                payload, f"{self.member or ''}@{pos}", how, self.scan, self.depth, self.member
            )


# ---------------------------------------------------------------------------------------------
# Nested pickles


def _scan_nested(
    payload: bytes, label: str, how: str, scan: Scan, depth: int, parent: str | None
) -> None:
    if depth + 1 > scan.max_depth:
        scan.add(
            parent,
            "depth-limit",
            "unverifiable",
            f"a pickle nested in a value ({how}) at {label} is deeper than max_depth "
            f"{scan.max_depth}: not scanned",
        )
        return
    child = scan.child()
    source = Source(
        io.BytesIO(payload), limit=scan.max_member_bytes, budget=scan.budget, size=len(payload)
    )
    scan_pickles(source, label, child, depth + 1)
    if not is_pickle_after_all(child):
        return  # bytes that merely start like a pickle: tensor data, not a payload
    scan.add(
        parent,
        "nested-pickle",
        "info",
        f"a value ({how}, {len(payload)} bytes) holds a pickle, scanned as member {label}",
    )
    scan.merge(child)


def is_pickle_after_all(child: Scan) -> bool:
    """Keep a sniffed pickle's findings unless it neither parses nor names any global."""
    return bool(child.collector.globals) or child.collector.structural == 0


# ---------------------------------------------------------------------------------------------
# Streams of pickles


def scan_pickles(
    source: Source, member: str | None, scan: Scan, depth: int, *, legacy: bool = False
) -> None:
    """Decode consecutive pickles until the data ends, decoding fails or a cap is reached."""
    count = 0
    while True:
        if not Decoder(source, member, scan, depth).run():
            return
        count += 1
        if legacy and count == LEGACY_PICKLES:
            _report_storage_data(source, member, scan)
            return
        if source.at_end():
            _report_end(source, member, scan, count, legacy)
            return
        if not legacy:
            scan.add(
                member,
                "data-after-stop",
                "unknown",
                f"bytes follow the STOP of pickle {count} (at byte {source.pos}): "
                "scanned as another pickle",
            )
        if count >= MAX_PICKLES_PER_STREAM:
            detail = f"more than {MAX_PICKLES_PER_STREAM} pickles in one stream: rest not scanned"
            scan.add(member, "scan-limit", "unverifiable", detail)
            return


def _report_end(source: Source, member: str | None, scan: Scan, count: int, legacy: bool) -> None:
    if source.limited:
        detail = f"stopped at byte {source.pos}: the byte cap of this scan was reached"
        scan.add(member, "scan-limit", "unverifiable", detail)
    elif legacy:
        detail = f"the legacy torch file ends after {count} of its {LEGACY_PICKLES} pickles"
        scan.add(member, "legacy-layout", "unverifiable", detail)


def _report_storage_data(source: Source, member: str | None, scan: Scan) -> None:
    remaining = source.remaining()
    if remaining:
        detail = f"{remaining} bytes of raw tensor storage follow the pickles (not decoded)"
        scan.add(member, "storage-data", "info", detail)
