"""The parameters of a `lineage-stream/1` stream and their hash (docs/stream-spec.md §1)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

import blake3

from lineage.errors import UsageError
from lineage.stream.schedule import BatchSchedule, RankRule

STREAM_SPEC = "lineage-stream/1"
# `recorded/2` is `recorded` whose occurrences digest is lineage-occurrences/2; streams
# recorded before keep their label, their spec hash and their /1 digest
RECORDED_SPEC = "recorded/2"
OCCURRENCES_SPEC = "lineage-occurrences/1"
OCCURRENCE_DIGEST_COLUMNS = ("ordinal", "source", "doc_id", "epoch", "stream_start",
                             "stream_end")
# /2 adds what places a segment inside its document: a canonical stream's occurrences
# are whole documents (doc_offset 0, by its spec), an imported or recorded one's not
OCCURRENCES_SPEC_2 = "lineage-occurrences/2"
OCCURRENCE_DIGEST_COLUMNS_2 = (*OCCURRENCE_DIGEST_COLUMNS, "doc_offset")
# the stream specs whose digest is /2; the label each had before /2 (docs/stream-spec.md §5)
EARLIER_LABEL = {"imported/2": "imported/1", RECORDED_SPEC: "recorded"}


def occurrences_spec(stream_spec: str) -> str:
    """The spec of the occurrences digest a stream of spec `stream_spec` records:
    lineage-occurrences/2 for imported/2 and recorded/2, /1 for every other (canonical
    streams, and the imported and recorded streams written before /2)."""
    return OCCURRENCES_SPEC_2 if stream_spec in EARLIER_LABEL else OCCURRENCES_SPEC


def earlier_spec_hash(spec: RecordedSpec | Any) -> str | None:
    """The spec hash the same order had under its label from before /2 (what a stream
    stored then records), or None for a spec that had no earlier label: importing or
    recording the same order again into an older store answers "unchanged"."""
    import dataclasses

    label = EARLIER_LABEL.get(spec.spec)
    return None if label is None else str(dataclasses.replace(spec, spec=label).spec_hash)


def digest_columns(occurrences: str) -> tuple[str, ...]:
    """The occurrence columns a digest of spec `occurrences` hashes, in line order."""
    return OCCURRENCE_DIGEST_COLUMNS_2 if occurrences == OCCURRENCES_SPEC_2 \
        else OCCURRENCE_DIGEST_COLUMNS
MAX_SEED = 2**64 - 1


@dataclass(frozen=True)
class StreamSpec:
    manifest_hash: str
    seed: int
    seq_len: int
    batch: int
    separator_tokens: int = 1
    epochs: dict[str, str] = field(default_factory=dict)  # source -> normal decimal string
    token_budget: int | None = None
    schedule: BatchSchedule | None = None  # None: `batch` windows every step
    rank_rule: RankRule | None = None  # None: the contiguous split
    spec: str = STREAM_SPEC

    def __post_init__(self) -> None:
        if not 0 <= self.seed <= MAX_SEED:
            raise UsageError(f"--seed must be in [0, 2^64), not {self.seed}")
        if self.seq_len < 1 or self.batch < 1:
            raise UsageError("--seq-len and --batch must be at least 1")
        if self.separator_tokens < 0:
            raise UsageError("--separator-tokens must be 0 or more")
        if self.token_budget is not None and self.token_budget < 1:
            raise UsageError("--token-budget must be at least 1")
        declared(self)

    def canonical_json(self) -> str:
        return json.dumps(
            {
                "batch": self.batch,
                "epochs": dict(sorted(self.epochs.items())),
                "manifest_hash": self.manifest_hash,
                "seed": self.seed,
                "separator_tokens": self.separator_tokens,
                "seq_len": self.seq_len,
                "spec": self.spec,
                "token_budget": self.token_budget,
                **schedule_parameters(self),
            },
            sort_keys=True, separators=(",", ":"), ensure_ascii=False,
        )

    @classmethod
    def from_parameters(cls, text: str) -> StreamSpec:
        """The spec whose canonical_json() is `text` (a stream's recorded parameters)."""
        values = json.loads(text)
        schedule, rank_rule = values.get("schedule"), values.get("rank_rule")
        return cls(
            manifest_hash=values["manifest_hash"], seed=values["seed"],
            seq_len=values["seq_len"], batch=values["batch"],
            separator_tokens=values["separator_tokens"], epochs=dict(values["epochs"]),
            token_budget=values["token_budget"], spec=values["spec"],
            schedule=None if schedule is None else BatchSchedule.from_json(schedule),
            rank_rule=None if rank_rule is None else RankRule.from_json(rank_rule),
        )

    @property
    def step_schedule(self) -> BatchSchedule:
        """Windows per step, step by step (a fixed batch when no schedule is declared)."""
        return self.schedule or BatchSchedule.fixed(self.batch)

    @property
    def spec_hash(self) -> str:
        return "blake3:" + blake3.blake3(self.canonical_json().encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class RecordedSpec:
    """A stream a run recorded itself (`lineage ingest windows`): its log is the order."""

    manifest_hash: str
    seq_len: int
    batch: int
    separator_tokens: int
    log_hash: str  # 'blake3:<hex>' of the windows file as ingested
    spec: str = RECORDED_SPEC
    seed: None = None
    token_budget: None = None
    epochs: dict[str, str] = field(default_factory=dict)
    schedule: BatchSchedule | None = None
    rank_rule: RankRule | None = None

    def __post_init__(self) -> None:
        declared(self)

    def canonical_json(self) -> str:
        return json.dumps(
            {"batch": self.batch, "log_hash": self.log_hash,
             "manifest_hash": self.manifest_hash, "separator_tokens": self.separator_tokens,
             "seq_len": self.seq_len, "spec": self.spec, **schedule_parameters(self)},
            sort_keys=True, separators=(",", ":"), ensure_ascii=False,
        )

    @property
    def step_schedule(self) -> BatchSchedule:
        return self.schedule or BatchSchedule.fixed(self.batch)

    @property
    def spec_hash(self) -> str:
        return "blake3:" + blake3.blake3(self.canonical_json().encode("utf-8")).hexdigest()


def declared(spec: StreamSpec | RecordedSpec) -> None:
    """Keep a schedule and a rank rule only when they say more than `batch` and the
    contiguous split (so a fixed-batch stream's parameters and hash are as they always
    were), and check that `batch` is the windows of step 0."""
    if spec.schedule is not None:
        if spec.schedule.segments[0][1] != spec.batch:
            raise UsageError(f"the batch ({spec.batch}) is not the schedule's windows at "
                             f"step 0 ({spec.schedule.segments[0][1]})")
        if spec.schedule.is_fixed:
            object.__setattr__(spec, "schedule", None)
    if spec.rank_rule is not None and spec.rank_rule.is_default:
        object.__setattr__(spec, "rank_rule", None)


def schedule_parameters(spec: StreamSpec | RecordedSpec) -> dict[str, object]:
    """The parameters' `schedule` and `rank_rule` keys, when declared (§1)."""
    out: dict[str, object] = {}
    if spec.schedule is not None:
        out["schedule"] = spec.schedule.to_json()
    if spec.rank_rule is not None:
        out["rank_rule"] = spec.rank_rule.to_json()
    return out


def normal_decimal(value: str | int | float | Decimal) -> str:
    """A positive decimal in normal form: '1', '0.89', '2.5' (no exponent, no trailing 0)."""
    try:
        number = Decimal(str(value))
    except InvalidOperation as exc:
        raise UsageError(f"not a decimal number: {value!r}") from exc
    if not number.is_finite() or number <= 0:
        raise UsageError(f"epochs must be a positive number, not {value!r}")
    text = format(number.normalize(), "f")
    return text


def parse_epochs(entries: list[str] | dict[str, str] | None, sources: list[str]) -> dict[str, str]:
    """`SOURCE=X` entries (or a mapping) completed with 1 for every other source."""
    given: dict[str, str] = {}
    items = entries.items() if isinstance(entries, dict) else (
        tuple(entry.partition("=")[::2]) for entry in entries or []
    )
    for source, value in items:
        if source not in sources:
            known = ", ".join(sources)
            raise UsageError(f"--epochs {source}={value}: no source {source!r} (sources: {known})")
        given[source] = normal_decimal(value)
    return {source: given.get(source, "1") for source in sorted(sources)}


def source_budget(epochs: str, source_tokens: int) -> int:
    """U_s = floor(E_s * T_s), exactly (enough digits that nothing is rounded)."""
    with localcontext() as ctx:
        ctx.prec = 200
        return int(Decimal(epochs) * source_tokens)  # int() truncates: floor for >= 0


def epochs_drawn(epochs: str) -> int:
    """The epochs whose keys a source's sequence is drawn from: e = 0 .. ceil(E_s) - 1.
    (Fewer would do for the tokens alone, but a zero-token document may still fit in
    the last one: the spec keeps it.)"""
    number = Decimal(epochs)
    return max(int(number.to_integral_value(rounding="ROUND_CEILING")), 1)
