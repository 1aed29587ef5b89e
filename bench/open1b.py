"""The Open-1B shape at one size: every command a real run's store meets, each beside
DuckDB doing the same reading, sorting and writing alone, in the same run.

    .venv/bin/python bench/open1b.py --documents 10000000 [--runs 5] \
        [--workdir /work/bench-stores/open1b-10m] [--keep]

The corpus is bench/gen_open1b.py's synthetic manifest (Open-1B's four sources, token
shares and length distribution; 1,356 tokens a document). Open-1B read 400B of its
450.5B tokens (0.89 of an epoch of each source) in 80,957 steps; at a size below its
332.2M documents the stream keeps 80,957 steps and 0.89 of each source, and scales the
tokens a step with the corpus: seq_len 2048, batch = (400e9 * N / 332.2M / 80,957 /
2048) windows, rounded down (2,412 at full size), token budget 80,957 * 2048 * batch.

Each command runs as its own process (the console script), timed by wall clock (and
its CPU time, user + system, as /usr/bin/time gives it), with its peak memory two ways:
/usr/bin/time's maximum resident set (the largest single process of the tree) and the
sum of the resident sets of the whole tree sampled every 0.1 s from /proc. Measured, in order:

* `ingest corpus` of the manifest; DuckDB alone, two ways, each in 2 GB, as the
  ingest's budget ($LINEAGE_MEMORY_LIMIT): the strict floor, one COPY of the manifest
  sorted by doc_id to Parquet (zstd), and the same work, the two sorted copies an ingest
  writes (that one, then content_hash, doc_id and source sorted by content hash, as the
  content-hash index), one after the other in one process; the floors run first, while
  the disk does not yet hold the store (at 100M their spill passes 20 GB);
* `stream build` with Open-1B's budget; DuckDB alone: the stream's keys (SHA-256 of
  source, epoch and doc_id, as the spec) computed from the documents' parts and sorted
  by (source, key) to Parquet, in 1 GB (the build's default --memory-limit);
* `ingest steps` of an 80,957-step closed chain (records written as bench/runs.py
  writes them, batch digests from the stream) and `chain verify --batches`; DuckDB
  alone: the log read and written as Parquet, and a scan of the stream's occurrences;
* `docs --step` at random steps, `trained-on` (a file not in the corpus: the manifest's
  hashes are random, no file has them), `corpus show`, each --json, medians of --runs
  interleaved with DuckDB's start-up (`select 1` in a new process); `trained_on_hashes`
  in process for hashes that are in the corpus; `store verify` against SHA-256 of the
  same files (hashlib, one thread).

Bytes on disk per document: the store after each stage, and DuckDB's sorted Parquet.
The load average is written beside each figure. Output: bench/out/open1b-<size>.json
and .md; the data stays in --workdir only with --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
LINEAGE = str(Path(PY).with_name("lineage"))
STEPS = 80_957
SEQ_LEN = 2048
OPEN1B_DOCUMENTS = 332_200_000
OPEN1B_READ_TOKENS = 400_000_000_000
EPOCHS = "0.89"
SOURCES = ("dclm-baseline", "fineweb-edu", "the-stack-v2", "proof-pile-2")
MIN_FREE = 10 * 10**9  # bytes left free on /work, or the command is stopped
FLOOR = [PY, "-c", "import duckdb; duckdb.connect().sql('select 1')"]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _tree_rss(pid: int) -> int:
    """Bytes resident in `pid` and all its descendants now (0 once it is gone)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(line.split()[1]) * 1024 for line in f
                               if line.startswith("VmRSS:")), 0)
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue
    return total


