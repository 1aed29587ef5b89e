"""Corpus-ingest benchmarks: `make bench` (full size) or `python bench/run.py --quick`.

Each benchmark runs `--runs` times (default 3) and is reported as the median and every
run, next to its floor (the same work done by a tool that does only that work) and its
target. Results go to a table on stdout and to bench/out/results.json.

* manifest-*: ready manifests (Parquet, 1M and 10M rows; JSONL, 1M rows). Floor: DuckDB
  alone reading the same shards, sorting by doc_id and writing one zstd Parquet file.
  Target: <= 20 s at 10M rows.
* files: a directory of 2,000 files of 64-256 KiB. Floor: `b3sum` over the same files
  (Debian package `b3sum`). Target: >= 0.7x b3sum throughput.
* jsonl-text, parquet-text: 4 text shards, ~200 MB of text. Floor: pyarrow reading the
  same shards (pyarrow.json / pyarrow.parquet) and BLAKE3 of every text, one process.
  Target: >= 0.5x floor throughput.
* machine: BLAKE3 `update_mmap` on one big file (all threads and one), SHA-256 of the
  same file in 1 MiB reads (as `lineage.store.durable.sha256_file`), page-cache read.

Method: generated inputs live in `--workdir` (default /tmp/lineage-bench; never in the
repo) and are reused while their spec matches. Before a benchmark its inputs are read
once so they sit in the page cache; before every run the parent calls sync(2) so the
previous run's dirty pages are not flushed during this one. Every run is a fresh Python
process that has already imported the library and what it imports lazily (duckdb,
pyarrow); the clock covers `ingest_corpus(...)` alone (not interpreter start, imports or
`init_store`; the import time is recorded as `import_s`) and each run gets a fresh store.
Ingest and floor runs alternate, so drift hits both alike. One untimed warm-up run of each
benchmark precedes the timed runs, except where an input has 5M rows or more. Afterwards one
extra run with phase timers (bench/phases.py) says where the time goes; it is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
DEFAULT_WORKDIR = Path("/tmp/lineage-bench")
B3SUM_HINT = "b3sum not found: install it with `apt-get install -y b3sum` (Debian package b3sum)"

FULL: dict[str, Any] = {
    "manifests": [("parquet", 1_000_000, 8), ("parquet", 10_000_000, 16), ("jsonl", 1_000_000, 8)],
    "files": 2000,
    "text_shards": 4,
    "shard_mb": 50.0,
    "big_file_mb": 2048,
}
QUICK: dict[str, Any] = {
    "manifests": [("parquet", 100_000, 4), ("parquet", 1_000_000, 8), ("jsonl", 100_000, 4)],
    "files": 300,
    "text_shards": 4,
    "shard_mb": 8.0,
    "big_file_mb": 256,
}
MANIFEST_TARGET_S, MANIFEST_TARGET_ROWS = 20.0, 10_000_000
FILES_TARGET_RATIO = 0.7
TEXT_TARGET_RATIO = 0.5
NO_WARMUP_FROM_ROWS = 5_000_000


# --------------------------------------------------------------------------- children
# Every measured run happens in a child process: `run.py --child JSON` prints one JSON
# line. Its own peak RSS (and that of its process-pool workers) comes back with it.


def _child_main(spec: dict[str, Any]) -> dict[str, Any]:
    task = spec["task"]
    if task in ("ingest", "ingest-phases"):
        out = _child_ingest(spec, phases=task == "ingest-phases")
    elif task == "text-floor":
        out = _child_text_floor(spec)
    elif task == "manifest-floor":
        out = _child_manifest_floor(spec)
    elif task == "machine":
        out = _child_machine(spec)
    else:
        raise SystemExit(f"unknown child task {task!r}")
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["children_maxrss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return out


def _child_ingest(spec: dict[str, Any], *, phases: bool) -> dict[str, Any]:
    # The library imports pyarrow lazily, inside the ingest. Import it (and everything else
    # the ingest needs) before the clock starts, so runs measure steady-state work; the
    # import time is reported on its own as a fixed start-up cost.
    started = time.perf_counter()
    import blake3  # noqa: F401
    import duckdb  # noqa: F401
    import pyarrow  # noqa: F401
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    from lineage.api import init_store, open_store
    from lineage.ingest import ingest_corpus

    import_seconds = time.perf_counter() - started
    store_dir = Path(spec["store"])
    init_store(store_dir)
    store = open_store(store_dir)
    workers = spec.get("workers")
    # These targets measure hashing ingest: the text index (bench/text_index.py) is off
    # unless asked for. Older revisions (--commit) have no such option.
    import inspect

    options = {}
    if "fingerprints" in inspect.signature(ingest_corpus).parameters:
        options["fingerprints"] = bool(spec.get("text_index"))
    if phases:
        sys.path.insert(0, str(BENCH_DIR))
        import phases as phase_mod

        with phase_mod.instrument(in_process_shards=workers == 1) as timer:
            started = time.perf_counter()
            result = ingest_corpus(store, spec["paths"], corpus="bench", fmt=spec["fmt"],
                                   workers=workers, **options)
            seconds = time.perf_counter() - started
        report = timer.report()
    else:
        started = time.perf_counter()
        result = ingest_corpus(store, spec["paths"], corpus="bench", fmt=spec["fmt"],
                               workers=workers, **options)
        seconds = time.perf_counter() - started
        report = None
    import lineage

    out: dict[str, Any] = {
        "lineage_file": lineage.__file__, "import_seconds": round(import_seconds, 3),
        "seconds": seconds, "documents": result.documents, "bytes": result.bytes,
        "manifest_hash": result.manifest_hash, "parts": len(result.parts),
    }
    if report is not None:
        out["phases"] = report
    if spec.get("dump_hashes"):
        rows = store.sql("SELECT doc_id, content_hash FROM documents").rows
        out["hashes"] = {doc_id: digest for doc_id, digest in rows}
    return out


def _child_text_floor(spec: dict[str, Any]) -> dict[str, Any]:
    """pyarrow read of every shard + BLAKE3 of every text, one process."""
    import blake3
    import pyarrow as pa
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    started = time.perf_counter()
    documents = size = 0
    for path in spec["paths"]:
        if spec["kind"] == "jsonl":
            column = pj.read_json(path).column("text")
        else:
            column = pq.read_table(path, columns=["text"]).column("text")
        for chunk in column.chunks:
            if chunk.type != pa.large_string():
                chunk = chunk.cast(pa.large_string())
            offsets = memoryview(chunk.buffers()[1]).cast("q")
            data = memoryview(chunk.buffers()[2])
            base = chunk.offset
            for i in range(len(chunk)):
                start, end = offsets[base + i], offsets[base + i + 1]
                blake3.blake3(data[start:end]).digest()
                size += end - start
            documents += len(chunk)
    return {"seconds": time.perf_counter() - started, "documents": documents, "bytes": size}


def _child_manifest_floor(spec: dict[str, Any]) -> dict[str, Any]:
    """DuckDB alone: read the manifest shards, ORDER BY doc_id, write one zstd Parquet."""
    import duckdb

    out = Path(spec["out"])
    con = duckdb.connect(":memory:")
    reader = "read_parquet(?)" if spec["kind"] == "parquet" else (
        "read_json(?, format = 'newline_delimited')")
    started = time.perf_counter()
    con.execute(
        f"COPY (SELECT * FROM {reader} ORDER BY doc_id) TO '{out}' "
        "(FORMAT parquet, COMPRESSION zstd)",
        [spec["paths"]],
    )
    fd = os.open(out, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    seconds = time.perf_counter() - started
    rows = con.execute("SELECT count(*) FROM read_parquet(?)", [str(out)]).fetchone()
    con.close()
    return {"seconds": seconds, "documents": int(rows[0]) if rows else 0}


def _child_machine(spec: dict[str, Any]) -> dict[str, Any]:
    import hashlib

    import blake3

    path = Path(spec["path"])
    size = path.stat().st_size
    what = spec["what"]
    started = time.perf_counter()
    if what == "blake3-mmap-all-threads":
        hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
        hasher.update_mmap(path)
        hasher.digest()
    elif what == "blake3-mmap-1-thread":
        hasher = blake3.blake3()
        hasher.update_mmap(path)
        hasher.digest()
    elif what == "sha256-1mib-reads":
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        digest.digest()
    elif what == "page-cache-read":
        buffer = bytearray(1 << 20)
        view = memoryview(buffer)
        with open(path, "rb", buffering=0) as handle:
            while handle.readinto(view):
                pass
    else:
        raise SystemExit(f"unknown machine test {what!r}")
    return {"seconds": time.perf_counter() - started, "bytes": size}


# With --commit, children import the library from a snapshot of that commit instead of
# the working tree (PYTHONPATH comes before the editable install's finder).
CHILD_ENV: dict[str, str] = {}

# Other work on this machine (a test suite, a build) skews a 2-core benchmark. Each run
# waits until the machine is quiet, and counts the CPU that others used while it ran
# ("foreign" CPU: all busy CPU from /proc/stat, steal included, minus this benchmark's
# own processes). A run during which others used more than CONTENDED cores on average is
# repeated, up to RETRIES times; the runs kept say how contended they were.
CONTENDED = 0.15
RETRIES = 3
QUIET_WAIT_S = 180.0


def _set_patience(quiet_wait: float, retries: int) -> None:
    global QUIET_WAIT_S, RETRIES
    QUIET_WAIT_S, RETRIES = quiet_wait, retries


def _busy_cpu_seconds() -> float:
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # waited-for descendants
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def wait_for_quiet(max_wait: float | None = None) -> float:
    """Sleep until others use < CONTENDED cores for 3 s in a row; returns seconds waited."""
    max_wait = QUIET_WAIT_S if max_wait is None else max_wait
    started = time.monotonic()
    quiet = 0
    while quiet < 3 and time.monotonic() - started < max_wait:
        busy, own = _busy_cpu_seconds(), _own_cpu_seconds()
        time.sleep(1.0)
        foreign = (_busy_cpu_seconds() - busy) - (_own_cpu_seconds() - own)
        quiet = quiet + 1 if foreign < CONTENDED else 0
    return time.monotonic() - started


def _accounted(call: Any) -> dict[str, Any]:
    """sync(2), wait for a quiet machine, run `call`, add the foreign CPU it saw."""
    os.sync()  # flush the previous run's writes outside the clock
    waited = wait_for_quiet()
    busy, own, started = _busy_cpu_seconds(), _own_cpu_seconds(), time.perf_counter()
    result = call()
    wall = time.perf_counter() - started
    foreign = (_busy_cpu_seconds() - busy) - (_own_cpu_seconds() - own)
    # /proc/stat counts in clock ticks (10 ms): judge short runs over at least one second.
    result["foreign_cores"] = round(max(foreign, 0.0) / max(wall, 1.0), 3)
    result["waited_for_quiet_s"] = round(waited, 1)
    return result


def measured(call: Any, label: str) -> dict[str, Any]:
    """`call()` (which returns an _accounted result), repeated while others were busy."""
    for attempt in range(RETRIES + 1):
        result = call()
        result["retries"] = attempt
        result["contended"] = result["foreign_cores"] > CONTENDED
        if not result["contended"]:
            return result
        print(f"    ({label}: other processes used {result['foreign_cores']:.2f} cores during "
              f"the run{'; repeating it' if attempt < RETRIES else '; kept, flagged'})",
              flush=True)
    return result


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    def call() -> dict[str, Any]:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
            capture_output=True, text=True, cwd=REPO, env={**os.environ, **CHILD_ENV},
        )
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            raise RuntimeError(f"child {spec['task']} failed with exit code {proc.returncode}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    return _accounted(call)


# --------------------------------------------------------------------------- inputs


def warm(paths: list[Path]) -> float:
    """Read every byte once so the timed runs find the inputs in the page cache."""
    started = time.perf_counter()
    buffer = bytearray(1 << 20)
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while handle.readinto(buffer):
                pass
    return time.perf_counter() - started


def _spec_matches(folder: Path, expected: dict[str, Any]) -> bool:
    spec_file = folder / "SPEC.json"
    if not spec_file.exists():
        return False
    try:
        found = json.loads(spec_file.read_text())
    except ValueError:
        return False
    return all(found.get(k) == v for k, v in expected.items())


def ensure_manifest(workdir: Path, fmt: str, documents: int, shards: int) -> list[Path]:
    import gen_manifest

    folder = workdir / f"manifest-{fmt}-{documents}"
    expected = {"documents": documents, "shards": shards, "format": fmt, "seed": 0}
    if not _spec_matches(folder, expected):
        shutil.rmtree(folder, ignore_errors=True)
        print(f"  generating {documents:,}-row {fmt} manifest in {shards} shards ...", flush=True)
        started = time.perf_counter()
        gen_manifest.generate(documents, shards, fmt, folder, seed=0)
        print(f"  ... done in {time.perf_counter() - started:.1f} s", flush=True)
    suffix = ".parquet" if fmt == "parquet" else ".jsonl"
    return sorted(p for p in folder.iterdir() if p.name.endswith(suffix))


def ensure_text(workdir: Path, files: int, shards: int, shard_mb: float) -> Path:
    import gen_text

    folder = workdir / f"text-{files}-{shards}x{shard_mb:g}mb"
    expected = {"files": files, "shards": shards, "shard_mb": shard_mb, "seed": 0}
    if not _spec_matches(folder, expected):
        shutil.rmtree(folder, ignore_errors=True)
        print(f"  generating {files} files and {shards} text shards ...", flush=True)
        gen_text.generate(folder, files=files, shards=shards, shard_mb=shard_mb, seed=0)
    return folder


def ensure_big_file(workdir: Path, megabytes: int) -> Path:
    import blake3

    path = workdir / f"big-{megabytes}mb.bin"
    size = megabytes << 20
    if not path.exists() or path.stat().st_size != size:
        tmp = path.with_name(path.name + ".partial")
        xof = blake3.blake3(b"lineage-bench/big-file")
        chunk = 64 << 20
        with open(tmp, "wb") as handle:
            for offset in range(0, size, chunk):
                handle.write(xof.digest(length=min(chunk, size - offset), seek=offset))
        tmp.replace(path)
    return path


# --------------------------------------------------------------------------- benchmarks


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _runs_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [r["seconds"] for r in runs]
    return {
        "runs_s": [round(s, 3) for s in seconds],
        "median_s": round(_median(seconds), 3),
        "foreign_cores": [r.get("foreign_cores") for r in runs],
        "contended_runs": sum(bool(r.get("contended")) for r in runs),
        "repeated_for_contention": sum(r.get("retries", 0) for r in runs),
        "max_rss_mb": round(max(max(r.get("maxrss_mb", 0), r.get("children_maxrss_mb", 0))
                                for r in runs), 1),
    }


def _fresh_store(workdir: Path, name: str) -> Path:
    folder = workdir / "stores" / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    return folder


def run_pair(
    *,
    name: str,
    workdir: Path,
    ingest_spec: dict[str, Any],
    floor_spec: dict[str, Any] | None,
    runs: int,
    warmup: bool,
    floor_cmd: list[str] | None = None,
    floor_stdin: bytes | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Alternate ingest and floor runs; returns (ingest runs, floor runs)."""
    ingest_runs: list[dict[str, Any]] = []
    floor_runs: list[dict[str, Any]] = []

    def ingest() -> dict[str, Any]:
        store = _fresh_store(workdir, name)
        try:
            return run_child({**ingest_spec, "task": "ingest", "store": str(store)})
        finally:
            shutil.rmtree(store, ignore_errors=True)

    def floor() -> dict[str, Any]:
        if floor_spec is not None:
            return run_child(floor_spec)
        assert floor_cmd is not None
        return _run_command(floor_cmd, floor_stdin)

    has_floor = floor_spec is not None or floor_cmd is not None
    for i in range(-1 if warmup else 0, runs):
        label = "warm-up" if i < 0 else f"run {i + 1}"
        result = measured(ingest, f"{name} {label}")
        floor_result = measured(floor, f"{name} floor {label}") if has_floor else None
        floor_text = f", floor {floor_result['seconds']:.3f} s" if floor_result else ""
        print(f"    {name} {label}: {result['seconds']:.3f} s{floor_text}", flush=True)
        if i >= 0:
            ingest_runs.append(result)
            if floor_result:
                floor_runs.append(floor_result)
    return ingest_runs, floor_runs


