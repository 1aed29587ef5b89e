"""The order of `lineage-stream/1` (docs/stream-spec.md §2-4) as DuckDB SQL, out of core.

For corpora whose occurrence arrays would not fit the build's memory budget
(`lineage.stream.order` holds about 100 bytes per occurrence in numpy): the same keys,
truncation, 128-bit merge key and packing as window functions, which spill to disk.
1.5-2x slower at 10M documents (34.7 s against 18.3-22.9 s), and bounded by DuckDB's
budget at any size. The
property tests hold both paths to the spec's plain reference.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

_TWO_64 = "18446744073709551616::HUGEINT"


def order_in_duckdb(con: duckdb.DuckDBPyConnection, prefix: str, files: list[str],
                    separator_tokens: int) -> None:
    """Create table `ordered` (every kept occurrence with its ordinal and packed
    position) from the documents' parts and table `src`."""
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
        SELECT rid, epoch, n_tokens, row_number() OVER o - 1 AS ordinal,
               sum(n_tokens + ?) OVER o - (n_tokens + ?) AS stream_start
        FROM merged
        WINDOW o AS (ORDER BY m, srank, q ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        """,
        [separator_tokens, separator_tokens],
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
