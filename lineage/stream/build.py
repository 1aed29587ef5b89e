"""Build a `lineage-stream/1` stream over a recorded corpus (docs/stream-spec.md).

Everything runs outside the catalog lock. DuckDB reads the corpus and computes the keys
(SHA-256, §2) on all cores; numpy sorts, truncates, interleaves and packs the occurrences
(§2-4, `lineage.stream.order`) when its arrays fit the build's memory budget, and the
two tables are written by `lineage.stream.tables`: the occurrence table in ordinal
order, its digest computed from the same batches, and a copy in content-hash order that
answers "trained on?". A corpus whose arrays do not fit is ordered and written out of
core, through files in the store's staging folder that are read a bucket at a time
(`lineage.stream.order_files`, `lineage.stream.tables_files`): the same rows and bytes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.answer import UInt64
from lineage.corpora.manifest import NAME_RULE, is_valid_name
from lineage.errors import ConflictError, UnknownObjectError, UsageError, too_little_memory
from lineage.store import faults
from lineage.store.arrays_write import (
    discard_arrays,
    prepare_stream_arrays,
    publish_arrays,
)
from lineage.store.base import BaseStore
from lineage.store.durable import guarded_write, remove_quietly
from lineage.store.part_select import check_all_parts
from lineage.store.parts import (
    Progress,
    WrittenPart,
    discard_parts,
    publish_parts,
    unpublish_unless_unknown,
)
from lineage.store.parts import report as report_progress
from lineage.store.scratch import new_staging_dir, spilling_connection
from lineage.stream.answers import RankRuleAnswer, StreamBuildResult, StreamCut, shown_stream
from lineage.stream.order import Candidates, Placed, place
from lineage.stream.order_files import KEYS_SQL
from lineage.stream.schedule import BatchSchedule, RankRule
from lineage.stream.shuffle import Distributed, Executor, sorted_candidates
from lineage.stream.spec import (
    STREAM_SPEC,
    RecordedSpec,
    StreamSpec,
    epochs_drawn,
    parse_epochs,
    source_budget,
)
from lineage.stream.tables import CorpusParts, write_canonical

if TYPE_CHECKING:
    import duckdb

    from lineage.store.arrays_rows import StreamColumns
    from lineage.stream.imported import ImportedSpec
    from lineage.stream.order import UIntArray
    from lineage.stream.record import StreamRecord

_FETCH_ROWS = 65_536


@guarded_write
def build_stream(
    store: BaseStore,
    *,
    corpus: str,
    name: str,
    seed: int,
    seq_len: int,
    batch: int | None = None,
    schedule: BatchSchedule | None = None,
    rank_rule: RankRule | None = None,
    separator_tokens: int = 1,
    epochs: list[str] | dict[str, str] | None = None,
    token_budget: int | None = None,
    memory_limit: str = "1GB",
    progress: Progress = None,
    executor: Executor | None = None,
) -> StreamBuildResult:
    """Compute and record the canonical order; re-building the same stream is a no-op.

    `batch` windows every step, or a `schedule` of windows per step by step ranges (then
    `batch` may be left out); `rank_rule` says how ranks split a step (contiguous when
    left out). Neither changes the order of windows, only where steps and ranks cut it.
    `executor` computes and sorts the keys as tasks (`lineage.stream.shuffle`); the
    stream is the same.
    """
    started = time.monotonic()
    if not is_valid_name(name):
        raise UsageError(f"--name {name!r}: {NAME_RULE}")
    batch = first_batch(batch, schedule)
    manifest_hash, sources, parts, hash_parts = _corpus_facts(store, corpus)
    spec = StreamSpec(
        manifest_hash=manifest_hash, seed=seed, seq_len=seq_len, batch=batch,
        separator_tokens=separator_tokens, epochs=parse_epochs(epochs, sorted(sources)),
        token_budget=token_budget, schedule=schedule, rank_rule=rank_rule,
    )
    existing = _existing(store, name)
    if existing is not None:
        if existing.spec_hash != spec.spec_hash:
            raise ConflictError(f"stream {name!r} exists with other parameters "
                                f"({existing.spec_hash}); choose another --name")
        found = {**shown_stream(existing).to_dict(), "status": "unchanged",
                 "seconds": round(time.monotonic() - started, 3)}
        return StreamBuildResult.from_dict(
            {f.name: found[f.name] for f in dataclasses.fields(StreamBuildResult)
             if f.name in found})
    staging = new_staging_dir(store.staging_dir)
    try:
        built = _build(store, spec, corpus, name, sources, parts, hash_parts, staging,
                       memory_limit, progress,
                       None if executor is None else Distributed(executor, staging))
        status = commit_stream(store, name, corpus, spec, built)
    finally:
        remove_quietly(staging)
    return StreamBuildResult(
        name=name, status=status, spec=STREAM_SPEC, spec_hash=spec.spec_hash, corpus=corpus,
        manifest_hash=manifest_hash, seed=UInt64(seed), seq_len=seq_len, batch=batch,
        separator_tokens=separator_tokens, epochs=spec.epochs, token_budget=token_budget,
        schedule=_declared_schedule(spec),
        rank_rule=RankRuleAnswer(**spec.rank_rule.to_json()) if spec.rank_rule else None,
        tokens=built.tokens, windows=built.windows, steps=built.steps,
        occurrences=built.occurrences, occurrences_digest=built.digest,
        cut=_cut_answer(built.cut), seconds=round(time.monotonic() - started, 3),
    )


def _cut_answer(cut: Cut | None) -> StreamCut | None:
    if cut is None:
        return None
    return StreamCut(tokens=cut.tokens, documents=cut.documents, short=cut.short)


def rebuild_parts(store: BaseStore, name: str, staging: Path) -> list[WrittenPart] | str:
    """The parts of a canonical stream built again from its corpus and its recorded
    parameters, as temporary files (nothing is committed): `lineage store repair` puts
    back those whose SHA-256 the catalog recorded. A text saying why not when the stream
    cannot be rebuilt here (a recorded or imported order: its inputs are not kept)."""
    with store.reader(views=False) as con:
        row = con.execute("SELECT spec, spec_hash, parameters, corpus FROM streams "
                          "WHERE name = ?", [name]).fetchone()
    if row is None:
        return f"no stream named {name!r}"
    kind, spec_hash, parameters, corpus = row
    if kind != STREAM_SPEC:
        return f"a {kind} stream is rebuilt by importing its order again"
    spec = StreamSpec.from_parameters(parameters)
    if spec.spec_hash != spec_hash:
        return "its recorded parameters do not hash to its spec_hash"
    manifest_hash, sources, parts, hash_parts = _corpus_facts(store, corpus)
    if manifest_hash != spec.manifest_hash:
        return f"its corpus {corpus!r} now holds other content"
    built = _build(store, spec, corpus, name, sources, parts, hash_parts, staging, "1GB", None,
                   arrays=False)
    return [*built.parts, *built.hash_parts]


def first_batch(batch: int | None, schedule: BatchSchedule | None) -> int:
    """The windows of step 0: `batch`, or the schedule's first segment."""
    if schedule is None:
        if batch is None:
            raise UsageError("give --batch (windows per step) or a --schedule")
        return batch
    if batch is not None and batch != schedule.segments[0][1]:
        raise UsageError(f"--batch {batch} and --schedule {schedule.to_text()} disagree "
                         "about step 0: give one of them")
    return schedule.segments[0][1]


