"""Profile one corpus ingest: phase timers, optionally cProfile, optionally reduce variants.

    python bench/profile_ingest.py PATH... --fmt manifest [--workers 1] [--cprofile N]
    python bench/profile_ingest.py PATH... --fmt manifest --reduce-variants

Phase timers come from bench/phases.py (wrappers around the library's functions; the
library is not changed). `--workers 1` runs the text-shard map in this process so its
inside shows up too. `--cprofile N` prints the N most expensive functions by cumulative
time. `--reduce-variants` loads the manifest into DuckDB the way the reduce does and times
the reduce's SQL steps next to cheaper formulations of the same checks, to show what each
step costs; it needs `--fmt manifest`.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import phases  # noqa: E402


class PeakRss:
    """Samples this process's resident set size (VmRSS) every 50 ms in a thread."""

    def __init__(self) -> None:
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak_mb = max(self.peak_mb, self._sample())

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def profile_ingest(paths: list[str], fmt: str, workers: int | None, cprofile: int) -> None:
    from lineage.api import init_store, open_store
    from lineage.ingest import ingest_corpus

    root = Path(tempfile.mkdtemp(prefix="lineage-profile-"))
    try:
        init_store(root / "store")
        store = open_store(root / "store")
        profiler = cProfile.Profile() if cprofile else None
        with phases.instrument(in_process_shards=workers == 1) as timer, PeakRss() as rss:
            started = time.perf_counter()
            if profiler:
                profiler.enable()
            result = ingest_corpus(store, paths, corpus="profile", fmt=fmt, workers=workers,
                                   fingerprints=False)
            if profiler:
                profiler.disable()
            total = time.perf_counter() - started
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{result.documents:,} documents, {result.bytes / 1e6:,.1f} MB, {total:.3f} s, "
          f"peak RSS of this process {rss.peak_mb:,.0f} MB (pool workers not included)")
    for line in phases.format_report(timer.report(), total):
        print(line)
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(cprofile)
        print(out.getvalue())


def _memory_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process, from /proc/self/status."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) / 1024
    return found.get("VmRSS", 0.0), found.get("VmHWM", 0.0)


def _timed(con: Any, label: str, sql: str, params: list[Any] | None = None) -> Any:
    started = time.perf_counter()
    value = con.execute(sql, params or []).fetchall()
    rss, peak = _memory_mb()
    print(f"{time.perf_counter() - started:9.3f} s  {label}  [RSS {rss:,.0f} MB, "
          f"peak so far {peak:,.0f} MB]")
    return value


def reduce_variants(paths: list[str]) -> None:
    """Time the reduce's SQL steps next to cheaper equivalents, on the same table."""
    import duckdb
    import pyarrow.parquet as pq

    from lineage.ingest import corpus_reduce
    from lineage.ingest.inputs import plan_inputs
    from lineage.ingest.readers.manifests import load_manifests

    shards = plan_inputs([Path(p) for p in paths], "manifest")
    con = duckdb.connect(":memory:")
    con.execute("SET preserve_insertion_order = true")
    con.execute(corpus_reduce._STAGED_TABLE)
    started = time.perf_counter()
    load_manifests(con, shards, table="docs")  # type: ignore[arg-type]
    rss, peak = _memory_mb()
    print(f"{time.perf_counter() - started:9.3f} s  load_manifests (all shards)  "
          f"[RSS {rss:,.0f} MB, peak so far {peak:,.0f} MB]")
    flags = ", ".join(f"bool_or({p})" for _, p in corpus_reduce.ROW_RULES)
    _timed(con, "check_rows: all eight rules, as in the library", f"SELECT {flags} FROM docs")
    hex_rule = corpus_reduce.ROW_RULES[4][1]
    _timed(con, "  of which the content_hash regexp_full_match alone",
           f"SELECT bool_or({hex_rule}) FROM docs")
    _timed(con, "  variant: length = 64 AND only [0-9a-f] via translate()",
           "SELECT bool_or(content_hash IS NULL OR length(content_hash) <> 64 "
           "OR translate(content_hash, '0123456789abcdef', '') <> '') FROM docs")
    _timed(con, "unique doc_ids: GROUP BY with list(struct_pack) (an early library version)",
           """SELECT doc_id, list(struct_pack(origin := origin, record := record)
                              ORDER BY origin, record)[1:2]
              FROM docs GROUP BY doc_id HAVING count(*) > 1 ORDER BY doc_id LIMIT 1""")
    _timed(con, "  variant: GROUP BY doc_id HAVING count(*) > 1 LIMIT 1 (details only on hit)",
           "SELECT doc_id FROM docs GROUP BY doc_id HAVING count(*) > 1 LIMIT 1")
    _timed(con, "  variant: count(*) = count(DISTINCT doc_id)",
           "SELECT count(*) = count(DISTINCT doc_id) FROM docs")
    started = time.perf_counter()
    reader = con.cursor().sql(
        "SELECT 'c'::VARCHAR AS corpus, doc_id, source, uri, n_bytes, n_tokens, content_hash, "
        "license, metadata FROM docs ORDER BY doc_id").to_arrow_reader(65_536)
    opened = time.perf_counter() - started
    batches = list(reader)
    total = time.perf_counter() - started
    print(f"{opened:9.3f} s  ORDER BY doc_id: until to_arrow_reader() returns")
    print(f"{total:9.3f} s  ORDER BY doc_id: all {sum(b.num_rows for b in batches):,} rows "
          "fetched as Arrow")
    import pyarrow as pa

    table = pa.Table.from_batches(batches)
    del batches
    scratch = Path(tempfile.mkdtemp(prefix="lineage-variants-"))
    try:
        for label, kwargs in (
            ("pq.ParquetWriter zstd, dictionary on every column (library)", {}),
            ("  variant: dictionary only for corpus, source, license",
             {"use_dictionary": ["corpus", "source", "license"]}),
            ("  variant: as above, zstd level 1",
             {"use_dictionary": ["corpus", "source", "license"], "compression_level": 1}),
        ):
            started = time.perf_counter()
            with pq.ParquetWriter(scratch / "part.parquet", table.schema, compression="zstd",
                                  write_statistics=True, **kwargs) as writer:
                for offset in range(0, table.num_rows, 131_072):
                    writer.write_table(table.slice(offset, 131_072), row_group_size=131_072)
            size = (scratch / "part.parquet").stat().st_size
            print(f"{time.perf_counter() - started:9.3f} s  {label} ({size / 1e6:,.0f} MB)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    con.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--fmt", default="auto")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--cprofile", type=int, default=0, metavar="N")
    parser.add_argument("--reduce-variants", action="store_true")
    args = parser.parse_args(argv)
    if args.reduce_variants:
        if args.fmt != "manifest":
            parser.error("--reduce-variants needs --fmt manifest")
        reduce_variants(args.paths)
    else:
        profile_ingest(args.paths, args.fmt, args.workers, args.cprofile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
