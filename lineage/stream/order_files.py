"""The order of `lineage-stream/1` (docs/stream-spec.md §2-4) out of core, on files.

For corpora whose occurrence arrays do not fit the build's memory budget. The same steps
as `lineage.stream.order`, each over pieces that fit, with plain binary files of
fixed-width rows in the build's staging folder between them:

1. keys (`write_keys`): DuckDB computes the key (SHA-256) of every (document, epoch)
   from the documents' parts, batch by batch; each row (rid, n_tokens, the key's first
   8 bytes) is appended to the file of its sequence (source, epoch) and key range (the
   top bits of those 8 bytes);
2. sequences (`write_sequences`): a source's sequence is its epochs' ranges in order,
   each sorted by key; a running sum of tokens truncates it at the source's budget.
   One file per source: (rid, epoch, n_tokens, tokens before the row);
3. merge (`merge_sequences`): the sources' sequences merged by the spec's merge key, a
   block of each at a time (a k-way merge: the rows up to the smallest of the non-final
   blocks' last keys are in their final order), packed and written in ordinal order
   (rid, epoch, n_tokens, stream_start) up to the stream's cut.

Memory is one key range (`ROWS_PER_RANGE`) or one merge round (`MERGE_ROWS`) at a time,
whatever the corpus; the files take about 56 bytes an occurrence at the peak. The property
tests hold this path, with ranges and blocks of a few rows, to the spec's reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.stream.order import _order_ties, _runs, merge_keys

if TYPE_CHECKING:
    import duckdb
    import numpy as np
    import numpy.typing as npt

ROWS_PER_RANGE = 4_000_000  # rows of one key range sorted at a time: ~200 MB with the sort
MERGE_ROWS = 4_000_000  # rows of all sources' blocks in one merge round
KEY_BATCH_ROWS = 1_000_000  # rows DuckDB hands over at a time

KEY_ROW = [("rid", "<i8"), ("n_tokens", "<i8"), ("k64", "<u8")]
SEQUENCE_ROW = [("rid", "<i8"), ("epoch", "<i8"), ("n_tokens", "<i8"), ("c_before", "<i8")]
PLACED_ROW = [("rid", "<i8"), ("epoch", "<i8"), ("n_tokens", "<i8"), ("stream_start", "<i8")]

# Every (document, epoch) of the documents' parts with its rid (table `part_rows`: each
# part's path and first rid), its source's rank and the key's first 8 bytes (spec §2);
# table `src` holds the sources (src hex, epochs drawn, rank). `{documents}`: the parts
# read with filename and file_row_number (`KEYS_SQL`), or some rows of one (a task's).
KEYS_OF = """
    SELECT p.first_rid + d.file_row_number AS rid, s.srank::INTEGER AS srank,
           e.epoch::INTEGER AS epoch, d.n_tokens,
           ('0x' || left(sha256(concat(?, s.src, chr(10), e.epoch::VARCHAR, chr(10),
                                       d.doc_id)), 16))::UBIGINT AS k64
    FROM {documents} d
    JOIN part_rows p ON p.path = d.filename
    JOIN src s USING (source),
    LATERAL (SELECT unnest(range(s.n_epochs)) AS epoch) e
"""
KEYS_SQL = KEYS_OF.format(documents="read_parquet(?, filename = true, file_row_number = true)")

# (rid, srank, epoch) -> the row's full sort key: (SHA-256 digest, doc_id bytes), for the
# rare rows whose 64-bit key prefixes are equal
FullKey = Callable[[int, int, int], tuple[bytes, bytes]]


@dataclass(frozen=True)
class Source:
    """One source of the corpus, in `src` order (its rank is its place in the list)."""

    src: str  # the SHA-256 hex of its name, as the key hashes it
    documents: int
    epochs: int  # epochs drawn
    budget: int  # tokens kept at most


@dataclass(frozen=True)
class Sequence:
    """A source's kept rows in sequence order, in `path`."""

    path: Path
    rows: int
    tokens: int  # kept tokens: S, the merge key's denominator