def _declared_schedule(spec: StreamSpec) -> tuple[tuple[int, int], ...] | None:
    return None if spec.schedule is None else spec.schedule.segments


@dataclass(frozen=True)
class Cut:
    """What a stream built over a corpus leaves out: it ends at the last whole step (of
    the token budget, when there is one), and the packed corpus goes on past it."""

    tokens: int  # packed tokens (documents' and separators') past the stream's end
    documents: int  # occurrences (a document in one epoch) with no token in the stream
    short: int  # occurrences whose first tokens are in the stream and the rest past it

    @staticmethod
    def of(packed: int, consumed: int, occurrences: int, kept: int,
           last_end: int | None) -> Cut:
        """`kept` of `occurrences` start before `consumed`; the last of them ends at
        `last_end` (None: none does)."""
        short = int(last_end is not None and last_end > consumed)
        return Cut(packed - consumed, occurrences - kept, short)


@dataclass
class Built:
    tokens: int
    windows: int
    steps: int
    occurrences: int
    digest: str
    parts: list[WrittenPart]
    hash_parts: list[WrittenPart]
    cut: Cut | None = None  # for a stream built over a corpus
    columns: StreamColumns | None = None  # the lookup arrays file's, spooled by the build


def _corpus_facts(store: BaseStore, corpus: str) -> tuple[
        str, dict[str, tuple[int, int]], list[tuple[str, int]], list[str]]:
    """(manifest hash, (documents, tokens) per source, the documents' parts in doc_id
    order with their row counts, the document_hashes parts in content-hash order)."""
    with store.reader(views=False) as con:
        row = con.execute("SELECT manifest_hash FROM corpora WHERE name = ?", [corpus]).fetchone()
        if row is None:
            raise UnknownObjectError(
                f"no corpus named {corpus!r}: `lineage corpus list` shows them")
        sources = {source: (documents, tokens) for source, documents, tokens in con.execute(
            "SELECT source, documents, tokens FROM corpus_sources WHERE corpus = ? "
            "ORDER BY source", [corpus]).fetchall()}
        parts = con.execute(
            "SELECT table_name, path, n_rows FROM parquet_files WHERE owner = ? "
            "AND table_name IN ('documents', 'document_hashes') ORDER BY path",
            [corpus]).fetchall()
        check_all_parts(con, store, [path for _, path, _ in parts])  # a build reads them all
    documents = [(str(store.root / path), n) for table, path, n in parts if table == "documents"]
    hashes = [str(store.root / path) for table, path, _ in parts if table == "document_hashes"]
    return row[0], sources, documents, hashes


