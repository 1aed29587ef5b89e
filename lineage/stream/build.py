"""Build a `lineage-stream/1` stream over a recorded corpus (docs/stream-spec.md).

The whole order is computed in one DuckDB session outside the catalog lock, spilling to
the store's staging folder when the corpus does not fit in memory: keys (SHA-256, §2),
per-source truncation and positions (window sums), the 64-bit merge key (HUGEINT, §3),
packing (§4). The occurrence table is written in ordinal order while its digest is
computed from the same batches; a copy sorted by content hash answers "trained on?".
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from lineage import faults
from lineage.digest import LineHasher
from lineage.durable import remove_quietly
from lineage.errors import ConflictError, NotFoundError, UsageError
from lineage.manifest import NAME_RULE, is_valid_name
from lineage.parts import (
    LOOKUP_PART_ROWS,
    LOOKUP_ROW_GROUP_ROWS,
    Progress,
    WrittenPart,
    discard_parts,
    part_files,
    publish_parts,
    unpublish,
    write_parts,
)
from lineage.parts import (
    report as report_progress,
)
from lineage.schemas import occurrence_hashes_schema, occurrences_schema
from lineage.scratch import new_staging_dir
from lineage.store import Store
from lineage.stream.spec import (
    OCCURRENCE_DIGEST_COLUMNS,
    OCCURRENCES_SPEC,
    STREAM_SPEC,
    RecordedSpec,
    StreamSpec,
    parse_epochs,
    source_budget,
)

if TYPE_CHECKING:
    import duckdb

_FETCH_ROWS = 65_536
_TWO_64 = "18446744073709551616::HUGEINT"


@dataclass
class StreamBuildResult:
    name: str
    status: str  # "added" | "unchanged"
    spec: str
    spec_hash: str
    corpus: str
    manifest_hash: str
    seed: int
    seq_len: int
    batch: int
    separator_tokens: int
    epochs: dict[str, str]
    token_budget: int | None
    tokens: int
    windows: int
    steps: int
    occurrences: int
    occurrences_digest: str
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_stream(
    store: Store,
    *,
    corpus: str,
    name: str,
    seed: int,
    seq_len: int,
    batch: int,
    separator_tokens: int = 1,
    epochs: list[str] | dict[str, str] | None = None,
    token_budget: int | None = None,
    memory_limit: str = "1GB",
    progress: Progress = None,
) -> StreamBuildResult:
    """Compute and record the canonical order; re-building the same stream is a no-op."""
    started = time.monotonic()
    if not is_valid_name(name):
        raise UsageError(f"--name {name!r}: {NAME_RULE}")
    manifest_hash, sources, files = _corpus_facts(store, corpus)
    spec = StreamSpec(
        manifest_hash=manifest_hash, seed=seed, seq_len=seq_len, batch=batch,
        separator_tokens=separator_tokens, epochs=parse_epochs(epochs, sorted(sources)),
        token_budget=token_budget,
    )
    existing = _existing(store, name)
    if existing is not None:
        if existing["spec_hash"] != spec.spec_hash:
            raise ConflictError(f"stream {name!r} exists with other parameters "
                                f"({existing['spec_hash']}); choose another --name")
        return StreamBuildResult(**{**existing, "status": "unchanged",
                                    "seconds": round(time.monotonic() - started, 3)})
    staging = new_staging_dir(store.staging_dir)
    try:
        built = _build(store, spec, corpus, name, sources, files, staging, memory_limit,
                       progress)
        status = commit_stream(store, name, corpus, spec, built)
    finally:
        remove_quietly(staging)
    return StreamBuildResult(
        name=name, status=status, spec=STREAM_SPEC, spec_hash=spec.spec_hash, corpus=corpus,
        manifest_hash=manifest_hash, seed=seed, seq_len=seq_len, batch=batch,
        separator_tokens=separator_tokens, epochs=spec.epochs, token_budget=token_budget,
        tokens=built.tokens, windows=built.windows, steps=built.steps,
        occurrences=built.occurrences, occurrences_digest=built.digest,
        seconds=round(time.monotonic() - started, 3),
    )


@dataclass
class Built:
    tokens: int
    windows: int
    steps: int
    occurrences: int
    digest: str
    parts: list[WrittenPart]
    hash_parts: list[WrittenPart]


def _corpus_facts(store: Store, corpus: str) -> tuple[str, dict[str, int], list[str]]:
    with store.reader(views=False) as con:
        row = con.execute("SELECT manifest_hash FROM corpora WHERE name = ?", [corpus]).fetchone()
        if row is None:
            raise NotFoundError(f"no corpus named {corpus!r}: `lineage corpus list` shows them")
        sources = dict(con.execute(
            "SELECT source, tokens FROM corpus_sources WHERE corpus = ? ORDER BY source",
            [corpus]).fetchall())
        files = part_files(con, store, "documents", corpus)
    return row[0], sources, files


def _existing(store: Store, name: str) -> dict[str, Any] | None:
    from lineage.stream.query import stream_row

    with store.reader(views=False) as con:
        return stream_row(con, name)


def _build(
    store: Store, spec: StreamSpec, corpus: str, name: str, sources: dict[str, int],
    files: list[str], staging: Any, memory_limit: str, progress: Progress,
) -> Built:
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        con.execute("SET memory_limit = ?", [memory_limit])
        con.execute("SET temp_directory = ?", [str(staging / "spill")])
        con.execute("SET preserve_insertion_order = false")
        report_progress(progress, "ordering documents", 0, 3)
        _order(con, spec, sources, files)
        report_progress(progress, "ordering documents", 3, 3)
        packed, count = con.execute(
            "SELECT coalesce(sum(n_tokens), 0) + ? * count(*), count(*) FROM ordered",
            [spec.separator_tokens]).fetchone() or (0, 0)
        consumed = min(int(packed), spec.token_budget or int(packed))
        steps = consumed // spec.seq_len // spec.batch
        if steps == 0:
            raise UsageError(
                f"corpus {corpus!r} packs into {packed:,} tokens: not one step of "
                f"{spec.batch} x {spec.seq_len} tokens; lower --batch or --seq-len"
            )
        tokens = steps * spec.batch * spec.seq_len
        con.execute("DELETE FROM ordered WHERE stream_start >= ?", [tokens])
        parts, hash_parts, digest, occurrences = write_occurrences(
            con, store, name, corpus, progress)
        return Built(tokens, steps * spec.batch, steps, occurrences, digest, parts, hash_parts)
    finally:
        con.close()


def _order(
    con: duckdb.DuckDBPyConnection, spec: StreamSpec, sources: dict[str, int], files: list[str]
) -> None:
    """Create table `ordered`: every kept occurrence with ordinal and packed position."""
    import hashlib

    rows = []
    for source, total in sources.items():
        budget = source_budget(spec.epochs[source], total)
        n_epochs = -(-budget // total) if total else 1  # ceil; a zero-token source: 1 epoch
        rows.append((source, hashlib.sha256(source.encode("utf-8")).hexdigest(),
                     max(n_epochs, 1), budget))
    # Sources are numbered by their src hex (`srank`), so the merge's tie-break on src is a
    # tie-break on a small integer.
    rows.sort(key=lambda row: row[1])
    con.execute("CREATE TABLE src (source VARCHAR, src VARCHAR, n_epochs BIGINT, "
                "budget BIGINT, srank INTEGER)")
    con.executemany("INSERT INTO src VALUES (?, ?, ?, ?, ?)",
                    [(*row, rank) for rank, row in enumerate(rows)])
    prefix = f"{STREAM_SPEC}\n{spec.seed}\n"
    # The sorts below carry only narrow rows (a row id, small numbers, the key as a 64-bit
    # prefix plus its 32 raw bytes); the strings of each document are joined back once, at
    # the end. Sorting by (first 8 bytes as an integer, then all 32 bytes) is the order of
    # the hex strings, and a row a quarter as wide keeps a 10M-row sort in memory.
    con.execute("CREATE TABLE docs AS SELECT row_number() OVER () - 1 AS rid, doc_id, "
                "source, n_tokens, content_hash, uri FROM read_parquet(?)", [files])
    con.execute(
        """
        CREATE TABLE seq AS
        SELECT rid::UBIGINT AS rid, srank, budget, epoch::INTEGER AS epoch, n_tokens,
               ('0x' || left(k, 16))::UBIGINT AS k64, unhex(k) AS kb
        FROM (
            SELECT d.rid, d.n_tokens, s.srank, s.budget, e.epoch,
                   sha256(concat(?, s.src, chr(10), e.epoch::VARCHAR, chr(10), d.doc_id)) AS k
            FROM docs d JOIN src s USING (source),
                 LATERAL (SELECT unnest(range(s.n_epochs)) AS epoch) e
        )
        """,
        [prefix],
    )
    # Keys are never equal (they hash distinct doc_ids), so the spec's doc_id tie-break
    # cannot change the order and is left out of the sort.
    con.execute(
        """
        CREATE TABLE kept AS
        SELECT rid, srank, epoch, n_tokens, q, c_incl - n_tokens AS c_before FROM (
            SELECT rid, srank, budget, epoch, n_tokens,
                   sum(n_tokens) OVER w AS c_incl, row_number() OVER w - 1 AS q
            FROM seq
            WINDOW w AS (PARTITION BY srank ORDER BY epoch, k64, kb
                         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        ) WHERE c_incl <= budget
        """
    )
    con.execute("DROP TABLE seq")
    con.execute(
        f"""
        CREATE TABLE ranked AS
        WITH totals AS (SELECT srank, sum(n_tokens) AS s_total FROM kept GROUP BY srank),
        merged AS (
            SELECT k.*, ((2 * k.c_before + k.n_tokens)::HUGEINT * {_TWO_64})
                        // greatest(2 * t.s_total, 1)::HUGEINT AS m
            FROM kept k JOIN totals t USING (srank)
        )
        SELECT rid, epoch, n_tokens,
               row_number() OVER o - 1 AS ordinal,
               sum(n_tokens + ?) OVER o - (n_tokens + ?) AS stream_start
        FROM merged
        WINDOW o AS (ORDER BY m, srank, q ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        """,
        [spec.separator_tokens, spec.separator_tokens],
    )
    con.execute("DROP TABLE kept")
    con.execute(
        """
        CREATE TABLE ordered AS
        SELECT d.doc_id, d.source, r.epoch::BIGINT AS epoch, r.n_tokens, d.content_hash,
               d.uri, 0::BIGINT AS doc_offset, r.ordinal, r.stream_start
        FROM ranked r JOIN docs d ON d.rid = r.rid
        """
    )
    con.execute("DROP TABLE ranked")
    con.execute("DROP TABLE docs")


def write_occurrences(
    con: duckdb.DuckDBPyConnection, store: Store, name: str, corpus: str, progress: Progress
) -> tuple[list[WrittenPart], list[WrittenPart], str, int]:
    """Write table `ordered` as the stream's occurrences and its content-hash index."""
    occurrences = int((con.execute("SELECT count(*) FROM ordered").fetchone() or (0,))[0])
    digest = LineHasher(OCCURRENCES_SPEC, OCCURRENCE_DIGEST_COLUMNS)
    parts = _write(con, store, name, corpus, "ordinal", ["ordinal"], occurrences_schema(),
                   [digest], occurrences, progress, "writing occurrences",
                   ranges=["stream_start", "stream_end"])
    try:
        hash_parts = _write(
            con, store, name, corpus, "('0x' || left(content_hash, 16))::UBIGINT, "
            "content_hash, ordinal", ["content_hash"], occurrence_hashes_schema(), [],
            occurrences, progress, "indexing occurrences", ranges=["content_hash"])
        faults.reach("stream-written")
    except BaseException:
        discard_parts(parts)
        raise
    return parts, hash_parts, digest.prefixed(), occurrences


def _write(
    con: duckdb.DuckDBPyConnection, store: Store, name: str, corpus: str, order: str,
    sorted_by: list[str], schema: Any, digests: list[LineHasher], total: int,
    progress: Progress, stage: str, *, ranges: list[str],
) -> list[WrittenPart]:
    table = "occurrences" if order == "ordinal" else "occurrence_hashes"
    reader = con.cursor().sql(
        f"""
        SELECT ?::VARCHAR AS stream, ordinal, ?::VARCHAR AS corpus, doc_id, source, epoch,
               stream_start, stream_start + n_tokens AS stream_end, doc_offset,
               content_hash, uri
        FROM ordered ORDER BY {order}
        """,
        params=[name, corpus],
    ).to_arrow_reader(_FETCH_ROWS)
    return write_parts(reader, schema=schema, out_dir=store.table_dir(table),
                       sorted_by=sorted_by, digests=digests, progress=progress, stage=stage,
                       total=total, row_group_rows=LOOKUP_ROW_GROUP_ROWS,
                       part_rows=LOOKUP_PART_ROWS,
                       range_columns=ranges)


def commit_stream(
    store: Store, name: str, corpus: str, spec: StreamSpec | RecordedSpec, built: Built
) -> str:
    """Publish the parts and record the stream in one transaction: "added" or "unchanged"."""
    relative: list[str] = []
    digest16 = built.digest.split(":", 1)[1][:16]
    try:
        with store.writer() as con:
            faults.reach("stream-commit-locked")
            row = con.execute("SELECT spec_hash FROM streams WHERE name = ?", [name]).fetchone()
            if row is not None:  # built meanwhile by another process
                discard_parts([*built.parts, *built.hash_parts])
                if row[0] == spec.spec_hash:
                    return "unchanged"
                raise ConflictError(f"stream {name!r} was just built with other parameters")
            relative = publish_parts(con, store, table="occurrences", owner=name,
                                     name=f"{name}-{digest16}", parts=built.parts)
            relative += publish_parts(con, store, table="occurrence_hashes", owner=name,
                                      name=f"{name}-{digest16}", parts=built.hash_parts)
            con.execute(
                "INSERT INTO streams VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "now()::TIMESTAMP)",
                [name, spec.spec, spec.spec_hash, spec.canonical_json(), corpus,
                 spec.manifest_hash, spec.seed, spec.seq_len, spec.batch,
                 spec.separator_tokens, spec.token_budget, built.tokens, built.windows,
                 built.steps, built.occurrences, built.digest],
            )
            faults.reach("stream-commit-registered")
    except BaseException:
        discard_parts([*built.parts, *built.hash_parts])
        unpublish(store, relative)
        raise
    return "added"