def measure(cmd: list[str], env: dict[str, str] | None = None,
            ok: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """Run `cmd`; wall seconds, peak RSS (largest process, MB) and peak tree RSS (MB)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as timing:
        started_load = load()
        started = time.perf_counter()
        proc = subprocess.Popen(["/usr/bin/time", "-v", "-o", timing.name, *cmd],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, **(env or {})}, start_new_session=True)
        peak = [0]

        low = [False]

        def sample() -> None:
            while proc.poll() is None:
                peak[0] = max(peak[0], _tree_rss(proc.pid))
                if shutil.disk_usage("/work").free < MIN_FREE:  # the disk is shared
                    low[0] = True
                    os.killpg(proc.pid, signal.SIGKILL)  # time and what it runs
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        out, err = proc.communicate()
        seconds = time.perf_counter() - started
        sampler.join()
        if low[0]:
            raise RuntimeError(f"{cmd[:4]} stopped: less than {MIN_FREE / 1e9:.0f} GB free")
        if proc.returncode not in ok:
            raise RuntimeError(f"{cmd[:4]} exit {proc.returncode}: {err[-2000:]}")
        text = timing.read()
    rss_kb = next(int(line.split(":")[1]) for line in text.splitlines()
                  if "Maximum resident set size" in line)
    cpu = sum(float(line.split(":")[1]) for line in text.splitlines()
              if line.strip().startswith(("User time", "System time")))
    return {"seconds": round(seconds, 2), "cpu_s": round(cpu, 2),
            "max_rss_mb": round(rss_kb / 1024), "tree_peak_mb": round(peak[0] / 2**20),
            "load": started_load, "stdout": out}


def files_sql(paths: list[str]) -> str:
    """A DuckDB list literal of file names (the benchmark's own paths, no quotes)."""
    return "[" + ", ".join(f"'{p}'" for p in paths) + "]"


def duckdb_job(sql: str, memory_limit: str) -> dict[str, Any]:
    """`sql` run by DuckDB alone in a new process, with the same thread count and budget,
    spilling into the work folder."""
    script = ("import duckdb, sys; con = duckdb.connect(); "
              f"con.execute(\"SET memory_limit = '{memory_limit}'\"); "
              "con.execute(\"SET temp_directory = '\" + sys.argv[2] + \"'\"); "
              "con.execute(sys.argv[1]).fetchall()")
    with tempfile.TemporaryDirectory(dir=ARGS.workdir) as spill:
        return measure([PY, "-c", script, sql, spill])


def store_bytes(store: Path) -> int:
    return sum(p.stat().st_size for p in store.rglob("*") if p.is_file())


def arrays_bytes(store: Path) -> int:
    """Bytes of the lookup arrays files (tables/*_arrays/), of the store's total."""
    return sum(p.stat().st_size for p in store.glob("tables/*_arrays/*") if p.is_file())


def lineage(store: Path, *args: str, ok: tuple[int, ...] = (0,)) -> dict[str, Any]:
    return measure([LINEAGE, "--store", str(store), *args], ok=ok)


def slim(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "stdout"}


def stage_ingest(manifest: Path, store: Path, workdir: Path, n: int) -> dict[str, Any]:
    shards = sorted(str(p) for p in manifest.glob("*.parquet"))
    out, index = workdir / "duckdb-sorted.parquet", workdir / "duckdb-hashes.parquet"
    by_doc_id = (f"COPY (SELECT * FROM read_parquet({files_sql(shards)}) ORDER BY doc_id) "
                 f"TO '{out}' (FORMAT parquet, COMPRESSION zstd)")
    floor = duckdb_job(by_doc_id, "2GB")
    floor_bytes = out.stat().st_size
    out.unlink()
    both = duckdb_job(by_doc_id + "; " + (
        f"COPY (SELECT content_hash, doc_id, source FROM read_parquet({files_sql(shards)}) "
        f"ORDER BY content_hash, doc_id) TO '{index}' (FORMAT parquet, COMPRESSION zstd)"),
        "2GB")
    out.unlink()
    index.unlink()
    # The floors run first, before the store exists: at 100M documents DuckDB's sort
    # spills more than 20 GB, which a disk holding the store as well may not have.
    subprocess.run([LINEAGE, "--store", str(store), "init"], check=True, capture_output=True)
    ours = lineage(store, "ingest", "corpus", *shards, "--corpus", "c", "--json")
    return {"lineage": slim(ours), "duckdb": slim(floor), "duckdb_same_work": slim(both),
            "store_bytes_per_doc": round(store_bytes(store) / n, 1),
            "arrays_bytes_per_doc": round(arrays_bytes(store) / n, 1),
            "duckdb_bytes_per_doc": round(floor_bytes / n, 1),
            "manifest_bytes_per_doc": round(sum(os.path.getsize(s) for s in shards) / n, 1)}


def budget(n: int) -> tuple[int, int]:
    """(windows a step, token budget) for 80,957 steps at this corpus size."""
    # rounded down: 0.89 of each source holds ~400.9B tokens a 332.2M corpus, so the
    # budget, not the epochs, ends the stream, after exactly 80,957 steps
    batch = max(1, OPEN1B_READ_TOKENS * n // OPEN1B_DOCUMENTS // STEPS // SEQ_LEN)
    return batch, STEPS * SEQ_LEN * batch


def stage_build(store: Path, workdir: Path, n: int) -> dict[str, Any]:
    batch, tokens = budget(n)
    epochs = [a for s in SOURCES for a in ("--epochs", f"{s}={EPOCHS}")]
    ours = lineage(
        store, "stream", "build", "--corpus", "c", "--name", "open1b", "--seed", "42",
        "--seq-len", str(SEQ_LEN), "--batch", str(batch), *epochs,
        "--token-budget", str(tokens), "--json")
    built = json.loads(ours["stdout"])
    docs = sorted(str(p) for p in (store / "tables" / "documents").glob("*.parquet"))
    out = workdir / "duckdb-keys.parquet"
    floor = duckdb_job(
        "COPY (SELECT source, doc_id, n_tokens, sha256(concat('lineage-stream/1', source, "
        f"chr(10), '0', chr(10), doc_id)) AS k FROM read_parquet({files_sql(docs)}) "
        f"ORDER BY source, k) TO '{out}' (FORMAT parquet, COMPRESSION zstd)", "1GB")
    out.unlink()
    return {"lineage": slim(ours), "duckdb": slim(floor), "batch": batch,
            "token_budget": tokens, "steps": built.get("steps"),
            "occurrences": built.get("occurrences"),
            "store_bytes_per_doc": round(store_bytes(store) / n, 1),
            "arrays_bytes_per_doc": round(arrays_bytes(store) / n, 1)}


def write_chain(store_path: Path, log: Path) -> None:
    """A closed 80,957-step chain over the stream, records as bench/runs.py writes them."""
    import lineage as lin
    from lineage.runs.chain import ChainWriter, canonical_json, end_hash, step_hash
    from lineage.runs.chain_batches import batch_digests
    from lineage.runs.skip_rule import SkipRule

    store = lin.open(store_path)
    info = store.stream("open1b")
    batch = int(info["batch"])
    with store.reader(views=False) as con:
        digests = batch_digests(con, store, info, 1, [(s, s * batch) for s in range(STEPS)])
    writer = ChainWriter(log, config={"bench": "open1b"}, stream=info, world_size=1,
                         skip_rule=SkipRule(5.0, 4), checkpoint_every=100)
    prev = writer.header["genesis"]
    with open(log, "w") as f:
        f.write(canonical_json(writer.header) + "\n")
        for step in range(STEPS):
            record = {"batch_digests": digests[step], "clipped": False,
                      "cursor": (step + 1) * batch, "grad_norm": 0.5, "loss": 2.0,
                      "lr": 1e-3, "prev_hash": prev, "rng": {"counter": step, "seed": 1},
                      "skipped": False, "state_digest": "blake3:" + "0" * 64,
                      "step": step, "weights_digest": "blake3:" + "1" * 64}
            record["state_hash"] = prev = step_hash(record)
            f.write(canonical_json(record) + "\n")
        end = {"end": True, "last_state_hash": prev, "steps": STEPS}
        end["state_hash"] = end_hash(end)
        f.write(canonical_json(end) + "\n")


def stage_chain(store: Path, workdir: Path, n: int) -> dict[str, Any]:
    log = workdir / "steps.jsonl"
    started = time.perf_counter()
    subprocess.run([PY, "-c", "import sys; sys.path.insert(0, sys.argv[3]); import open1b; "
                    "open1b.write_chain(__import__('pathlib').Path(sys.argv[1]), "
                    "__import__('pathlib').Path(sys.argv[2]))",
                    str(store), str(log), str(REPO / "bench")], check=True)
    made = round(time.perf_counter() - started, 1)
    run = f"r{time.time_ns()}"  # a new run each time: a stored one would be "unchanged"
    ingest = lineage(store, "ingest", "steps", str(log), "--run", run, "--world-size", "1",
                     "--stream", "open1b", "--json")
    out = workdir / "duckdb-log.parquet"
    ingest_floor = duckdb_job(f"COPY (SELECT json FROM read_ndjson_objects('{log}')) TO "
                              f"'{out}' (FORMAT parquet, COMPRESSION zstd)", "1GB")
    out.unlink()
    verify = lineage(store, "chain", "verify", run, "--batches", "--json")
    occ = sorted(str(p) for p in (store / "tables" / "occurrences").glob("*.parquet"))
    verify_floor = duckdb_job(
        "SELECT count(*), sum(hash(ordinal, doc_id, stream_start, stream_end)) "
        f"FROM read_parquet({files_sql(occ)})", "1GB")
    log_bytes = log.stat().st_size
    log.unlink()
    return {"log_written_s": made, "log_bytes": log_bytes,
            "ingest": {"lineage": slim(ingest), "duckdb": slim(ingest_floor)},
            "verify": {"lineage": slim(verify), "duckdb": slim(verify_floor),
                       "answer": json.loads(verify["stdout"]).get("ok")},
            "store_bytes_per_doc": round(store_bytes(store) / n, 1),
            "arrays_bytes_per_doc": round(arrays_bytes(store) / n, 1)}


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"median_s": round(statistics.median(r["seconds"] for r in runs), 3),
            "runs_s": [r["seconds"] for r in runs],
            "max_rss_mb": max(r["max_rss_mb"] for r in runs),
            "tree_peak_mb": max(r["tree_peak_mb"] for r in runs),
            "load": runs[len(runs) // 2]["load"]}


def stage_lookups(store: Path, workdir: Path, runs: int) -> dict[str, Any]:
    import lineage as lin
    from lineage.text.trained_on import trained_on_hashes

    s = lin.open(store)
    # a store without the stream (where the disk held the corpus but not the stream):
    # the corpus's lookups alone
    built = "open1b" in [row.name for row in s.streams()]
    steps = int(s.stream("open1b")["steps"]) if built else 0
    on_stream = ["--stream", "open1b"] if built else []
    rng = random.Random(7)
    absent = workdir / "not-in-corpus.txt"
    absent.write_text("a file nobody put in the corpus\n")
    subprocess.run([PY, "-m", "compileall", "-q", *(str(REPO / d) for d in
                    ("lineage", "ingest", "cli", "schemas"))], check=True)
    commands: dict[str, Any] = {
        "duckdb_floor": lambda: FLOOR,
        "docs_step": lambda: [LINEAGE, "--store", str(store), "docs", "--step",
                              str(rng.randrange(steps)), "--stream", "open1b", "--json"],
        "trained_on": lambda: [LINEAGE, "--store", str(store), "trained-on", str(absent),
                               *on_stream, "--json"],
        "corpus_show": lambda: [LINEAGE, "--store", str(store), "corpus", "show", "c",
                                "--json"],
    }
    if not built:
        del commands["docs_step"]
    for make in commands.values():  # warm-up
        measure(make(), ok=(0, 1))
    times: dict[str, list[dict[str, Any]]] = {k: [] for k in commands}
    for _ in range(runs):  # interleaved: drift hits all alike
        for name, make in commands.items():
            times[name].append(measure(make(), ok=(0, 1)))
    result = {name: median_of(r) for name, r in times.items()}
    floor = result["duckdb_floor"]["median_s"]
    for name in ("docs_step", "trained_on", "corpus_show"):
        if name in result:
            result[name]["vs_floor"] = round(result[name]["median_s"] / floor, 2)
    hashes = [r[0] for r in s.sql("SELECT content_hash FROM documents USING SAMPLE 50 ROWS "
                                  "(reservoir, 7)").rows]
    in_process = []
    for digest in hashes[:runs * 3]:
        t = time.perf_counter()
        trained_on_hashes(s, [("x", digest)], stream="open1b" if built else None)
        in_process.append(time.perf_counter() - t)
    result["trained_on_hash_in_process_ms"] = round(statistics.median(in_process) * 1000, 1)
    verify = lineage(store, "store", "verify", "--json")
    files = [str(p) for p in (store / "tables").rglob("*.parquet")]
    # hashlib's SHA-256 (SHA extensions), one thread: coreutils' sha256sum is 4-5x slower
    floor_verify = measure([PY, "-c", "import hashlib, sys\nfor f in sys.argv[1:]:\n"
                            "    hashlib.file_digest(open(f, 'rb'), 'sha256')", *files])
    result["store_verify"] = {"lineage": slim(verify), "sha256": slim(floor_verify),
                              "files": len(files)}
    return result


ARGS: argparse.Namespace


def main() -> None:
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the manifest and store")
    parser.add_argument("--only", nargs="+", choices=["ingest", "build", "chain", "lookups"],
                        help="these stages, in this order (the store must have what they "
                             "need); the others' results are kept from the last output")
    ARGS = args = parser.parse_args()
    n = args.documents
    label = f"{n // 1_000_000}m" if n % 1_000_000 == 0 else str(n)
    args.workdir = args.workdir or Path(f"/work/bench-stores/open1b-{label}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    manifest, store = args.workdir / "manifest", args.workdir / "store"
    stages = args.only or ["ingest", "build", "chain", "lookups"]
    out = REPO / "bench" / "out" / f"open1b-{label}.json"
    results: dict[str, Any] = json.loads(out.read_text()) if out.exists() and args.only else {}
    results |= {"documents": n, "machine": {"cores": os.cpu_count(),
                "python": sys.version.split()[0]}, "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                       time.gmtime())}
    if not (manifest / "SPEC.json").exists():
        started = time.perf_counter()
        subprocess.run([PY, str(REPO / "bench" / "gen_open1b.py"), "--documents", str(n),
                        "--out", str(manifest)], check=True)
        results["manifest_written_s"] = round(time.perf_counter() - started, 1)

    def save() -> None:
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
        out.with_suffix(".md").write_text(table(results) + "\n")

    def ingest() -> dict[str, Any]:
        shutil.rmtree(store, ignore_errors=True)
        subprocess.run(["sync"], check=True)
        return stage_ingest(manifest, store, args.workdir, n)

    def build() -> dict[str, Any]:
        subprocess.run(["sync"], check=True)
        return stage_build(store, args.workdir, n)

    run_stage = {"ingest": ingest, "build": build,
                 "chain": lambda: stage_chain(store, args.workdir, n),
                 "lookups": lambda: stage_lookups(store, args.workdir, args.runs)}
    for stage in stages:  # in the order given
        results[stage] = run_stage[stage]()
        results["date_" + stage] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        print(json.dumps({stage: results[stage]}), flush=True)
        save()
    print(table(results))
    if not args.keep and not args.only:
        shutil.rmtree(args.workdir)


def _row(name: str, ours: dict[str, Any], floor: dict[str, Any], floor_name: str) -> str:
    t = ours.get("median_s", ours.get("seconds"))
    f = floor.get("median_s", floor.get("seconds"))
    return (f"| {name} | {t} s | {ours['max_rss_mb']:,} / {ours['tree_peak_mb']:,} MB | "
            f"{floor_name}: {f} s, {floor['max_rss_mb']:,} MB | **{t / f:.2f}×** | "
            f"{ours['load']} |")


def table(r: dict[str, Any]) -> str:
    lines = [f"Open-1B shape, {r['documents']:,} documents ({r['date']})", "",
             "| command | wall | peak RSS (largest process / tree) | DuckDB alone | ratio "
             "| load (1/5/15 min) |", "|---|---:|---:|---|---:|---|"]
    if "ingest" in r:
        i = r["ingest"]
        lines.append(_row("`ingest corpus` (ready manifest)", i["lineage"], i["duckdb"],
                          "COPY sorted by doc_id"))
        if "duckdb_same_work" in i:
            lines.append(_row("the same, against the same work", i["lineage"],
                              i["duckdb_same_work"], "both sorted copies"))
    if "build" in r:
        b = r["build"]
        lines.append(_row(f"`stream build` ({b['steps']:,} steps × {b['batch']} × 2048, "
                          f"{b['occurrences']:,} occurrences)", b["lineage"], b["duckdb"],
                          "keys sorted"))
    if "chain" in r:
        c = r["chain"]
        lines.append(_row("`ingest steps` (80,957-step chain)", c["ingest"]["lineage"],
                          c["ingest"]["duckdb"], "log to Parquet"))
        lines.append(_row("`chain verify --batches`", c["verify"]["lineage"],
                          c["verify"]["duckdb"], "occurrences scanned"))
    if "lookups" in r:
        lk = r["lookups"]
        for name, label in (("docs_step", "`docs --step` (random)"),
                            ("trained_on", "`trained-on FILE` (not found)"),
                            ("corpus_show", "`corpus show`")):
            if name in lk:  # no docs --step where the stream was not built
                lines.append(_row(label, lk[name], lk["duckdb_floor"], "`select 1`"))
        sv = lk["store_verify"]
        floor_name = "sha256" if "sha256" in sv else "sha256sum"
        lines.append(_row(f"`store verify` ({sv['files']} files)", sv["lineage"],
                          sv[floor_name], f"{floor_name}, one thread"))
    lines.append("")
    for stage in ("ingest", "build", "chain"):
        if stage in r:
            lines.append(f"- store after {stage}: {r[stage]['store_bytes_per_doc']} bytes "
                         f"a document, of which lookup arrays "
                         f"{r[stage].get('arrays_bytes_per_doc', '?')}")
    if "ingest" in r:
        lines.append(f"- DuckDB's sorted Parquet: {r['ingest']['duckdb_bytes_per_doc']} "
                     f"bytes a document (manifest {r['ingest']['manifest_bytes_per_doc']})")
    if "lookups" in r:
        lines.append("- `trained_on_hashes` in process, a hash in the corpus: "
                     f"{r['lookups']['trained_on_hash_in_process_ms']} ms (median)")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
