"""The typed answers of the stream questions (lineage.answer explains the pattern)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from lineage.answer import Answer, UInt64, optional


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


def shown_stream(row: Mapping[str, Any]) -> Stream:
    """A stream's catalog row (lineage.stream.query) as `stream show` prints it."""
    return stream_answer(row, Stream)


def stream_answer(row: Mapping[str, Any], kind: type[S]) -> S:
    """A stream's catalog row (lineage.stream.query's record, or a `Stream`) as `kind`:
    `Stream` for `stream show`, `StreamSummary` for a row of `stream list`."""
    return kind(
        name=row["name"], spec=row["spec"], spec_hash=row["spec_hash"], corpus=row["corpus"],
        manifest_hash=row["manifest_hash"], seed=row["seed"], seq_len=row["seq_len"],
        batch=row["batch"], separator_tokens=row["separator_tokens"], epochs=dict(row["epochs"]),
        token_budget=row["token_budget"],
        # Only a stream that declares them has the keys (docs/stream-spec.md §1).
        schedule=_schedule(row.get("schedule")), rank_rule=_rank_rule(row.get("rank_rule")),
        tokens=row["tokens"], windows=row["windows"], steps=row["steps"],
        occurrences=row["occurrences"], occurrences_digest=row["occurrences_digest"],
    )


def _schedule(declared: Sequence[Sequence[int]] | None) -> tuple[tuple[int, int], ...] | None:
    """A declared schedule's [[first step, windows per step], ...] as pairs."""
    if declared is None:
        return None
    return tuple((first, windows) for first, windows in declared)


def _rank_rule(declared: Mapping[str, Any] | None) -> RankRuleAnswer | None:
    """A declared rank rule ({"micro_batch"?, "rule"}, as RankRule.to_json writes it)."""
    if declared is None:
        return None
    return RankRuleAnswer(rule=declared["rule"], micro_batch=declared.get("micro_batch"))


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