def range_bits(sources: list[Source]) -> int:
    """Key ranges per sequence as a power of two: about ROWS_PER_RANGE rows each."""
    largest = max((source.documents for source in sources), default=0)
    return max(0, math.ceil(math.log2(max(largest / ROWS_PER_RANGE, 1))))


def _key_file(folder: Path, srank: int, epoch: int, key_range: int, task: str = "") -> Path:
    return folder / f"keys-{srank:04d}-{epoch:04d}-{key_range:06d}{task}.bin"


def write_keys(con: duckdb.DuckDBPyConnection, prefix: str, parts: list[tuple[str, int]],
               sources: list[Source], folder: Path, bits: int) -> None:
    """Every (document, epoch) of the documents' `parts` (path, rid of the first row),
    appended to its sequence's key-range file (table `src` must exist)."""
    con.execute("CREATE OR REPLACE TABLE part_rows (path VARCHAR, first_rid BIGINT)")
    con.executemany("INSERT INTO part_rows VALUES (?, ?)", parts)
    reader = con.sql(KEYS_SQL, params=[prefix, [path for path, _ in parts]]
                     ).to_arrow_reader(KEY_BATCH_ROWS)
    epochs = max((source.epochs for source in sources), default=1)
    for batch in reader:
        _append_keys(batch, folder, bits, epochs)


@dataclass(frozen=True)
class KeyTask:
    """Some rows of one documents part, whose keys a task writes to files of its own."""

    path: str
    first_rid: int  # the rid of the part's first row
    rows: tuple[int, int]  # the part's rows this task reads: [start, end)
    prefix: str  # the key's prefix (spec, seed)
    sources: tuple[tuple[str, str, int, int], ...]  # (source, src hex, epochs, srank)
    folder: str
    bits: int
    number: int  # the task's files end in -t<number>


def task_keys(task: KeyTask) -> int:
    """`write_keys` for one task's rows (in a process of its own, on a cluster): its
    files beside the other tasks' in the shared folder; the rows written."""
    epochs = max((source[2] for source in task.sources), default=1)
    return sum(_append_keys(batch, Path(task.folder), task.bits, epochs,
                            f"-t{task.number:06d}")
               for batch in part_key_batches(task.path, task.first_rid, task.rows,
                                             task.prefix, task.sources))


def part_key_batches(path: str, first_rid: int, rows: tuple[int, int], prefix: str,
                     sources: tuple[tuple[str, str, int, int], ...]) -> Iterator[Any]:
    """KEYS_OF's rows for rows [start, end) of one documents part, in batches, from a
    DuckDB session of one thread (a task's: a task per core); `sources` as in KeyTask."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        con.execute("SET threads = 1")
        con.execute("SET preserve_insertion_order = false")  # rows carry their rid
        con.execute("CREATE TABLE src (source VARCHAR, src VARCHAR, n_epochs BIGINT, "
                    "srank INTEGER)")
        con.executemany("INSERT INTO src VALUES (?, ?, ?, ?)", list(sources))
        con.execute("CREATE TABLE part_rows AS SELECT ?::VARCHAR AS path, "
                    "?::BIGINT AS first_rid", [path, first_rid])
        documents = ("(SELECT * FROM read_parquet(?, filename = true, file_row_number = true)"
                     " WHERE file_row_number >= ? AND file_row_number < ?)")
        yield from con.sql(KEYS_OF.format(documents=documents), params=[prefix, path, *rows]
                           ).to_arrow_reader(KEY_BATCH_ROWS)
    finally:
        con.close()


def groups(keys: Any) -> Iterator[tuple[int, Any]]:
    """(key, the positions holding it, in position order) for each key, ascending."""
    import numpy as np

    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    for start, end in zip(*_runs(ordered), strict=True):
        yield int(ordered[start]), order[start:end]


def _append_keys(batch: Any, folder: Path, bits: int, epochs: int, task: str = "") -> int:
    """A batch of KEYS_OF's rows appended to their (source, epoch, key range) files."""
    import numpy as np

    columns = {name: batch.column(name).to_numpy() for name in batch.schema.names}
    rows = np.empty(batch.num_rows, dtype=KEY_ROW)
    for name, _ in KEY_ROW:
        rows[name] = columns[name]
    key_range = (rows["k64"] >> np.uint64(64 - bits)).astype(np.int64) if bits else 0
    file_of = (columns["srank"].astype(np.int64) * epochs + columns["epoch"]) \
        * (1 << bits) + key_range
    for number, selected in groups(file_of):
        group, key_range_of = divmod(number, 1 << bits)
        srank, epoch = divmod(group, epochs)
        with open(_key_file(folder, srank, epoch, key_range_of, task), "ab") as out:
            rows[selected].tofile(out)
    return len(rows)


