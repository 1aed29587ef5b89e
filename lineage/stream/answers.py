"""The typed answers of the stream questions (lineage.answer explains the pattern)."""

from __future__ import annotations

from typing import ClassVar

from lineage.answer import Answer


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


class StepDocuments(Answer):
    """`lineage docs --step N`: every segment of every document in a step (or part of one)."""

    ROWS: ClassVar[str | None] = "documents"

    stream: str
    spec: str  # the stream spec version, e.g. lineage-stream/1
    spec_hash: str
    manifest_hash: str
    step: int
    windows: tuple[int, int]  # first and last window asked about
    documents: tuple[StepSegment, ...]
