"""The headline table: every headline figure beside its floor or peer, in one run.

    .venv/bin/python bench/headline.py [--documents 1000000] [--runs 3]
                                       [--workdir /work/bench-headline] [--write]

Rows, each measured in this run beside its peer:
* `ingest corpus` of a ready manifest (bench/gen_open1b.py) vs DuckDB alone copying it
  sorted to Parquet; `stream build` vs DuckDB sorting the same keys; `chain verify
  --batches` vs DuckDB scanning the occurrences (bench/open1b.py's stages);
* `ingest corpus` of a folder of files (bench/gen_text.py; 2,000 files, then 20,000
  files of about 3 GB, where the throughput target is read) vs b3sum hashing them
  (`xargs -0 b3sum`, mmap and threads; Debian's package `b3sum`), interleaved runs; the
  ingest measured as
  bench/run.py measures its files target (in a child, imports before the clock, no
  text index);
* `docs --step N --json`, `trained-on FILE --json` and `docs --step N` vs a fresh
  `python -c "import duckdb; ..."` process: interleaved, the median of pairwise ratios;
* served: server CPU per new answer (random steps; random content hashes) of `lineage
  serve`, answers a second per core at 1, 16 and 64 clients, p50/p99 at 16 and errors at
  64, beside datasette (`datasette serve -i copy.db`) answering the same step lookup from
  an SQLite copy of the occurrences and documents, indexed, its CPU counted the same way
  (bench/serve.py's client and /proc accounting);
* `trained-on --text PASSAGE` (the example corpus's text index) vs `grep -rlF PASSAGE`
  over the same files in a fresh process (the linear scan a user would otherwise run).

With --write, the table replaces the block between the current-figures markers at the
top of docs/performance.md; nothing else there is touched.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import open1b  # noqa: E402
import serve  # noqa: E402

PY = sys.executable
LINEAGE = str(Path(PY).with_name("lineage"))
DATASETTE = shutil.which("datasette", path=str(Path(PY).parent)) or shutil.which("datasette")
FLOOR = [PY, "-c", "import duckdb; duckdb.connect(':memory:').execute('select 1')"]
PERF = REPO / "docs" / "performance.md"
START, END = "<!-- current-figures:start -->", "<!-- current-figures:end -->"
COLUMNS = ("figure", "lineage", "peer", "peer figure", "ratio", "target", "met")


def row(figure: str, ours: str, peer: str, peer_figure: str, ratio: float | None,
        target: str, met: bool | None) -> dict[str, str]:
    return {"figure": figure, "lineage": ours, "peer": peer, "peer figure": peer_figure,
            "ratio": "—" if ratio is None else f"{ratio:.2f}x", "target": target,
            "met": "—" if met is None else ("yes" if met else "no")}


def wall(cmd: list[str], stdin: bytes | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - started


def pairwise(ours: Callable[[], float], floor: Callable[[], float], runs: int
             ) -> tuple[float, float, float]:
    """Interleaved runs: (median of ours, median of the floor, median of the ratios)."""
    ours(), floor()  # warm-up: the page cache
    a, b = [], []
    for _ in range(runs):
        a.append(ours())
        b.append(floor())
    return (statistics.median(a), statistics.median(b),
            statistics.median(x / y for x, y in zip(a, b, strict=True)))


# --- the ready manifest, the stream and the chain (bench/open1b.py) -----------------------

def pipeline(workdir: Path, n: int) -> tuple[list[dict[str, str]], Path]:
    open1b.ARGS = argparse.Namespace(workdir=workdir)
    manifest, store = workdir / "manifest", workdir / "store"
    if not (manifest / "SPEC.json").exists():
        subprocess.run([PY, str(REPO / "bench" / "gen_open1b.py"), "--documents", str(n),
                        "--out", str(manifest)], check=True)
    shutil.rmtree(store, ignore_errors=True)
    rows = []
    ing = open1b.stage_ingest(manifest, store, workdir, n)
    t, f = ing["lineage"]["seconds"], ing["duckdb"]["seconds"]
    rows.append(row("`ingest corpus`, ready manifest", f"{t:.1f} s",
                    "DuckDB: COPY sorted to Parquet", f"{f:.1f} s", t / f, "—", None))
    built = open1b.stage_build(store, workdir, n)
    t, f = built["lineage"]["seconds"], built["duckdb"]["seconds"]
    rows.append(row("`stream build`", f"{t:.1f} s", "DuckDB: the same keys sorted",
                    f"{f:.1f} s", t / f, "≤ 20 s at 10M", None))
    chain = open1b.stage_chain(store, workdir, n)["verify"]
    t, f = chain["lineage"]["seconds"], chain["duckdb"]["seconds"]
    rows.append(row("`chain verify --batches`", f"{t:.1f} s",
                    "DuckDB: occurrences scanned", f"{f:.1f} s", t / f, "—", None))
    return rows, store


# --- a folder of files against b3sum -------------------------------------------------------

def files_rows(workdir: Path, runs: int) -> list[dict[str, str]]:
    """Two folders: 2,000 files, where the ingest's fixed costs (its store, its reduce, its
    commit) weigh most, and 20,000 files (about 3 GB), where hashing does: the throughput
    target is read off the larger one."""
    return [files_row(workdir, runs, 2000, target=False),
            files_row(workdir, runs, 20000, target=True)]


def files_row(workdir: Path, runs: int, count: int, *, target: bool) -> dict[str, str]:
    import gen_text

    folder = workdir / ("text" if count == 2000 else f"text-{count}")
    if not (folder / "files").exists():
        gen_text.generate(folder, files=count, shards=0, shard_mb=1, seed=0)
    root = folder / "files"
    files = sorted(p for p in root.rglob("*") if p.is_file())
    mb = sum(p.stat().st_size for p in files) / 1e6
    b3sum = shutil.which("b3sum")
    store = workdir / "files-store"

    def ours() -> float:
        """bench/run.py's measure of its files target: the ingest in a child process,
        its imports before the clock, the text index off."""
        shutil.rmtree(store, ignore_errors=True)
        spec = {"task": "ingest", "store": str(store), "paths": [str(root)], "fmt": "files"}
        done = subprocess.run([PY, str(REPO / "bench" / "run.py"), "--child", json.dumps(spec)],
                              capture_output=True, text=True, check=True, cwd=REPO)
        return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])

    size = f"{mb / 1000:,.1f} GB" if mb >= 1000 else f"{mb:,.0f} MB"
    name = f"`ingest corpus`, a folder ({len(files):,} files, {size})"
    wanted = "≥ 0.7x (throughput)" if target else "—"
    if b3sum is None:
        t = statistics.median(ours() for _ in range(runs))
        return row(name, f"{t:.2f} s", "b3sum", "peer not installed (`apt install b3sum`)",
                   None, wanted, None)
    stdin = b"\0".join(str(p).encode() for p in files)
    t, f, ratio = pairwise(ours, lambda: wall(["xargs", "-0", b3sum, "--"], stdin), runs)
    name += ", in process, no text index"
    shutil.rmtree(store, ignore_errors=True)
    # throughput against b3sum's: its time over ours
    return row(name, f"{t:.2f} s", "b3sum (mmap, threads)", f"{f:.2f} s", 1 / ratio,
               wanted, (1 / ratio >= 0.7) if target else None)


# --- CLI lookups against DuckDB's start-up ------------------------------------------------

def cli_rows(store: Path, workdir: Path, runs: int) -> list[dict[str, str]]:
    import lineage

    steps = int(lineage.open_store(store).stream("open1b")["steps"])
    rng = random.Random(11)
    absent = workdir / "not-in-corpus.txt"
    absent.write_text("a file nobody put in the corpus\n")
    base = [LINEAGE, "--store", str(store)]

    def step() -> list[str]:
        return [*base, "docs", "--step", str(rng.randrange(steps)), "--stream", "open1b"]

    def run(cmd: list[str]) -> float:  # trained-on answers 1 for a file not trained on
        started = time.perf_counter()
        code = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                              ).returncode
        if code not in (0, 1):
            raise RuntimeError(f"{cmd[3:6]} exit {code}")
        return time.perf_counter() - started

    cases = [("`docs --step N --json`", lambda: [*step(), "--json"], "≤ 1.0x", 1.0),
             ("`trained-on FILE --json`", lambda: [*base, "trained-on", str(absent),
                                                   "--stream", "open1b", "--json"],
              "≤ 1.2x", 1.2),
             ("`docs --step N` (human)", step, "≤ 1.5x", 1.5)]
    rows = []
    for name, make, target, limit in cases:
        t, f, ratio = pairwise(lambda make=make: run(make()), lambda: wall(FLOOR), runs)
        rows.append(row(name, f"{t * 1000:.0f} ms", "fresh `import duckdb; select 1`",
                        f"{f * 1000:.0f} ms", ratio, target, ratio <= limit))
    return rows


# --- served lookups against datasette -----------------------------------------------------

def sqlite_copy(store: Path, path: Path) -> None:
    """The occurrences and documents of the stream as SQLite tables, indexed as a user
    would index them for these lookups: occurrences by (stream, stream_start) and by
    (stream, content_hash), documents by (corpus, doc_id)."""
    import lineage

    path.unlink(missing_ok=True)
    opened = lineage.open_store(store)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE occurrences (stream TEXT, ordinal INTEGER, corpus TEXT, "
               "doc_id TEXT, source TEXT, uri TEXT, content_hash TEXT, epoch INTEGER, "
               "stream_start INTEGER, stream_end INTEGER, doc_offset INTEGER)")
    db.execute("CREATE TABLE documents (corpus TEXT, doc_id TEXT, source TEXT, uri TEXT, "
               "n_tokens INTEGER, content_hash TEXT, license TEXT)")
    with opened.reader() as con:
        for table, cols in (("occurrences", "stream, ordinal, corpus, doc_id, source, uri, "
                                            "content_hash, epoch, stream_start, stream_end, "
                                            "doc_offset"),
                            ("documents", "corpus, doc_id, source, uri, n_tokens, "
                                          "content_hash, license")):
            cur = con.execute(f"SELECT {cols} FROM {table}")
            marks = ", ".join("?" * (cols.count(",") + 1))
            while batch := cur.fetchmany(100_000):
                db.executemany(f"INSERT INTO {table} VALUES ({marks})", batch)
    db.execute("CREATE INDEX occ_start ON occurrences (stream, stream_start)")
    db.execute("CREATE INDEX occ_hash ON occurrences (stream, content_hash)")
    db.execute("CREATE UNIQUE INDEX doc_key ON documents (corpus, doc_id)")
    db.commit()
    db.execute("ANALYZE")
    db.close()


# The documents of a step: occurrences in a stream are contiguous and do not overlap, so
# the first one meeting [lo, hi) is the last to start at or before lo; both ends are
# index seeks on (stream, stream_start).
STEP_SQL = ("SELECT o.doc_id, o.source, o.uri, o.content_hash, o.epoch, o.stream_start, "
            "o.stream_end, o.doc_offset, o.ordinal, d.n_tokens, d.license "
            "FROM occurrences o JOIN documents d "
            "ON d.corpus = o.corpus AND d.doc_id = o.doc_id "
            "WHERE o.stream = 'open1b' AND o.stream_start < :hi "
            "AND o.stream_start >= (SELECT max(stream_start) FROM occurrences WHERE "
            "stream = 'open1b' AND stream_start <= :lo) ORDER BY o.stream_start")

# A document's occurrences in the stream by its content hash (`trained-on` by hash).
HASH_SQL = ("SELECT o.doc_id, o.source, o.uri, o.content_hash, o.epoch, o.stream_start, "
            "o.stream_end, o.doc_offset, o.ordinal, d.n_tokens, d.license "
            "FROM occurrences o JOIN documents d "
            "ON d.corpus = o.corpus AND d.doc_id = o.doc_id "
            "WHERE o.stream = 'open1b' AND o.content_hash = :h ORDER BY o.ordinal")


def start_datasette(db: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    if DATASETTE is None:
        raise RuntimeError("datasette is not installed (make .venv/.bench)")
    with log.open("wb") as err:
        server = subprocess.Popen([DATASETTE, "serve", "-i", str(db), "--port", str(port),
                                   "--setting", "sql_time_limit_ms", "5000",
                                   "--setting", "max_returned_rows", "100000"], stderr=err,
                                  stdout=err)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            asyncio.run(serve._one(port, serve._get("/-/versions.json")))
            return server
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(log.read_text()) from None
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("datasette did not start")


def served_rows(store: Path, workdir: Path, seconds: float, runs: int
                ) -> list[dict[str, str]]:
    import urllib.parse

    import lineage

    opened = lineage.open_store(store)
    info = opened.stream("open1b")
    steps, tokens_a_step = int(info["steps"]), int(info["batch"]) * int(info["seq_len"])
    hashes = [r[0] for r in opened.sql(
        "SELECT content_hash FROM occurrences WHERE stream = 'open1b' "
        "USING SAMPLE 200000 ROWS (reservoir, 7)", max_rows=None).rows]
    rng = random.Random(7)

    def docs() -> tuple[bytes, str]:
        return serve._get(f"/api/docs?step={rng.randrange(steps)}&stream=open1b"), "0"

    def by_hash() -> tuple[bytes, str]:
        return serve._get(f"/api/trained-on?hash={rng.choice(hashes)}&stream=open1b"), "0"

    def datasette_step() -> tuple[bytes, str]:
        step = rng.randrange(steps)
        query = urllib.parse.urlencode({"sql": STEP_SQL, "lo": step * tokens_a_step,
                                        "hi": (step + 1) * tokens_a_step, "_shape": "array"})
        # datasette sets no exit-code header: None matches its absence; a status other
        # than 200 is still an error
        return serve._get(f"/copy.json?{query}"), None  # type: ignore[return-value]

    def datasette_hash() -> tuple[bytes, str]:
        query = urllib.parse.urlencode({"sql": HASH_SQL, "h": rng.choice(hashes),
                                        "_shape": "array"})
        return serve._get(f"/copy.json?{query}"), None  # type: ignore[return-value]

    db = workdir / "copy.db"
    sqlite_copy(store, db)
    cores = os.cpu_count() or 1
    ours: dict[tuple[str, int], list[dict[str, Any]]] = {}
    peer: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for _ in range(runs):  # rounds in turn: a busy minute hits both servers
        server = serve.start_server(store, 8771, 2, workdir / "serve.log")
        cpu = functools.partial(serve.server_cpu_seconds, server)
        try:
            for clients in (1, 16, 64):
                ours.setdefault(("docs", clients), []).append(asyncio.run(serve._load(
                    8771, docs, clients, seconds, cpu)))
            ours.setdefault(("hash", 16), []).append(asyncio.run(serve._load(
                8771, by_hash, 16, seconds, cpu)))
        finally:
            server.terminate()
            server.wait(timeout=30)
        peer_server = start_datasette(db, 8772, workdir / "datasette.log")
        peer_cpu = functools.partial(serve.server_cpu_seconds, peer_server)
        try:
            for clients in (1, 16, 64):
                peer.setdefault(("docs", clients), []).append(asyncio.run(serve._load(
                    8772, datasette_step, clients, seconds, peer_cpu)))
            peer.setdefault(("hash", 16), []).append(asyncio.run(serve._load(
                8772, datasette_hash, 16, seconds, peer_cpu)))
        finally:
            peer_server.terminate()
            peer_server.wait(timeout=30)

    def med(cells: list[dict[str, Any]], key: str) -> float:
        return statistics.median(float(c[key]) for c in cells)

    def errors(cells: list[dict[str, Any]]) -> int:
        return sum(int(c["errors"]) for c in cells)

    rows = []
    for kind, label, asked in (("docs", "`docs --step`", "the step"),
                               ("hash", "`trained-on` by hash", "the hash")):
        ms = med(ours[(kind, 16)], "server_cpu_ms_per_request")
        peer_ms = med(peer[(kind, 16)], "server_cpu_ms_per_request")
        rows.append(row(f"served {label}: server CPU a new answer (16 clients)",
                        f"{ms:.2f} ms", f"datasette, {asked} from indexed SQLite",
                        f"{peer_ms:.2f} ms", ms / peer_ms, "≤ 0.5 ms and ≤ 0.5x peer",
                        ms <= 0.5 and ms / peer_ms <= 0.5))
    for clients in (1, 16, 64):
        ans = med(ours[("docs", clients)], "throughput_rps") / cores
        pans = med(peer[("docs", clients)], "throughput_rps") / cores
        rows.append(row(f"served `docs --step`: answers a second a core, {clients} "
                        f"client{'s' if clients > 1 else ''}",
                        f"{ans:,.0f}", "datasette", f"{pans:,.0f}", ans / pans, "—", None))
    p50, p99 = med(ours[("docs", 16)], "p50_ms"), med(ours[("docs", 16)], "p99_ms")
    pp50, pp99 = med(peer[("docs", 16)], "p50_ms"), med(peer[("docs", 16)], "p99_ms")
    rows.append(row("served `docs --step`: p50 / p99, 16 clients", f"{p50:.1f} / {p99:.1f} ms",
                    "datasette", f"{pp50:.1f} / {pp99:.1f} ms", p99 / pp99, "p99 ≤ 25 ms",
                    p99 <= 25))
    e, pe = errors(ours[("docs", 64)]), errors(peer[("docs", 64)])
    rows.append(row("served `docs --step`: errors, 64 clients", str(e), "datasette", str(pe),
                    None, "0", e == 0))
    return rows


# --- a text query ---------------------------------------------------------------------------

def text_row(store: Path, runs: int) -> dict[str, str]:
    import lineage

    corpus = REPO / "examples" / "corpus"
    opened = lineage.open_store(store)
    if "example" not in [c["name"] for c in opened.corpora()]:
        subprocess.run([LINEAGE, "--store", str(store), "ingest", "corpus", str(corpus),
                        "--corpus", "example"], check=True, capture_output=True)
    if "examples" not in [x["name"] for x in opened.streams()]:
        subprocess.run([LINEAGE, "--store", str(store), "stream", "build", "--corpus",
                        "example", "--name", "examples", "--seed", "42", "--seq-len", "2048",
                        "--batch", "8"], check=True, capture_output=True)
    lines = [line.strip() for p in sorted(corpus.rglob("*.txt"))
             for line in p.read_text(errors="replace").splitlines()]
    passage = max(lines, key=len)  # one line, so grep -F can find it as it is
    t, f, ratio = pairwise(
        lambda: _text(store, passage),
        lambda: _grep(passage, corpus), runs)
    files = sum(1 for p in corpus.rglob("*") if p.is_file())
    return row(f"`trained-on --text`, a {len(passage.split())}-word line of the example "
               f"corpus ({files} files)", f"{t * 1000:.0f} ms",
               "`grep -rlF` over the same files", f"{f * 1000:.0f} ms", ratio, "—", None)


def _text(store: Path, passage: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([LINEAGE, "--store", str(store), "trained-on", "--text", passage,
                           "--stream", "examples", "--json"], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"trained-on --text exit {done.returncode}: {done.stderr[-500:]}")
    return time.perf_counter() - started


def _grep(passage: str, corpus: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["grep", "-rlF", "--", passage, str(corpus)], stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


# --- the table ------------------------------------------------------------------------------

def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    return f"{os.cpu_count()} cores, {model}"


def commit() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "unknown"


def render(rows: list[dict[str, str]], documents: int, load_avg: str) -> str:
    head = [START, "## Current figures", "",
            f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
            f"- machine: {machine()}",
            f"- commit: {commit()}",
            f"- load average (1/5/15 min) at the start: {load_avg}",
            f"- documents: {documents:,}",
            "",
            "Written by `make bench` (bench/headline.py); each figure beside its peer "
            "measured in the same run. The machine is shared: the ratios are what count.",
            "",
            "| " + " | ".join(COLUMNS) + " |",
            "|" + "---|" * len(COLUMNS)]
    body = ["| " + " | ".join(r[c].replace("|", "/") for c in COLUMNS) + " |" for r in rows]
    return "\n".join([*head, *body, END])


def write(block: str) -> None:
    text = PERF.read_text()
    if START in text:
        text = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text,
                      count=1, flags=re.S)
    else:  # the first time: after the page's title
        title, _, rest = text.partition("\n")
        text = f"{title}\n\n{block}\n{rest}"
    PERF.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="a served cell's length")
    parser.add_argument("--workdir", type=Path, default=Path("/work/bench-headline"))
    parser.add_argument("--write", action="store_true",
                        help="rewrite the Current figures table of docs/performance.md")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--reuse", action="store_true",
                        help="the store and first rows of a kept work folder")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    load_avg = " ".join(f"{x:.2f}" for x in os.getloadavg())
    saved = args.workdir / "pipeline.json"  # --keep, then --reuse: the later rows again
    if args.reuse and saved.exists():
        rows, store = json.loads(saved.read_text()), args.workdir / "store"
    else:
        rows, store = pipeline(args.workdir, args.documents)
        saved.write_text(json.dumps(rows))
    rows += files_rows(args.workdir, args.runs)
    rows += cli_rows(store, args.workdir, max(args.runs, 5))
    rows += served_rows(store, args.workdir, args.seconds, args.runs)
    rows.append(text_row(store, max(args.runs, 5)))
    block = render(rows, args.documents, load_avg)
    print(block)
    out = REPO / "bench" / "out" / "headline.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "documents": args.documents}, indent=1) + "\n")
    if args.write:
        write(block)
    if not (args.keep or args.reuse):
        shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