def write_sequences(sources: list[Source], folder: Path, bits: int,
                    full_key: FullKey) -> list[Sequence]:
    """Each source's sequence, truncated at its budget, from its key-range files (which
    are removed once read)."""
    import numpy as np

    sequences = []
    for srank, source in enumerate(sources):
        path = folder / f"sequence-{srank:04d}.bin"
        carry = rows = 0  # tokens and rows kept so far
        full = False
        with open(path, "wb") as out:
            for epoch in range(source.epochs):
                for key_range in range(1 << bits):
                    # the local build's file, or the tasks' (each task's rows in its own)
                    keys = sorted(folder.glob(_key_file(folder, srank, epoch, key_range,
                                                        "*").name))
                    if not keys or full:
                        for read in keys:
                            read.unlink()
                        continue
                    ranged = _sorted_range(keys, srank, epoch, full_key)
                    for read in keys:
                        read.unlink()
                    inclusive = carry + np.cumsum(ranged["n_tokens"])
                    kept = int(np.searchsorted(inclusive, source.budget, side="right"))
                    block = np.empty(kept, dtype=SEQUENCE_ROW)
                    block["rid"] = ranged["rid"][:kept]
                    block["epoch"] = epoch
                    block["n_tokens"] = ranged["n_tokens"][:kept]
                    block["c_before"] = inclusive[:kept] - block["n_tokens"]
                    block.tofile(out)
                    rows += kept
                    if kept:
                        carry = int(inclusive[kept - 1])
                    full = kept < len(ranged)  # the budget ends in this range
        sequences.append(Sequence(path, rows, carry))
    return sequences


def _sorted_range(paths: list[Path], srank: int, epoch: int, full_key: FullKey) -> Any:
    """One key range's rows sorted by key; rows whose 64-bit prefixes agree by their
    full keys (as `lineage.stream.order` orders them), so the files' order is not the
    order's."""
    import numpy as np

    rows = np.concatenate([np.fromfile(path, dtype=KEY_ROW) for path in paths])
    order = np.argsort(rows["k64"])
    by_key = rows["k64"][order]
    tied = np.flatnonzero(by_key[1:] == by_key[:-1])
    if len(tied):
        rids = rows["rid"]
        _order_ties(order, tied, lambda positions: [
            full_key(int(rid), srank, epoch) for rid in rids[positions].tolist()])
    return rows[order]


