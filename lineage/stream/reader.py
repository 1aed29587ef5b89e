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
from pathlib import Path
from typing import Any

import blake3

from lineage.errors import StoreError, UsageError
from lineage.parts import part_files
from lineage.store import Store
from lineage.stream.query import _resolve, step_range, step_segments

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

    def __init__(self, store: Store, stream: str | None = None) -> None:
        self.store = store
        with store.reader(views=False) as con:
            self.info = _resolve(con, stream)
            row = con.execute("SELECT tokenizer FROM corpora WHERE name = ?",
                              [self.info["corpus"]]).fetchone()
        self.tokenizer = row[0] if row else None
        self.seq_len = int(self.info["seq_len"])

    def segments(
        self, step: int, *, rank: int | None = None, world_size: int | None = None
    ) -> list[Segment]:
        span = step_range(self.info, step, rank=rank, world_size=world_size)
        with self.store.reader(views=False) as con:
            found = step_segments(con, self.store, self.info, span)
        return [Segment(s["window"], s["rank"], s["position"], s["doc_id"], s["source"],
                        s["content_hash"], s["epoch"], s["token_start"], s["token_end"])
                for s in found]

    def windows(
        self, step: int, *, rank: int | None = None, world_size: int | None = None
    ) -> list[array[int]]:
        """The step's (or rank's) windows as arrays of seq_len token ids, in window order."""
        if self.tokenizer != "bytes":
            raise UsageError(f"tokens are available for byte-tokenized corpora only; corpus "
                             f"{self.info['corpus']!r} was counted with {self.tokenizer}")
        segments = self.segments(step, rank=rank, world_size=world_size)
        texts = self._texts({s.doc_id for s in segments})
        first = min(s.window for s in segments)
        count = max(s.window for s in segments) - first + 1
        out = [array("H", [SEPARATOR]) * self.seq_len for _ in range(count)]
        for s in segments:
            offset = s.position - s.window * self.seq_len
            chunk = texts[s.doc_id][s.token_start:s.token_end]
            out[s.window - first][offset:offset + len(chunk)] = array("H", list(chunk))
        return out

    def batch_digests(self, step: int, world_size: int) -> list[str]:
        """Per rank, the digest of its segments (lineage-batch/1), from one query."""
        from lineage.chain import batch_digest

        per_rank = int(self.info["batch"]) // world_size
        by_rank: list[list[Segment]] = [[] for _ in range(world_size)]
        first = step * int(self.info["batch"])
        for segment in self.segments(step):
            by_rank[(segment.window - first) // per_rank].append(segment)
        return [batch_digest(segments) for segments in by_rank]


    def _texts(self, doc_ids: set[str]) -> dict[str, bytes]:
        with self.store.reader(views=False) as con:
            files = part_files(con, self.store, "documents", self.info["corpus"])
            rows = con.execute(
                "SELECT doc_id, content_hash, origin, record FROM read_parquet(?) "
                "WHERE doc_id IN (SELECT unnest(?))", [files, sorted(doc_ids)]).fetchall()
            texts = {doc_id: _read_text(con, origin, record)
                     for doc_id, _, origin, record in rows if origin is not None}
        for doc_id, content_hash, origin, record in rows:
            data = texts.get(doc_id)
            if data is None:
                raise StoreError(f"document {doc_id!r} was ingested from a ready manifest: "
                                 "its text is not available")
            if blake3.blake3(data).hexdigest() != content_hash:
                where = origin if record is None else f"{origin} record {record}"
                raise StoreError(f"{where}: bytes of {doc_id!r} no longer match their "
                                 "content hash (the file changed after ingest)")
        return texts


def _read_text(con: Any, origin: str, record: int | None) -> bytes:
    if record is None:
        try:
            return Path(origin).read_bytes()
        except OSError as exc:
            raise StoreError(f"{origin}: cannot read the document ({exc.strerror})") from exc
    if origin.lower().endswith(".parquet"):
        sql = ("SELECT CAST(text AS VARCHAR) FROM read_parquet(?, file_row_number = true) "
               "WHERE file_row_number = ?")
    else:
        sql = ("SELECT text FROM (SELECT text, row_number() OVER () AS n FROM read_json(?, "
               "format = 'newline_delimited', columns = {text: 'VARCHAR'})) WHERE n = ?")
    row = con.execute(sql, [origin, record - 1 if "file_row" in sql else record]).fetchone()
    if row is None:
        raise StoreError(f"{origin}: record {record} is gone (the shard changed after ingest)")
    return str(row[0]).encode("utf-8")
