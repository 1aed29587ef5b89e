"""The typed answers of the stream questions (lineage.answer explains the pattern)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, TypeVar

from lineage.answer import Answer, UInt64, optional

if TYPE_CHECKING:
    from lineage.stream.record import StreamRecord


class StepSegment(Answer):
    """One document's tokens inside one window of a step."""

    doc_id: str
    source: str
    uri: str | None
    content_hash: str  # blake3:<hex> of the document's bytes
    epoch: int
    window: int
    rank: int | None  # only when the question named a world size
    token_start: int  # the segment's tokens in the document: [token_start, token_end)
    token_end: int


class RankRuleAnswer(Answer):
    """How a step's windows are split among ranks (docs/stream-spec.md §4)."""

    micro_batch: int | None = optional()  # windows per micro-batch (micro-batches only)
    rule: str  # contiguous, strided or micro-batches


class StepDocuments(Answer):
    """`lineage docs --step N`: every segment of every document in a step (or part of one)."""

    ROWS: ClassVar[str | None] = "documents"

    stream: str
    spec: str  # the stream spec version, e.g. lineage-stream/1
    spec_hash: str
    manifest_hash: str
    step: int
    windows: tuple[int, int]  # first and last window asked about
    # A rank whose windows are not consecutive (strided or micro-batch rank rules): its
    # windows, in order.
    rank_windows: tuple[int, ...] | None = optional()
    # Stated when the stream declares a batch-size schedule or a rank rule: the step's
    # windows under the schedule, and how its ranks split them.
    step_windows: tuple[int, int] | None = optional()
    rank_rule: RankRuleAnswer | None = optional(present_with="step_windows")
    documents: tuple[StepSegment, ...]


class Stream(Answer):
    """`lineage stream show`: one stream's parameters, spec hash, size and digest."""

    name: str
    spec: str  # the stream spec version, e.g. lineage-stream/1
    spec_hash: str  # blake3:<hex> of the canonical parameters
    corpus: str
    manifest_hash: str  # the corpus's manifest hash the stream orders
    seed: UInt64 | None  # 0 to 2^64 - 1; None for a stream recorded from a run's log
    seq_len: int  # tokens per window
    batch: int  # windows per step
    separator_tokens: int  # tokens between documents
    epochs: dict[str, str]  # source -> epochs as a decimal string, e.g. "0.5"
    token_budget: int | None  # None: no budget
    # Only when the stream declares them: windows per step by step ranges,
    # [[first step, windows per step], ...] (`batch` is then step 0's), and the rank rule.
    schedule: tuple[tuple[int, int], ...] | None = optional()
    rank_rule: RankRuleAnswer | None = optional()
    tokens: int  # tokens consumed: the windows of `steps` steps times seq_len
    windows: int
    steps: int
    occurrences: int  # rows of the occurrence table
    occurrences_digest: str  # blake3:<hex> under lineage-occurrences/1


class StreamSummary(Stream):
    """`lineage stream list`: one row per stream, the same fields as `Stream`."""


S = TypeVar("S", bound=Stream)


def shown_stream(record: StreamRecord | Stream) -> Stream:
    """A stream's record (lineage.stream.record) as `stream show` prints it."""
    return stream_answer(record, Stream)


def stream_answer(record: StreamRecord | Stream, kind: type[S]) -> S:
    """A stream's record (or its `Stream` answer) as `kind`: `Stream` for `stream show`,
    `StreamSummary` for a row of `stream list`."""
    if isinstance(record, Stream):
        schedule, rule = record.schedule, record.rank_rule
    else:
        schedule = None if record.schedule is None else record.schedule.segments
        rule = None if record.rank_rule is None else RankRuleAnswer(
            rule=record.rank_rule.rule, micro_batch=record.rank_rule.micro_batch)
    return kind(
        name=record.name, spec=record.spec, spec_hash=record.spec_hash, corpus=record.corpus,
        manifest_hash=record.manifest_hash,
        seed=None if record.seed is None else UInt64(record.seed), seq_len=record.seq_len,
        batch=record.batch, separator_tokens=record.separator_tokens,
        epochs=dict(record.epochs), token_budget=record.token_budget,
        # Only a stream that declares them shows them (docs/stream-spec.md §1).
        schedule=schedule, rank_rule=rule,
        tokens=record.tokens, windows=record.windows, steps=record.steps,
        occurrences=record.occurrences, occurrences_digest=record.occurrences_digest,
    )


class StreamCut(Answer):
    """What the end of a stream leaves out of its corpus: a stream is whole steps (within
    the token budget), and the packed corpus goes on past its last one."""

    tokens: int  # packed tokens (documents' and separators') past the stream's end
    documents: int  # documents left out: occurrences (a document in one epoch) wholly past it
    short: int  # 1 when the last occurrence in the stream is cut short (its rest past the end)


class StreamBuildResult(Answer):
    """`lineage stream build`: the stream recorded (or found already built) and its shape."""

    name: str
    status: str  # "added" or "unchanged" (built before with the same parameters)
    spec: str
    spec_hash: str
    corpus: str
    manifest_hash: str
    seed: UInt64 | None
    seq_len: int
    batch: int
    separator_tokens: int
    epochs: dict[str, str]
    token_budget: int | None
    schedule: tuple[tuple[int, int], ...] | None = optional()
    rank_rule: RankRuleAnswer | None = optional()
    tokens: int
    windows: int
    steps: int
    occurrences: int
    occurrences_digest: str
    # What the end cut off, when this call built the stream (not recorded in the catalog:
    # absent for a stream found already built).
    cut: StreamCut | None = optional()
    seconds: float = 0.0  # wall time of the build