def merge_sequences(sequences: list[Sequence], separator_tokens: int, tokens: int,
                    out: Path) -> tuple[int, int | None]:
    """The sequences merged (spec §3) and packed (§4) into `out` in ordinal order, up
    to the first occurrence that starts at or past `tokens`: (occurrences written, the
    end of the last one, None when none is)."""
    import numpy as np

    totals = np.array([sequence.tokens for sequence in sequences], dtype=np.int64)
    maps = [np.memmap(s.path, dtype=SEQUENCE_ROW, mode="r") if s.rows else None
            for s in sequences]
    cursors = [0] * len(sequences)
    block_rows = max(MERGE_ROWS // max(len(sequences), 1), 1)
    written, start = 0, 0  # rows written; the next row's stream_start
    last_end: int | None = None
    with open(out, "wb") as placed_file:
        while True:
            blocks = _blocks(sequences, maps, cursors, block_rows, totals)
            if not blocks:
                break
            frontier = _frontier(blocks)
            rounds = [_take_until(block, frontier) for block in blocks]
            merged = _merged(rounds)
            step = merged["n_tokens"] + separator_tokens
            starts = start + np.cumsum(step) - step
            kept = int(np.searchsorted(starts, tokens, side="left"))  # starts grow
            placed = np.empty(kept, dtype=PLACED_ROW)
            for name in ("rid", "epoch", "n_tokens"):
                placed[name] = merged[name][:kept]
            placed["stream_start"] = starts[:kept]
            placed.tofile(placed_file)
            written += kept
            if kept:
                last_end = int(starts[kept - 1] + merged["n_tokens"][kept - 1])
            if kept < len(starts):
                break  # the cut: every later occurrence starts later still
            start = int(starts[-1] + step[-1]) if len(step) else start
            for block, taken in zip(blocks, rounds, strict=True):
                cursors[block.srank] += len(taken["rid"])
    return written, last_end


@dataclass
class _Block:
    srank: int
    first_q: int
    rows: Any  # SEQUENCE_ROW records
    high: npt.NDArray[np.bool_]
    low: npt.NDArray[np.uint64]
    final: bool  # the source's last rows


def _blocks(sequences: list[Sequence], maps: list[Any], cursors: list[int], block_rows: int,
            totals: Any) -> list[_Block]:
    import numpy as np

    blocks = []
    for srank, (sequence, rows) in enumerate(zip(sequences, maps, strict=True)):
        begin = cursors[srank]
        if rows is None or begin >= sequence.rows:
            continue
        end = min(begin + block_rows, sequence.rows)
        block = np.array(rows[begin:end])
        high, low = merge_keys(np.full(len(block), srank, dtype=np.int64),
                               block["c_before"], block["n_tokens"], totals)
        blocks.append(_Block(srank, begin, block, high, low, end == sequence.rows))
    return blocks


def _frontier(blocks: list[_Block]) -> tuple[int, int, int] | None:
    """The smallest (high, low, srank) of the last rows of the blocks that are not a
    source's last: every row up to it is in its final place. None: all blocks are final."""
    lasts = [(int(b.high[-1]), int(b.low[-1]), b.srank) for b in blocks if not b.final]
    return min(lasts) if lasts else None


def _take_until(block: _Block, frontier: tuple[int, int, int] | None) -> dict[str, Any]:
    """The block's rows that come no later than the frontier row (all: no frontier)."""
    import numpy as np

    count = len(block.rows)
    if frontier is not None:
        high, low, srank = frontier
        inclusive = block.srank <= srank  # equal keys: the smaller source first
        below = int(len(block.high) - np.count_nonzero(block.high))  # high rows come last
        if high:
            count = below + (len(block.high) - below if inclusive else 0)
        else:
            count = int(np.searchsorted(block.low[:below], np.uint64(low),
                                        side="right" if inclusive else "left"))
    rows = block.rows[:count]
    return {"rid": rows["rid"], "epoch": rows["epoch"], "n_tokens": rows["n_tokens"],
            "high": block.high[:count], "low": block.low[:count],
            "srank": np.full(count, block.srank, dtype=np.int64),
            "q": block.first_q + np.arange(count, dtype=np.int64)}


def _merged(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """This round's rows of every source in merge order: (m, srank, q)."""
    import numpy as np

    columns = {name: np.concatenate([r[name] for r in rounds]) for name in rounds[0]}
    order = np.lexsort((columns["q"], columns["srank"], columns["low"], columns["high"]))
    return {name: values[order] for name, values in columns.items()}
