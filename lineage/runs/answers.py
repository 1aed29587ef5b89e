"""The typed answers of the run questions (lineage.answer explains the pattern): `run list`,
`run show`, `run checkpoints`, `trace` and `chain verify`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from lineage.answer import Answer, optional

if TYPE_CHECKING:
    import polars as pl


class RunSkipRule(Answer):
    """The skip rule a run's chain header declares (lineage-skip/1)."""

    grad_norm_above: float  # a step whose pre-clip grad norm is above this is skipped...
    rule: str  # the rule's spec, lineage-skip/1
    skip_following: int  # ...and so are this many steps after it


class RunSummary(Answer):
    """`lineage run list`: one run, its stream, chain, progress and clipped/skipped counts."""

    name: str
    stream: str | None  # None: a foreign chain bound to no stream
    world_size: int
    chain: str  # the chain spec, e.g. lineage-chain/2, or a foreign chain's name
    algorithm: str
    genesis: str  # blake3:<hex> the chain starts from
    closed: bool  # the log ends with an end record
    skip_rule: RunSkipRule | None
    checkpoint_every: int | None  # the declared checkpoint interval, in steps
    steps_recorded: int
    first_step: int | None  # None: no step recorded yet
    last_step: int | None
    stream_steps: int | None  # steps the stream holds
    clipped_count: int
    skipped_count: int
    progress: float  # (last step + 1) / stream steps, to 6 places


class RunSegment(Answer):
    """One step log ingested into a run (a restart appends a segment)."""

    segment: int
    log_path: str
    log_hash: str  # blake3:<hex> of the log file's bytes
    first_step: int | None
    last_step: int | None
    records: int  # step records in the log
    new_steps: int  # of them, steps the run did not hold before


class CheckpointVerdict(Answer):
    """One recorded checkpoint and its checks (None: not checked)."""

    step: int  # saved after this step
    structure_ok: bool
    checksums_ok: bool | None
    matches_chain: bool | None  # its state digest is the chain's at that step
    matches_state: bool | None
    risks_ok: bool | None  # no pickle risk found
    ok: bool  # no check failed: a replay may start from it


class Run(RunSummary):
    """`lineage run show`: the summary, the clipped and skipped steps, the step logs
    (segments) and the checkpoints."""

    clipped_steps: tuple[int, ...]
    skipped_steps: tuple[int, ...]
    segments: tuple[RunSegment, ...]
    checkpoints: tuple[CheckpointVerdict, ...]


class NearestCheckpoint(CheckpointVerdict):
    """The good checkpoint a replay of a step starts from."""

    replays: int  # steps to replay from it to reach the step asked about


class Checkpoints(Answer):
    """`lineage run checkpoints`: a run's checkpoints with their verdicts, the ones its
    declared interval lacks, and (with `nearest`) where a replay starts."""

    ROWS: ClassVar[str | None] = "checkpoints"

    run: str
    checkpoint_every: int | None
    last_step: int | None
    checkpoints: tuple[CheckpointVerdict, ...]
    expected: int | None  # checkpoints the interval expects up to the last step
    missing: tuple[int, ...]  # steps whose expected checkpoint is not recorded
    nearest: NearestCheckpoint | None  # None unless asked for
    nearest_to: int | None = optional()  # the step asked about, when asked


class TracedDocument(Answer):
    """One document of a traced step, with the windows and tokens it had in the step."""

    doc_id: str
    source: str
    uri: str | None
    content_hash: str  # blake3:<hex> of the document's bytes
    epoch: int
    windows: tuple[int, ...]
    tokens: int  # the document's tokens in the step


class TracedStep(Answer):
    """One step of a run as its record says, with its documents."""

    step: int
    loss: float | None
    grad_norm: float | None  # before clipping
    lr: float | None
    clipped: bool
    skipped: bool
    state_hash: str | None  # the chain's hash after this step
    documents: tuple[TracedDocument, ...]


class Trace(Answer):
    """`lineage trace`: a run's step (or its clipped or skipped steps) and their documents.

    `to_polars()` gives one row per (step, document): the step's columns, then the
    document's (`step, loss, grad_norm, lr, clipped, skipped, state_hash, doc_id, source,
    uri, content_hash, epoch, windows, tokens`).
    """

    ROWS: ClassVar[str | None] = "steps"

    run: str
    stream: str
    spec_hash: str  # the stream spec's hash
    manifest_hash: str  # the corpus manifest's hash
    steps: tuple[TracedStep, ...]

    def to_polars(self) -> pl.DataFrame:
        """One row per (step, document), the step's columns repeated on each."""
        import polars as pl

        rows = [{**{k: v for k, v in step.to_dict().items() if k != "documents"},
                 **document.to_dict()} for step in self.steps for document in step.documents]
        return pl.DataFrame(rows, schema=_trace_schema())


def _trace_schema() -> dict[str, Any]:
    import polars as pl

    return {"step": pl.Int64, "loss": pl.Float64, "grad_norm": pl.Float64, "lr": pl.Float64,
            "clipped": pl.Boolean, "skipped": pl.Boolean, "state_hash": pl.String,
            "doc_id": pl.String, "source": pl.String, "uri": pl.String,
            "content_hash": pl.String, "epoch": pl.Int64, "windows": pl.List(pl.Int64),
            "tokens": pl.Int64}


class SkipViolation(Answer):
    """A step whose skip decision disagrees with the declared rule."""

    step: int
    reason: str


class SkipRuleVerdict(Answer):
    """Every step's skip decision checked against the rule the chain header declares."""

    declared: Any  # the header's skip_rule as written (None: no rule declared)
    description: str | None = optional()  # the rule in words, when it is valid
    verdict: str  # ok, violated, not-checked (chain broken), invalid or "no rule declared"
    violations: tuple[SkipViolation, ...]
    reason: str | None = optional()  # why the declared rule is invalid
    skipped_steps: int | None  # steps whose record says skipped (None: rule invalid)


class ChainVerification(Answer):
    """`lineage chain verify`: every link of a run's chain recomputed; the first broken
    step, if any, and the skip rule's verdict."""

    run: str
    chain: str  # the chain spec the header names
    algorithm: str
    checked: str  # full (lineage-chain/1 and /2) or continuity (a foreign chain)
    verdict: str  # ok, broken, rule-violated or continuity-only
    ok: bool  # verdict is ok
    genesis: str
    stream: str | None
    batches_checked: bool  # batch digests recomputed from the stream
    closed: bool  # the chain has an end record
    end_steps: int | None  # steps the end record says the chain has
    expect_steps: int | None  # the length asked for (--expect-steps)
    steps_checked: int  # steps verified before the first broken one
    first_broken_step: int | None
    reason: str | None  # why that step is broken
    last_state_hash: str | None  # the last verified step's state hash
    skip_rule: SkipRuleVerdict
