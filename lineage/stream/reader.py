"""The trainer's side of a stream: the segments and tokens of a step, from the store.

A training loop that reads its batches here consumes exactly the order the database
records, so the two agree by construction. Tokens are available for corpora counted with
the byte tokenizer (token ids 0-255 are the document's bytes, and SEPARATOR, 256, fills
the K separator positions between documents) and for corpora counted with a
tokenizer.json, given the same file (its BLAKE3 is checked against the corpus's record)
and the separator's token id. Each document's bytes are re-read from where they were
ingested and checked against their BLAKE3 hash.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.corpora.doc_text import (
    StoredDocument,
    document_locations,
    needs_scan,
    read_all_checked,
)
from lineage.errors import DamagedPartError, StoreError, UsageError
from lineage.store.base import BaseStore
from lineage.store.part_read import lookup_table
from lineage.stream.query import (
    step_range,
    step_segments,
    stream_named,
    stream_rank_rule,
    stream_schedule,
    window_piece_arrays,
)

if TYPE_CHECKING:
    import duckdb
    import numpy as np
    import tokenizers

SEPARATOR = 256  # the separator token of the byte tokenizer (ids 0-255 are bytes)
_DTYPES = {"H": "=u2", "I": "=u4"}  # array typecodes as numpy dtypes (native byte order)

# Where documents are is looked up for the steps ahead too: the documents of the steps of
# about this many tokens of windows (64 steps of 64 x 2048; at least the step itself), or
# of one rank's windows in them, at most READ_AHEAD_DOCUMENTS of them. In a shuffled
# stream a step's documents are spread over nearly every row group of a large documents
# table, and a lookup decodes those row groups whole; doing it once for 64 steps instead
# of once per step is what keeps a trainer that reads in order fast (bench/reader.py).
READ_AHEAD_TOKENS = 1 << 23
READ_AHEAD_DOCUMENTS = 1 << 16


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
    """Reads one stream: `segments(step)` and `windows(step)`, the step's token ids.

    `tokenizer`: the tokenizer.json a corpus was counted with (a file or its folder;
    checked by hash), and `separator` the token id (or token) the trainer puts in the
    separator positions; a byte-tokenized corpus needs neither (SEPARATOR fills them).
    Asked for steps in order, it looks ahead (READ_AHEAD_TOKENS): where the next steps'
    documents are, and the bytes of those only a shard scan reads, in one pass each."""

    def __init__(self, store: BaseStore, stream: str | None = None, *,
                 tokenizer: str | Path | None = None,
                 separator: int | str | None = None) -> None:
        from lineage.corpora.corpus_tokens import counted_with

        self.store = store
        with store.reader(views=False) as con:
            self.info = stream_named(con, stream)
            row = con.execute("SELECT tokenizer FROM corpora WHERE name = ?",
                              [self.info.corpus]).fetchone()
        self.tokenizer = row[0] if row else None
        if tokenizer is not None and self.tokenizer == "bytes":
            raise UsageError(f"corpus {self.info.corpus!r} was counted with the byte "
                             "tokenizer: its windows need no tokenizer.json")
        self._loaded = counted_with(self.tokenizer or "", tokenizer)  # checked by hash
        self._separator = separator
        self.seq_len = self.info.seq_len
        self.schedule = stream_schedule(self.info)  # windows per step, step by step
        self.rank_rule = stream_rank_rule(self.info)  # which windows each rank reads
        # The last segments read: a trainer asks for a step's windows, then its batch
        # digests, and the two are one read. (A stream's rows never change once built.)
        self._last: tuple[tuple[int, int | None, int | None], list[Segment]] | None = None
        # Where the documents of the steps read ahead are, the bytes of those that are read
        # by scanning a whole shard (checked when read: one scan per shard for all the
        # steps ahead, not one per step), and the step (and rank) whose windows were read
        # last: a reader reads ahead once it is asked for steps in order.
        self._located: dict[str, StoredDocument] = {}
        self._scanned: dict[str, bytes] = {}
        self._previous: tuple[int, int | None, int | None] | None = None  # step, rank, size
        self._read_alone_until = -1  # the last step of a read-ahead that met damage

    def segments(
        self, step: int, *, rank: int | None = None, world_size: int | None = None
    ) -> list[Segment]:
        with self.store.reader(views=False) as con:
            return self._segments(con, step, rank, world_size)

    def _segments(self, con: duckdb.DuckDBPyConnection, step: int, rank: int | None,
                  world_size: int | None) -> list[Segment]:
        asked = (step, rank, world_size)
        if self._last is not None and self._last[0] == asked:
            return list(self._last[1])
        span = step_range(self.info, step, rank=rank, world_size=world_size)
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
        (a rank's windows too, whatever its rank rule): `array('H')` when every id fits
        16 bits (the byte tokenizer, vocabularies up to 65,536), else `array('I')`."""
        encode, separator, typecode = self._tokens()
        with self.store.reader(views=False) as con:  # one connection for the whole step
            segments = self._segments(con, step, rank, world_size)
            located = self._locations(con, step, {s.doc_id for s in segments},
                                      (rank, world_size))
            texts = read_all_checked(con, [d for d in located if d.doc_id not in self._scanned])
            texts.update((d.doc_id, self._scanned[d.doc_id]) for d in located
                         if d.doc_id in self._scanned)
        self._previous = (step, rank, world_size)
        order = sorted({s.window for s in segments})
        index = {window: i for i, window in enumerate(order)}
        out = [array(typecode, [separator]) * self.seq_len for _ in order]
        tokens: dict[str, np.ndarray[Any, Any]] = {}  # a document split over windows: once
        for s in segments:
            if s.doc_id not in texts:
                raise StoreError(f"stream {self.info.name!r}: document {s.doc_id!r} of "
                                 f"step {step} is not in corpus {self.info.corpus!r}")
            if s.doc_id not in tokens:
                tokens[s.doc_id] = encode(texts[s.doc_id])
            ids = tokens[s.doc_id]
            if s.token_end > len(ids):
                raise StoreError(f"document {s.doc_id!r} encodes to {len(ids)} tokens, but "
                                 f"stream {self.info.name!r} reads it up to token "
                                 f"{s.token_end}: not the tokenizer the corpus was counted "
                                 "with")
            offset = s.position - s.window * self.seq_len
            chunk = array(typecode)
            chunk.frombytes(ids[s.token_start:s.token_end].astype(_DTYPES[typecode]).tobytes())
            out[index[s.window]][offset:offset + len(chunk)] = chunk
        return out

    def _tokens(self) -> tuple[Any, int, str]:
        """(encoder, separator id, array typecode) of this stream's corpus; UsageError
        when its tokens cannot be made here."""
        from lineage.corpora.corpus_tokens import corpus_encoder, text_encoder

        corpus, counted = self.info.corpus, self.tokenizer or "unknown"
        if counted == "bytes":
            encode = corpus_encoder(counted, None)
            separator = SEPARATOR if self._separator is None else self._separator
            if not isinstance(separator, int) or not 0 <= separator < 1 << 16:
                raise UsageError(f"separator {separator!r}: a byte-tokenized stream's "
                                 "separator is a token id from 0 to 65535")
            assert encode is not None
            return encode, separator, "H"
        if self._loaded is None:
            if counted.startswith("tokenizer.json:"):
                raise UsageError(f"corpus {corpus!r} was counted with {counted}: give "
                                 "StreamReader(..., tokenizer=) that tokenizer.json for its "
                                 "tokens")
            raise UsageError(f"corpus {corpus!r} was counted with {counted}: its tokens "
                             "are not known to the store, only their counts")
        return text_encoder(self._loaded), *self._separator_of(self._loaded)

    def _separator_of(self, loaded: tokenizers.Tokenizer) -> tuple[int, str]:
        """The separator's token id (given as an id or as a token) and the typecode that
        holds every id of the vocabulary and the separator."""
        given = self._separator
        if given is None:
            raise UsageError("a stream over a tokenizer.json corpus needs the separator's "
                             "token id: StreamReader(..., separator=ID or TOKEN), e.g. the "
                             "end-of-text token the trainer puts between documents")
        separator = loaded.token_to_id(given) if isinstance(given, str) else given
        if separator is None or separator < 0:
            raise UsageError(f"separator {given!r} is not a token of the tokenizer")
        largest = max(loaded.get_vocab_size(with_added_tokens=True) - 1, separator)
        return separator, "H" if largest < 1 << 16 else "I"

    def _locations(self, con: duckdb.DuckDBPyConnection, step: int, doc_ids: set[str],
                   part: tuple[int | None, int | None]) -> list[StoredDocument]:
        """Where `doc_ids` (of `step`, or of the rank `part` names) are. When one of them is
        not known yet they are looked up, with the documents of the next steps if the
        steps are being read in order (the step after the last one read, for the same
        rank): a step read alone costs less (0.4 s against 1 s at 1M documents)."""
        if not doc_ids <= self._located.keys():
            corpus = self.info.corpus
            in_order = (self._previous == (step - 1, *part)
                        and step > self._read_alone_until)
            self._scanned = {}
            try:
                ahead = self._doc_ids_ahead(con, step, part) if in_order else set()
                self._located = document_locations(con, self.store, corpus, doc_ids | ahead)
            except DamagedPartError:
                # Damage that only later steps need stops those steps, not this one; the
                # steps up to the end of this read-ahead are read alone.
                self._read_alone_until = self._last_step_ahead(step)
                self._located = document_locations(con, self.store, corpus, doc_ids)
                in_order = False
            if in_order:
                self._scan_ahead(con)
        return [self._located[doc_id] for doc_id in sorted(doc_ids) if doc_id in self._located]

    def _scan_ahead(self, con: duckdb.DuckDBPyConnection) -> None:
        """The bytes of the documents read ahead that only a scan of their shard reads."""
        scanned = [self._located[doc_id] for doc_id in sorted(self._located)
                   if needs_scan(self._located[doc_id])]
        try:
            self._scanned = read_all_checked(con, scanned)
        except StoreError:
            # A shard changed since ingest: each step reads its own documents, and only
            # the steps that need the changed ones stop.
            self._scanned = {}

    def _last_step_ahead(self, step: int) -> int:
        """The last step a read-ahead from `step` covers: about READ_AHEAD_TOKENS tokens
        of windows, whatever the batch size of the steps after it."""
        ahead = max(self.schedule.windows_of(step), READ_AHEAD_TOKENS // self.seq_len)
        last_window = self.schedule.first_window(step) + ahead - 1
        return min(self.info.steps - 1, self.schedule.step_of_window(last_window))

    def _doc_ids_ahead(self, con: duckdb.DuckDBPyConnection, step: int,
                       part: tuple[int | None, int | None]) -> set[str]:
        """The doc_ids of the steps from `step` to `_last_step_ahead(step)` (only in the
        windows of the rank `part` names, if any), the first READ_AHEAD_DOCUMENTS."""
        import numpy as np

        last = self._last_step_ahead(step)
        first_window = self.schedule.first_window(step)
        end_window = self.schedule.step_range(last).stop
        columns = ("doc_id", "stream_start", "stream_end")
        rows = lookup_table(con, self.store, "occurrences", self.info.name, columns,
                            span=(first_window * self.seq_len, end_window * self.seq_len))
        if rows is None:
            return set()
        rank, world_size = part
        if rank is not None and world_size is not None:
            # Only the occurrences with a piece in one of the rank's windows of these steps
            # (cut at window edges as `docs` cuts them).
            mine = [window for each in range(step, last + 1) for window in
                    self.rank_rule.windows(self.schedule.step_range(each), rank, world_size)]
            row, window, _, _ = window_piece_arrays(
                rows["stream_start"].to_numpy(), rows["stream_end"].to_numpy(), self.seq_len,
                first_window, end_window - 1)
            rows = rows.take(np.unique(row[np.isin(window, mine)]))  # still in stream order
        in_order = dict.fromkeys(rows["doc_id"].to_pylist())  # rows are in stream order
        return set(list(in_order)[:READ_AHEAD_DOCUMENTS])

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