def _existing(store: BaseStore, name: str) -> StreamRecord | None:
    from lineage.stream.query import stream_row

    with store.reader(views=False) as con:
        return stream_row(con, name)


def _build(
    store: BaseStore, spec: StreamSpec, corpus: str, name: str, sources: dict[str, tuple[int, int]],
    parts: list[tuple[str, int]], hash_parts: list[str], staging: Any, memory_limit: str,
    progress: Progress, distributed: Distributed | None = None, *, arrays: bool = True,
) -> Built:
    """`arrays`: spool the lookup arrays file's columns where the order is held in
    memory (`Built.columns`)."""
    import duckdb

    con = spilling_connection(Path(staging), memory_limit)
    try:
        return _build_within(con, store, spec, corpus, name, sources, parts, hash_parts,
                             memory_limit, Path(staging), progress, distributed,
                             arrays=arrays)
    except duckdb.OutOfMemoryException as exc:
        raise too_little_memory(f"--memory-limit {memory_limit}", "build", exc) from exc
    finally:
        con.close()


def _build_within(
    con: duckdb.DuckDBPyConnection, store: BaseStore, spec: StreamSpec, corpus: str, name: str,
    sources: dict[str, tuple[int, int]], parts: list[tuple[str, int]],
    hash_parts: list[str], memory_limit: str, staging: Path, progress: Progress,
    distributed: Distributed | None = None, *, arrays: bool = True,
) -> Built:
    """The order in memory when its arrays fit the budget, else out of core (in this
    process, whatever the executor)."""
    rows = _source_rows(con, spec, sources)
    candidates = sum(sources[source][0] * n_epochs for source, _, n_epochs, _ in rows)
    report_progress(progress, "ordering documents", 0, 3)
    if candidates * IN_MEMORY_BYTES_PER_ROW <= memory_bytes(memory_limit):
        return _build_in_memory(con, store, spec, corpus, name, rows, parts, hash_parts,
                                progress, distributed,
                                arrays_folder=staging / "arrays" if arrays else None)
    return _build_out_of_core(con, store, spec, corpus, name, sources, rows, parts, staging,
                              progress, distributed)


# What the in-memory order holds per (document, epoch), measured at 10M documents. When
# that fits the build's memory budget, the order is computed in numpy arrays; otherwise
# through files, a bucket at a time. The budget is then used twice at most: once by
# DuckDB, once by the arrays.
IN_MEMORY_BYTES_PER_ROW = 100


def memory_bytes(limit: str) -> int:
    """'1GB', '512MB', '2GiB' ... as bytes (KB/MB/GB are powers of 1000, as in DuckDB)."""
    import re

    found = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]i?B|B)?\s*", limit, re.IGNORECASE)
    if not found:
        raise UsageError(f"memory limit {limit!r}: expected a size such as 1GB or 512MB")
    unit = (found.group(2) or "B").upper()
    scale = 1 if unit == "B" else (1024 if "I" in unit else 1000) ** (
        "KMGT".index(unit[0]) + 1)
    return int(float(found.group(1)) * scale)


