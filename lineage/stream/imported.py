"""The parameters of a stream imported from a trainer's own order (`imported/2`).

A run ordered by its framework (Megatron-LM, OLMo-core, the open-transformers harness)
is stored as a stream whose order is the framework's, read from the files the framework
wrote. Its spec names those files by hash, with the settings that fixed the order, the
batch-size schedule that cut its windows into steps and the rule that split each step
among ranks, so a lost index file can be rebuilt and checked against the recorded hash
(docs/importers.md).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import blake3

from lineage.errors import UsageError
from lineage.stream.schedule import BatchSchedule, RankRule
from lineage.stream.spec import EARLIER_LABEL

# imported/2 is imported/1 whose occurrences digest is lineage-occurrences/2 (it hashes
# each segment's doc_offset too); streams imported before keep imported/1 and their digest
IMPORTED_SPEC = "imported/2"
FRAMEWORKS = ("megatron", "olmo-core", "open-transformers")
_HASH = re.compile(r"blake3:[0-9a-f]{64}")


@dataclass(frozen=True)
class ImportedSpec:
    """An imported order: what fixed it, by hash and by setting."""

    manifest_hash: str
    seq_len: int  # tokens per window
    schedule: BatchSchedule
    rank_rule: RankRule
    framework: str
    artifacts: dict[str, str] = field(default_factory=dict)  # role or file -> blake3:<hex>
    settings: dict[str, Any] = field(default_factory=dict)  # the framework's, as JSON values
    spec: str = IMPORTED_SPEC
    # Columns every stream row has; an imported order has no seed, budget or separators
    # of lineage's own (its separators, if any, are tokens of the framework's windows).
    seed: None = None
    token_budget: None = None
    separator_tokens: int = 0
    epochs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.framework not in FRAMEWORKS:
            raise UsageError(f"framework {self.framework!r}: expected one of "
                             f"{', '.join(FRAMEWORKS)}")
        if self.seq_len < 1:
            raise UsageError("an imported order's windows hold at least 1 token")
        for role, digest in self.artifacts.items():
            if not _HASH.fullmatch(digest):
                raise UsageError(f"artifact {role!r}: expected 'blake3:<64 hex>', not {digest!r}")
        try:
            json.dumps(self.settings, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"settings must be plain JSON values ({exc})") from exc

    @property
    def batch(self) -> int:
        """Windows per step as the streams table records it: the schedule's last (the
        run's nominal global batch); the schedule itself is in the parameters."""
        return self.schedule.segments[-1][1]

    def to_json(self) -> dict[str, Any]:
        return {
            "artifacts": dict(sorted(self.artifacts.items())),
            "framework": self.framework,
            "manifest_hash": self.manifest_hash,
            "rank_rule": self.rank_rule.to_json(),
            "schedule": self.schedule.to_json(),
            "seq_len": self.seq_len,
            "settings": self.settings,
            "spec": self.spec,
        }

    def canonical_json(self) -> str:
        """The stream's parameters: sorted keys, no spaces, UTF-8 as is."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=False)

    @property
    def spec_hash(self) -> str:
        return "blake3:" + blake3.blake3(self.canonical_json().encode("utf-8")).hexdigest()

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> ImportedSpec:
        """The spec back from a stream's parameters (the inverse of `to_json`)."""
        if value.get("spec") not in (IMPORTED_SPEC, EARLIER_LABEL[IMPORTED_SPEC]):
            raise UsageError(f"not an {IMPORTED_SPEC} spec: {value.get('spec')!r}")
        return cls(
            manifest_hash=str(value["manifest_hash"]), seq_len=int(value["seq_len"]),
            schedule=BatchSchedule.from_json(value["schedule"]),
            rank_rule=RankRule.from_json(value["rank_rule"]),
            framework=str(value["framework"]), artifacts=dict(value["artifacts"]),
            settings=dict(value["settings"]), spec=str(value["spec"]),
        )