def _run_command(cmd: list[str], stdin: bytes | None) -> dict[str, Any]:
    def call() -> dict[str, Any]:
        started = time.perf_counter()
        proc = subprocess.run(cmd, input=stdin, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
        seconds = time.perf_counter() - started
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed: {proc.stderr.decode(errors='replace')}")
        return {"seconds": seconds}

    return _accounted(call)


def phase_run(workdir: Path, name: str, ingest_spec: dict[str, Any]) -> dict[str, Any]:
    store = _fresh_store(workdir, name + "-phases")
    try:
        result = run_child({**ingest_spec, "task": "ingest-phases", "store": str(store)})
    finally:
        shutil.rmtree(store, ignore_errors=True)
    import phases

    print(f"    {name} phase run (workers={ingest_spec.get('workers')}): "
          f"{result['seconds']:.3f} s", flush=True)
    for line in phases.format_report(result["phases"], result["seconds"]):
        print(f"      {line}", flush=True)
    return {"workers": ingest_spec.get("workers"), "seconds": round(result["seconds"], 3),
            "phases": result["phases"]}


def bench_manifest(workdir: Path, fmt: str, documents: int, shards: int, args: Any,
                   quick: bool) -> dict[str, Any]:
    paths = ensure_manifest(workdir, fmt, documents, shards)
    name = f"manifest-{fmt}-{_count(documents)}"
    print(f"  {name}: {len(paths)} shards, warming page cache", flush=True)
    input_bytes = sum(p.stat().st_size for p in paths)
    warm(paths)
    spec = {"paths": [str(p) for p in paths], "fmt": "manifest"}
    floor_out = workdir / "stores" / "floor-sorted.parquet"
    floor_out.parent.mkdir(parents=True, exist_ok=True)
    floor_spec = {"task": "manifest-floor", "paths": [str(p) for p in paths], "kind": fmt,
                  "out": str(floor_out)}
    ingest_runs, floor_runs = run_pair(
        name=name, workdir=workdir, ingest_spec=spec, floor_spec=floor_spec, runs=args.runs,
        warmup=documents < NO_WARMUP_FROM_ROWS,
    )
    floor_out.unlink(missing_ok=True)
    _check_same(name, ingest_runs, documents)
    entry = _entry(name, "manifest", ingest_runs, documents=documents, input_bytes=input_bytes,
                   content_bytes=None)
    entry["inputs"] = f"{len(paths)} {fmt} shards, {input_bytes / 1e6:,.0f} MB"
    entry["floor"] = {"name": "DuckDB alone: read + ORDER BY doc_id + COPY to zstd Parquet",
                      **_runs_summary(floor_runs)}
    entry["floor"]["docs_per_s"] = round(documents / entry["floor"]["median_s"])
    if documents == MANIFEST_TARGET_ROWS or (quick and documents == max(
            d for _, d, _ in QUICK["manifests"])):
        limit = MANIFEST_TARGET_S * documents / MANIFEST_TARGET_ROWS
        scaled = documents != MANIFEST_TARGET_ROWS
        entry["target"] = {"text": f"<= {limit:g} s" + (" (10M target scaled)" if scaled else ""),
                           "kind": "max_seconds", "value": limit}
        entry["met"] = entry["median_s"] <= limit
    else:
        entry["target"] = {"text": "none (10M: <= 20 s)", "kind": None, "value": None}
        entry["met"] = None
    entry["ratio_vs_floor"] = round(entry["floor"]["median_s"] / entry["median_s"], 3)
    if args.phases:
        entry["phase_run"] = phase_run(workdir, name, spec)
    return entry


def bench_files(workdir: Path, text_dir: Path, args: Any) -> dict[str, Any]:
    root = text_dir / "files"
    files = sorted(p for p in root.rglob("*") if p.is_file())
    content = sum(p.stat().st_size for p in files)
    name = "files"
    print(f"  {name}: {len(files)} files, {content / 1e6:,.0f} MB, warming page cache",
          flush=True)
    warm(files)
    b3sum = shutil.which("b3sum")
    if b3sum is None:
        print(f"  !! {B3SUM_HINT}", flush=True)
    stdin = b"\0".join(str(p).encode() for p in files)
    spec = {"paths": [str(root)], "fmt": "files"}
    ingest_runs, floor_runs = run_pair(
        name=name, workdir=workdir, ingest_spec=spec, floor_spec=None, runs=args.runs,
        warmup=True, floor_cmd=["xargs", "-0", b3sum, "--"] if b3sum else None,
        floor_stdin=stdin,
    )
    _check_same(name, ingest_runs, len(files))
    entry = _entry(name, "files", ingest_runs, documents=len(files), input_bytes=content,
                   content_bytes=content)
    entry["inputs"] = f"{len(files)} files of 64-256 KiB, {content / 1e6:,.0f} MB"
    entry["target"] = {"text": f">= {FILES_TARGET_RATIO}x b3sum", "kind": "min_ratio",
                       "value": FILES_TARGET_RATIO}
    if b3sum:
        entry["floor"] = {"name": "b3sum (mmap + threads, its default) over the same files",
                          **_runs_summary(floor_runs)}
        entry["floor"]["mb_per_s"] = round(content / 1e6 / entry["floor"]["median_s"], 1)
        entry["ratio_vs_floor"] = round(entry["floor"]["median_s"] / entry["median_s"], 3)
        entry["met"] = entry["ratio_vs_floor"] >= FILES_TARGET_RATIO
        no_mmap = ["xargs", "-0", b3sum, "--no-mmap", "--"]
        extra = [measured(lambda: _run_command(no_mmap, stdin), "b3sum --no-mmap")
                 for _ in range(args.runs)]
        entry["floor_no_mmap"] = {"name": "b3sum --no-mmap over the same files",
                                  **_runs_summary(extra)}
        entry["floor_no_mmap"]["mb_per_s"] = round(
            content / 1e6 / entry["floor_no_mmap"]["median_s"], 1)
        entry["hashes_match_b3sum"] = _compare_with_b3sum(workdir, root, files, b3sum)
    else:
        entry["floor"] = {"name": "b3sum: not installed", "hint": B3SUM_HINT}
        entry["met"] = None
    if args.phases:
        entry["phase_run"] = phase_run(workdir, name, spec)
    return entry


def _compare_with_b3sum(workdir: Path, root: Path, files: list[Path], b3sum: str) -> bool:
    """The ingest's content_hash of every file equals b3sum's (one extra, untimed run)."""
    store = _fresh_store(workdir, "files-check")
    try:
        got = run_child({"task": "ingest", "store": str(store), "paths": [str(root)],
                         "fmt": "files", "dump_hashes": True})["hashes"]
    finally:
        shutil.rmtree(store, ignore_errors=True)
    proc = subprocess.run(["xargs", "-0", b3sum, "--"],
                          input=b"\0".join(str(p).encode() for p in files),
                          capture_output=True, check=True)
    expected = {}
    for line in proc.stdout.decode().splitlines():
        digest, path = line.split("  ", 1)
        expected[Path(path).relative_to(root).as_posix()] = digest
    return got == expected


def bench_text(workdir: Path, text_dir: Path, kind: str, args: Any) -> dict[str, Any]:
    paths = sorted((text_dir / kind).iterdir())
    name = f"{kind}-text"
    input_bytes = sum(p.stat().st_size for p in paths)
    print(f"  {name}: {len(paths)} shards, {input_bytes / 1e6:,.0f} MB, warming page cache",
          flush=True)
    warm(paths)
    spec = {"paths": [str(p) for p in paths], "fmt": kind}
    floor_spec = {"task": "text-floor", "paths": [str(p) for p in paths], "kind": kind}
    ingest_runs, floor_runs = run_pair(
        name=name, workdir=workdir, ingest_spec=spec, floor_spec=floor_spec, runs=args.runs,
        warmup=True,
    )
    content = floor_runs[0]["bytes"]
    _check_same(name, ingest_runs, floor_runs[0]["documents"])
    entry = _entry(name, "text", ingest_runs, documents=floor_runs[0]["documents"],
                   input_bytes=input_bytes, content_bytes=content)
    entry["inputs"] = (f"{len(paths)} {kind} shards, {input_bytes / 1e6:,.0f} MB on disk, "
                       f"{content / 1e6:,.0f} MB of text")
    label = "pyarrow.json" if kind == "jsonl" else "pyarrow.parquet"
    entry["floor"] = {"name": f"{label} read + blake3(text).digest() per document, 1 process",
                      **_runs_summary(floor_runs)}
    entry["floor"]["mb_per_s"] = round(content / 1e6 / entry["floor"]["median_s"], 1)
    entry["ratio_vs_floor"] = round(entry["floor"]["median_s"] / entry["median_s"], 3)
    entry["target"] = {"text": f">= {TEXT_TARGET_RATIO}x floor", "kind": "min_ratio",
                       "value": TEXT_TARGET_RATIO}
    entry["met"] = entry["ratio_vs_floor"] >= TEXT_TARGET_RATIO
    if args.phases:
        # workers=1: the map runs in this process, so its inside can be timed too.
        entry["phase_run"] = phase_run(workdir, name, {**spec, "workers": 1})
    return entry


def bench_machine(workdir: Path, megabytes: int, args: Any) -> list[dict[str, Any]]:
    path = ensure_big_file(workdir, megabytes)
    print(f"  machine: one {megabytes} MiB file, warming page cache", flush=True)
    warm([path])
    out = []
    for what in ("blake3-mmap-all-threads", "blake3-mmap-1-thread", "sha256-1mib-reads",
                 "page-cache-read"):
        spec = {"task": "machine", "path": str(path), "what": what}
        runs = [measured(lambda spec=spec: run_child(spec), what)
                for _ in range(args.runs)]
        summary = _runs_summary(runs)
        size = runs[0]["bytes"]
        print(f"    {what}: {size / 1e6 / summary['median_s']:,.0f} MB/s", flush=True)
        out.append({"name": f"machine: {what}", "kind": "machine", **summary,
                    "inputs": f"one {megabytes} MiB file in the page cache",
                    "mb_per_s": round(size / 1e6 / summary["median_s"], 1)})
    return out


def _count(n: int) -> str:
    return f"{n // 1_000_000}m" if n % 1_000_000 == 0 else f"{n // 1000}k"


def _entry(name: str, kind: str, runs: list[dict[str, Any]], *, documents: int,
           input_bytes: int, content_bytes: int | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "kind": kind, **_runs_summary(runs),
                             "documents": documents, "input_bytes": input_bytes,
                             "manifest_hash": runs[0]["manifest_hash"]}
    entry["docs_per_s"] = round(documents / entry["median_s"])
    entry["import_s"] = round(_median([r.get("import_seconds", 0.0) for r in runs]), 3)
    if content_bytes is not None:
        entry["content_bytes"] = content_bytes
        entry["mb_per_s"] = round(content_bytes / 1e6 / entry["median_s"], 1)
    return entry


def _check_same(name: str, runs: list[dict[str, Any]], documents: int) -> None:
    hashes = {r["manifest_hash"] for r in runs}
    counts = {r["documents"] for r in runs}
    if len(hashes) != 1 or counts != {documents}:
        raise RuntimeError(f"{name}: runs disagree or miscount: {hashes} {counts} != {documents}")
    source = CHILD_ENV.get("PYTHONPATH")
    if source and not all(r["lineage_file"].startswith(source) for r in runs):
        raise RuntimeError(f"{name}: a run imported lineage from outside {source}")


# --------------------------------------------------------------------------- report


def snapshot_source(rev: str, workdir: Path) -> tuple[Path, str]:
    """The library at commit `rev`, laid out as importable packages under `workdir/src`."""
    import tomllib

    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout.strip()
    dest = workdir / "src" / sha[:12]
    if not (dest / ".complete").exists():
        shutil.rmtree(dest, ignore_errors=True)
        tree = workdir / "src" / f"{sha[:12]}-tree"
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", sha], cwd=REPO, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        setup = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]
        package_dir = setup.get("package-dir", {})
        for package in sorted(setup["packages"], key=lambda p: p.count(".")):
            source = tree / package_dir.get(package, package.replace(".", "/"))
            shutil.copytree(source, dest / package.replace(".", "/"), dirs_exist_ok=True)
        shutil.rmtree(tree)
        (dest / ".complete").write_text(sha + "\n")
    return dest, sha


def machine_info() -> dict[str, Any]:
    import blake3
    import duckdb
    import polars
    import pyarrow

    import lineage

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    b3sum = shutil.which("b3sum")
    b3sum_version = (subprocess.run([b3sum, "--version"], capture_output=True, text=True)
                     .stdout.strip() if b3sum else None)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=REPO).stdout.strip() or None
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "lineage", "ingest"],
                           capture_output=True, text=True, cwd=REPO).stdout.strip() != ""
    return {
        "git_commit": commit, "library_dirty": dirty, "load_avg_at_start": os.getloadavg(),
        "cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem / 2**30, 1),
        "kernel": platform.release(), "python": platform.python_version(),
        "lineage": lineage.__version__, "duckdb": duckdb.__version__,
        "pyarrow": pyarrow.__version__, "polars": polars.__version__,
        "blake3": getattr(blake3, "__version__", "?"), "b3sum": b3sum_version,
    }