def _steps(spec: StreamSpec, corpus: str, packed: int) -> tuple[int, int, int]:
    """(steps, windows, tokens consumed) of a stream that packs into `packed` tokens
    (spec §4): the whole steps of the schedule that fit."""
    consumed = min(packed, spec.token_budget or packed)
    schedule = spec.step_schedule
    steps = schedule.full_steps(consumed // spec.seq_len)
    if steps == 0:
        raise UsageError(
            f"corpus {corpus!r} packs into {packed:,} tokens: not one step of "
            f"{spec.batch} x {spec.seq_len} tokens; lower --batch or --seq-len"
        )
    windows = schedule.first_window(steps)
    return steps, windows, windows * spec.seq_len


def _build_in_memory(
    con: duckdb.DuckDBPyConnection, store: BaseStore, spec: StreamSpec, corpus: str, name: str,
    rows: list[tuple[str, str, int, int]], parts: list[tuple[str, int]],
    hash_parts: list[str], progress: Progress, distributed: Distributed | None = None,
    arrays_folder: Path | None = None,
) -> Built:
    import numpy as np

    # Scans keep file order: the documents are joined back by position.
    con.execute("SET preserve_insertion_order = true")
    placed, hash_words = _order(con, spec, rows, parts, progress, distributed)
    report_progress(progress, "ordering documents", 3, 3)
    packed = int(placed.stream_start[-1] + placed.n_tokens[-1]) + spec.separator_tokens \
        if len(placed.rid) else 0
    steps, windows, tokens = _steps(spec, corpus, packed)
    kept = int(np.searchsorted(placed.stream_start, tokens))  # stream_start grows
    last_end = int(placed.stream_start[kept - 1] + placed.n_tokens[kept - 1]) if kept else None
    cut = Cut.of(packed, tokens, len(placed.rid), kept, last_end)
    corpus_parts = CorpusParts([path for path, _ in parts], hash_parts, hash_words)
    handed = [placed]  # write_canonical drops the arrays once it has what it needs
    del hash_words, placed
    written = write_canonical(con, store, name, corpus, handed, kept, corpus_parts, progress,
                              arrays_folder)
    return Built(tokens, windows, steps, written.occurrences, written.digest,
                 written.parts, written.hash_parts, cut, written.columns)


def _build_out_of_core(
    con: duckdb.DuckDBPyConnection, store: BaseStore, spec: StreamSpec, corpus: str, name: str,
    sources: dict[str, tuple[int, int]], rows: list[tuple[str, str, int, int]],
    parts: list[tuple[str, int]], staging: Path, progress: Progress,
    distributed: Distributed | None = None,
) -> Built:
    """The order and the tables through files in `staging`; with `distributed`, the keys
    are computed by tasks (a part's rows each), which write the same files."""
    from lineage.stream import order_files, tables_files
    from lineage.stream.shuffle import ROWS_PER_KEYS

    folder = staging / "order"
    folder.mkdir(parents=True, exist_ok=True)
    con.execute("SET preserve_insertion_order = false")  # rows carry their rid
    ordered = [order_files.Source(src, sources[source][0], n_epochs, budget)
               for source, src, n_epochs, budget in rows]
    bits = order_files.range_bits(ordered)
    prefix = _key_prefix(spec)
    if distributed is None:
        order_files.write_keys(con, prefix, _first_rids(parts), ordered, folder, bits)
    else:
        slices = [(path, first, (start, min(start + ROWS_PER_KEYS, n_rows)))
                  for (path, first), (_, n_rows) in zip(_first_rids(parts), parts, strict=True)
                  for start in range(0, n_rows, ROWS_PER_KEYS)]
        ranked = tuple((row[0], row[1], row[2], rank) for rank, row in enumerate(rows))
        distributed.executor.map(order_files.task_keys, [
            order_files.KeyTask(path, first, span, prefix, ranked, str(folder), bits, number)
            for number, (path, first, span) in enumerate(slices)])
    report_progress(progress, "ordering documents", 2, 3)
    sequences = order_files.write_sequences(
        ordered, folder, bits, _full_key(con, parts, spec, [row[1] for row in rows]))
    count = sum(sequence.rows for sequence in sequences)
    packed = sum(sequence.tokens for sequence in sequences) + spec.separator_tokens * count
    steps, windows, tokens = _steps(spec, corpus, packed)
    placed = folder / "placed.bin"
    kept, last_end = order_files.merge_sequences(sequences, spec.separator_tokens, tokens,
                                                 placed)
    for sequence in sequences:
        sequence.path.unlink()
    report_progress(progress, "ordering documents", 3, 3)
    try:
        written = tables_files.write_from_file(con, store, name, corpus, placed, kept,
                                               [path for path, _ in parts], folder, progress)
    finally:
        remove_quietly(folder)  # the disk it took is the stream arrays' scratch space
    return Built(tokens, windows, steps, written.occurrences, written.digest,
                 written.parts, written.hash_parts,
                 Cut.of(packed, tokens, count, kept, last_end))


def _full_key(con: duckdb.DuckDBPyConnection, parts: list[tuple[str, int]], spec: StreamSpec,
              srcs: list[str]) -> Callable[[int, int, int], tuple[bytes, bytes]]:
    """(rid, srank, epoch) -> the row's full sort key (SHA-256 digest, doc_id bytes)."""
    import hashlib

    prefix = _key_prefix(spec)

    def full_key(rid: int, srank: int, epoch: int) -> tuple[bytes, bytes]:
        doc_id = _doc_id(con, parts, rid)
        message = f"{prefix}{srcs[srank]}\n{epoch}\n{doc_id}".encode()
        return hashlib.sha256(message).digest(), doc_id.encode("utf-8")

    return full_key


def _key_prefix(spec: StreamSpec) -> str:
    return f"{STREAM_SPEC}\n{spec.seed}\n"


def _source_rows(con: duckdb.DuckDBPyConnection, spec: StreamSpec,
                 sources: dict[str, tuple[int, int]]) -> list[tuple[str, str, int, int]]:
    """(source, src hex, epochs to draw, token budget) in src order, also as table `src`
    with each source's rank (`srank`): the merge's tie-break on src is then a tie-break
    on a small integer."""
    import hashlib

    rows = []
    for source, (_, total) in sources.items():
        budget = source_budget(spec.epochs[source], total)
        rows.append((source, hashlib.sha256(source.encode("utf-8")).hexdigest(),
                     epochs_drawn(spec.epochs[source]), budget))
    rows.sort(key=lambda row: row[1])
    con.execute("CREATE TABLE src (source VARCHAR, src VARCHAR, n_epochs BIGINT, "
                "budget BIGINT, srank INTEGER)")
    con.executemany("INSERT INTO src VALUES (?, ?, ?, ?, ?)",
                    [(*row, rank) for rank, row in enumerate(rows)])
    return rows


def _order(
    con: duckdb.DuckDBPyConnection, spec: StreamSpec, rows: list[tuple[str, str, int, int]],
    parts: list[tuple[str, int]], progress: Progress, distributed: Distributed | None = None,
) -> tuple[Placed, UIntArray]:
    """Every kept occurrence in stream order, with its packed position (spec §2-4).

    DuckDB computes the keys on all cores, straight from the documents' Parquet parts (a
    document's `rid` is its row in doc_id order); numpy sorts, truncates, interleaves and
    packs (`lineage.stream.order`). Also each document's content hash as four 64-bit
    words, in rid order: the content-hash copy is ordered by them. With `distributed`,
    tasks compute the keys and sort them by range (`lineage.stream.shuffle`)."""

    import numpy as np

    con.execute("CREATE TABLE part_rows (path VARCHAR, first_rid BIGINT)")
    con.executemany("INSERT INTO part_rows VALUES (?, ?)", _first_rids(parts))
    prefix = _key_prefix(spec)
    report_progress(progress, "ordering documents", 1, 3)
    if distributed is not None:
        sources = [(row[0], row[1], row[2], rank) for rank, row in enumerate(rows)]
        candidates = sorted_candidates(
            distributed, [(path, first, n) for (path, first), (_, n) in
                          zip(_first_rids(parts), parts, strict=True)], prefix, sources,
            sum(n for _, n in parts) * max((row[2] for row in rows), default=1))
        report_progress(progress, "ordering documents", 2, 3)
        return _place(con, spec, rows, parts, candidates, presorted=True)
    # Only the key's first 8 bytes travel to numpy; rows that agree there (never seen:
    # 2^-64 a pair) get their full keys from `full_keys`.
    arrays = con.execute(KEYS_SQL, [prefix, [path for path, _ in parts]]).fetchnumpy()
    report_progress(progress, "ordering documents", 2, 3)
    candidates = Candidates(**{key: np.asarray(arrays.pop(key)) for key in
                               ("rid", "srank", "epoch", "n_tokens", "k64")})
    return _place(con, spec, rows, parts, candidates)


def _place(
    con: duckdb.DuckDBPyConnection, spec: StreamSpec, rows: list[tuple[str, str, int, int]],
    parts: list[tuple[str, int]], candidates: Candidates, presorted: bool = False,
) -> tuple[Placed, UIntArray]:
    full_key = _full_key(con, parts, spec, [row[1] for row in rows])

    def full_keys(positions: Any) -> list[tuple[bytes, bytes]]:
        return [full_key(rid, srank, epoch) for rid, srank, epoch in zip(
            candidates.rid[positions].tolist(), candidates.srank[positions].tolist(),
            candidates.epoch[positions].tolist(), strict=True)]

    # DuckDB decodes the content hashes on its threads while numpy places (one core).
    with ThreadPoolExecutor(1, thread_name_prefix="hash-words") as pool:
        words = pool.submit(content_hash_words, con.cursor(), [path for path, _ in parts])
        placed = place(candidates, [row[3] for row in rows], spec.separator_tokens,
                       full_keys, presorted=presorted)
        return placed, words.result()


def content_hash_words(con: duckdb.DuckDBPyConnection, paths: list[str]) -> UIntArray:
    """Each document's content hash as four big-endian 64-bit words, in rid order: the
    32 raw bytes of every hash lie back to back in Arrow's buffer, so numpy reads them
    in place."""
    import numpy as np

    from lineage.corpora.digest import string_values

    documents = int(con.execute("SELECT count(*) FROM read_parquet(?)",
                                [paths]).fetchall()[0][0])
    words = np.empty((documents, 4), dtype=np.uint64)
    done = 0
    for batch in con.sql("SELECT unhex(content_hash) AS h FROM read_parquet(?)",
                         params=[paths]).to_arrow_reader(_FETCH_ROWS):
        if batch.num_rows:  # converted batch by batch: never two copies of the whole
            raw = np.frombuffer(string_values(batch.column(0)), dtype=">u8")
            words[done:done + batch.num_rows] = raw.reshape(-1, 4)
            done += batch.num_rows
    return words


def _first_rids(parts: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Each part with the rid of its first row (parts are in doc_id order)."""
    firsts, rid = [], 0
    for path, n_rows in parts:
        firsts.append((path, rid))
        rid += n_rows
    return firsts


def _doc_id(con: duckdb.DuckDBPyConnection, parts: list[tuple[str, int]], rid: int) -> str:
    for path, first in reversed(_first_rids(parts)):
        if rid >= first:
            return str(con.execute(
                "SELECT doc_id FROM read_parquet(?, file_row_number = true) "
                "WHERE file_row_number = ?", [path, rid - first]).fetchall()[0][0])
    raise AssertionError(f"no document has rid {rid}")


def commit_stream(
    store: BaseStore, name: str, corpus: str, spec: StreamSpec | RecordedSpec | ImportedSpec,
    built: Built,
) -> str:
    """Publish the parts and record the stream in one transaction: "added" or "unchanged"."""
    relative: list[str] = []
    digest16 = built.digest.split(":", 1)[1][:16]
    arrays = [prepare_stream_arrays(store, name, corpus, f"{name}-{digest16}",
                                    built.parts, built.hash_parts,
                                    built.columns)]  # before the lock
    try:
        with store.writer() as con:
            faults.reach("stream-commit-locked")
            row = con.execute("SELECT spec_hash FROM streams WHERE name = ?", [name]).fetchone()
            if row is not None:  # built meanwhile by another process
                discard_parts([*built.parts, *built.hash_parts])
                discard_arrays(arrays)
                if row[0] == spec.spec_hash:
                    return "unchanged"
                raise ConflictError(f"stream {name!r} was just built with other parameters")
            relative = publish_parts(con, store, table="occurrences", owner=name,
                                     name=f"{name}-{digest16}", parts=built.parts)
            relative += publish_parts(con, store, table="occurrence_hashes", owner=name,
                                      name=f"{name}-{digest16}", parts=built.hash_parts)
            relative += publish_arrays(con, store, arrays)
            con.execute(
                "INSERT INTO streams VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "now()::TIMESTAMP)",
                [name, spec.spec, spec.spec_hash, spec.canonical_json(), corpus,
                 spec.manifest_hash, spec.seed, spec.seq_len, spec.batch,
                 spec.separator_tokens, spec.token_budget, built.tokens, built.windows,
                 built.steps, built.occurrences, built.digest],
            )
            faults.reach("stream-commit-registered")
    except BaseException as exc:
        discard_parts([*built.parts, *built.hash_parts])
        discard_arrays(arrays)
        unpublish_unless_unknown(store, relative, exc)  # not committed: not data
        raise
    return "added"
