"""A stream's catalog row as the questions read it: typed, parsed once.

Kept apart from the answers (lineage/stream/answers.py, `Stream` is what `stream show`
prints) so that a lookup, which reads the record on every question, imports neither the
answer types nor anything they bring.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lineage.stream.schedule import BatchSchedule, RankRule

# The parameters' keys of a batch-size schedule and a rank rule (docs/stream-spec.md §1):
# written only when they differ from a fixed batch and the contiguous split.
SCHEDULE_KEYS = ("schedule", "rank_rule")
COLUMNS = (
    "name", "spec", "spec_hash", "corpus", "manifest_hash", "seed", "seq_len", "batch",
    "separator_tokens", "token_budget", "tokens", "windows", "steps", "occurrences",
    "occurrences_digest", "parameters",
)  # fmt: skip


@dataclass(frozen=True)
class StreamRecord:
    """One stream of the catalog (docs/stream-spec.md): its identity, shape and counts."""

    name: str
    spec: str  # the stream spec version, e.g. lineage-stream/1
    spec_hash: str
    corpus: str
    manifest_hash: str
    seed: int | None  # None for a stream recorded from a run's log
    seq_len: int  # tokens per window
    batch: int  # windows per step (the first step's, under a schedule)
    separator_tokens: int
    token_budget: int | None
    tokens: int
    windows: int
    steps: int
    occurrences: int
    occurrences_digest: str
    epochs: dict[str, str]  # source -> epochs as a decimal string
    # Declared only where they differ from a fixed batch and the contiguous split:
    schedule: BatchSchedule | None = None
    rank_rule: RankRule | None = None

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> StreamRecord:
        """The record of a `SELECT <COLUMNS> FROM streams` row."""
        found = dict(zip(COLUMNS, row, strict=True))
        parameters = json.loads(found.pop("parameters"))
        schedule, rule = parameters.get("schedule"), parameters.get("rank_rule")
        return cls(**found, epochs=parameters.get("epochs", {}),
                   schedule=None if schedule is None else BatchSchedule.from_json(schedule),
                   rank_rule=None if rule is None else RankRule.from_json(rule))

    def to_row(self) -> dict[str, Any]:
        """The record as a JSON object: its columns, epochs, and the schedule and rank rule
        it declares (as its parameters hold them)."""
        row = {name: getattr(self, name) for name in COLUMNS if name != "parameters"}
        row["epochs"] = dict(self.epochs)
        if self.schedule is not None:
            row["schedule"] = self.schedule.to_json()
        if self.rank_rule is not None:
            row["rank_rule"] = self.rank_rule.to_json()
        return row

    def __getitem__(self, key: str) -> Any:
        """A field by its JSON key (`to_row`): a `StreamReader.info` read as the dict it
        once was."""
        return self.to_row()[key]
