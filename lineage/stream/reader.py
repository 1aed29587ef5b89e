"""The trainer's side of a stream: the segments and tokens of a step, from the store.

A training loop that reads its batches here consumes exactly the order the database
records, so the two agree by construction. Tokens are available for corpora ingested
with text and the byte tokenizer: token ids 0-255 are the document's bytes, and
SEPARATOR (256) fills the K separator positions between documents. Each document's
bytes are re-read from where they were ingested and checked against their BLAKE3 hash.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from lineage.corpora.doc_text import document_texts
from lineage.errors import UsageError
from lineage.store.base import BaseStore
from lineage.stream.query import (
    _resolve,
    step_range,
    step_segments,
    stream_rank_rule,
    stream_schedule,
)

SEPARATOR = 256  # the separator token of the byte tokenizer (ids 0-255 are bytes)


@dataclass(frozen=True)
class Segment:
    window: int
    rank: int | None
    position: int  # first token of the segment in the stream
    doc_id: str
    source: str
    content_hash: str
    epoch: int
    token_start: int  # offsets inside the document
    token_end: int


class StreamReader:
    """Reads one stream: `segments(step)` and, for byte-tokenized text, `windows(step)`."""

    def __init__(self, store: BaseStore, stream: str | None = None) -> None:
        self.store = store
        with store.reader(views=False) as con:
            self.info = _resolve(con, stream)
            row = con.execute("SELECT tokenizer FROM corpora WHERE name = ?",
                              [self.info["corpus"]]).fetchone()
        self.tokenizer = row[0] if row else None
        self.seq_len = int(self.info["seq_len"])
        self.schedule = stream_schedule(self.info)  # windows per step, step by step
        self.rank_rule = stream_rank_rule(self.info)  # which windows each rank reads
        # The last segments read: a trainer asks for a step's windows, then its batch
        # digests, and the two are one read. (A stream's rows never change once built.)
        self._last: tuple[tuple[int, int | None, int | None], list[Segment]] | None = None

    def segments(
        self, step: int, *, rank: int | None = None, world_size: int | None = None
    ) -> list[Segment]:
        asked = (step, rank, world_size)
        if self._last is not None and self._last[0] == asked:
            return list(self._last[1])
        span = step_range(self.info, step, rank=rank, world_size=world_size)
        with self.store.reader(views=False) as con:
            found = step_segments(con, self.store, self.info, span)
        segments = [Segment(s["window"], s["rank"], s["position"], s["doc_id"], s["source"],
                            s["content_hash"], s["epoch"], s["token_start"], s["token_end"])
                    for s in found]
        self._last = (asked, segments)
        return list(segments)

    def windows(
        self, step: int, *, rank: int | None = None, world_size: int | None = None
    ) -> list[array[int]]:
        """The step's (or rank's) windows as arrays of seq_len token ids, in window order
        (a rank's windows too, whatever its rank rule)."""
        if self.tokenizer != "bytes":
            raise UsageError(f"tokens are available for byte-tokenized corpora only; corpus "
                             f"{self.info['corpus']!r} was counted with {self.tokenizer}")
        segments = self.segments(step, rank=rank, world_size=world_size)
        texts = document_texts(self.store, self.info["corpus"], {s.doc_id for s in segments})
        order = sorted({s.window for s in segments})
        index = {window: i for i, window in enumerate(order)}
        out = [array("H", [SEPARATOR]) * self.seq_len for _ in order]
        for s in segments:
            offset = s.position - s.window * self.seq_len
            chunk = texts[s.doc_id][s.token_start:s.token_end]
            out[index[s.window]][offset:offset + len(chunk)] = array("H", list(chunk))
        return out

    def batch_digests(self, step: int, world_size: int) -> list[str]:
        """Per rank, the digest of its segments (lineage-batch/1), from one query; the
        ranks split the step by the stream's rank rule."""
        from lineage.stream.batch_digest import batch_digest

        windows = self.schedule.step_range(step)
        self.rank_rule.check(len(windows), world_size)
        by_rank: list[list[Segment]] = [[] for _ in range(world_size)]
        for segment in self.segments(step):
            rank = self.rank_rule.rank_of(segment.window - windows.start, len(windows),
                                          world_size)
            by_rank[rank].append(segment)
        return [batch_digest(segments) for segments in by_rank]