def _fmt_runs(entry: dict[str, Any]) -> str:
    return " / ".join(f"{s:.2f}" for s in entry["runs_s"])


def print_table(results: list[dict[str, Any]]) -> None:
    header = (f"{'benchmark':26s} {'median s':>9s} {'runs s':>22s} {'throughput':>16s} "
              f"{'floor median s':>15s} {'vs floor':>9s} {'target':>30s} {'met':>4s}")
    print()
    print(header)
    print("-" * len(header))
    for e in results:
        if e["kind"] == "machine":
            print(f"{e['name']:26.26s} {e['median_s']:9.3f} {_fmt_runs(e):>22s} "
                  f"{e['mb_per_s']:>11,.0f} MB/s")
            continue
        if "mb_per_s" in e:
            through = f"{e['mb_per_s']:,.0f} MB/s"
        else:
            through = f"{e['docs_per_s'] / 1e6:.2f} M docs/s"
        floor = e.get("floor", {})
        floor_s = f"{floor['median_s']:.3f}" if "median_s" in floor else "n/a"
        ratio = f"{e['ratio_vs_floor']:.2f}x" if "ratio_vs_floor" in e else "n/a"
        met = {True: "yes", False: "NO", None: "-"}[e.get("met")]
        if e.get("contended_runs") or floor.get("contended_runs"):
            met += "*"
        print(f"{e['name']:26s} {e['median_s']:9.3f} {_fmt_runs(e):>22s} {through:>16s} "
              f"{floor_s:>15s} {ratio:>9s} {e['target']['text']:>30s} {met:>4s}")
    if any(e.get("contended_runs") or e.get("floor", {}).get("contended_runs")
           for e in results):
        print(f"* a kept run had other processes using > {CONTENDED} cores "
              "(see foreign_cores in results.json)")
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small inputs, a few minutes")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per benchmark (>= 3)")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR,
                        help="generated inputs and scratch stores (default /tmp/lineage-bench)")
    parser.add_argument("--only", default="", help="comma list: manifest,files,text,machine")
    parser.add_argument("--no-phases", dest="phases", action="store_false",
                        help="skip the extra run with phase timers")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "results.json")
    parser.add_argument("--quiet-wait", type=float, default=QUIET_WAIT_S, metavar="S",
                        help="before each run, wait up to S seconds for other processes to "
                             f"go below {CONTENDED} cores (default {QUIET_WAIT_S:g})")
    parser.add_argument("--retries", type=int, default=RETRIES,
                        help=f"repeat a run this often while others were busy during it "
                             f"(default {RETRIES})")
    parser.add_argument("--commit", metavar="REV",
                        help="measure the library as committed at REV (e.g. HEAD) instead of "
                             "the working tree; bench/ itself always comes from the tree")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        print(json.dumps(_child_main(json.loads(args.child))))
        return 0
    if args.runs < 3:
        parser.error("--runs must be at least 3")
    _set_patience(args.quiet_wait, args.retries)
    workdir = args.workdir.resolve()
    if workdir == REPO or REPO in workdir.parents:
        parser.error("--workdir must be outside the repository")
    workdir.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(BENCH_DIR))
    sizes = QUICK if args.quick else FULL
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    wanted = (lambda group: not only or group in only)  # noqa: E731

    if shutil.which("b3sum") is None:
        print(f"!! {B3SUM_HINT}; the files benchmark will have no floor", flush=True)
    info = machine_info()
    if args.commit:
        source, sha = snapshot_source(args.commit, workdir)
        CHILD_ENV["PYTHONPATH"] = str(source)
        info["measured"] = {"commit": sha, "from": str(source)}
        print(f"  measuring the library at commit {sha[:12]} ({source})", flush=True)
    else:
        info["measured"] = {"commit": info["git_commit"], "from": "working tree",
                            "dirty": info["library_dirty"]}
    print(f"lineage benchmarks ({'quick' if args.quick else 'full'}), workdir {workdir}")
    print(f"  {info['cores']} cores ({info['cpu']}), {info['memory_gib']} GiB, Python "
          f"{info['python']}, duckdb {info['duckdb']}, pyarrow {info['pyarrow']}, "
          f"blake3 {info['blake3']}", flush=True)
    started = time.perf_counter()
    results: list[dict[str, Any]] = []
    if wanted("machine"):
        results.extend(bench_machine(workdir, sizes["big_file_mb"], args))
    if wanted("files") or wanted("text"):
        text_dir = ensure_text(workdir, sizes["files"], sizes["text_shards"], sizes["shard_mb"])
        if wanted("files"):
            results.append(bench_files(workdir, text_dir, args))
        if wanted("text"):
            for kind in ("jsonl", "parquet"):
                results.append(bench_text(workdir, text_dir, kind, args))
    if wanted("manifest"):
        for fmt, documents, shards in sizes["manifests"]:
            results.append(bench_manifest(workdir, fmt, documents, shards, args, args.quick))

    print_table(results)
    payload = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "mode": "quick" if args.quick else "full",
        "runs": args.runs,
        "workdir": str(workdir),
        "total_seconds": round(time.perf_counter() - started, 1),
        "machine": info,
        "method": ("inputs warmed into the page cache before each benchmark; sync(2) before "
                   "every run; each run a fresh process and a fresh store; the clock covers "
                   "ingest_corpus() only; ingest and floor runs alternate"),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {args.out} ({payload['total_seconds']:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
