"""`lineage serve` under load on loopback: latency (p50, p99) and throughput of `docs`
and `trained-on` (by hash, a posted file, and by text) at a bounded number of concurrent
clients.

    .venv/bin/python bench/serve.py [--documents 10000000] [--clients 1 16 64]
                                    [--seconds 10] [--workers 2] [--workdir DIR]
                                    [--rates 100 200 400] [--lookup-copies]

The store is bench/stream.py's (a ready manifest from bench/gen_manifest.py, ingested,
and a stream `main` of seq_len 2048 x batch 64), made once per size in the work folder,
with the example corpus and a stream of it beside them (the generated corpus has no
bytes to post). The server is the real command (`lineage serve --workers N`) in its own
processes; the clients run in this process on asyncio, each with one keep-alive
connection, sending its next request as soon as the answer is in (a closed loop: N
clients, at most N requests in flight). With `--rates`, each client count is also run as
an open loop: the clients ask that many questions a second in all, evenly spaced,
whatever the answers' speed, which is the latency a service sees below the server's
capacity. Each request of the first five workloads asks something new (random steps out
of 70,175, random documents' content hashes, the example corpus's files posted byte for
byte, texts no document holds, 80-word passages of those files), so no answer comes from
the server's memory of answers; the last two ask about 50 steps or files over and over,
the case that memory is for. Every answer is checked (status 200, the header's exit
code); any other outcome counts as an error. The CPU time of the server's processes and
of the clients' is recorded per answer, and before each cell the CPU time of a fixed
piece of plain Python ("reference": how fast the machine was in that minute; a shared
machine's hours differ by up to 2x). Results go to bench/out/serve.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

WORDS = ("river stone lantern copper meadow quiet harbor signal winter orchard lattice "
         "ember canvas thistle marble cobalt").split()


def prepare(workdir: Path, documents: int) -> Path:
    """bench/stream.py's store of `documents` documents, with a stream named main, and
    the example corpus beside it for its text index (the generated corpus has no text)."""
    import stream as stream_bench

    import lineage

    store = stream_bench.prepare(workdir, documents)
    opened = lineage.open_store(store)
    lineage_cli = (sys.executable, "-m", "lineage.cli", "--store", str(store))
    if "main" not in [s["name"] for s in opened.streams()]:
        stream_bench.sh(*lineage_cli, "stream", "build", "--corpus", "c", "--name", "main",
                        "--seed", "42", "--seq-len", "2048", "--batch", "64")
    if "example" not in [c["name"] for c in opened.corpora()]:
        stream_bench.sh(*lineage_cli, "ingest", "corpus", str(REPO / "examples" / "corpus"),
                        "--corpus", "example")
    if "examples" not in [s["name"] for s in opened.streams()]:  # files posted as they are
        stream_bench.sh(*lineage_cli, "stream", "build", "--corpus", "example", "--name",
                        "examples", "--seed", "42", "--seq-len", "2048", "--batch", "8")
    return store


def start_server(store: Path, port: int, workers: int, log: Path,
                 lookup_copies: bool = False) -> subprocess.Popen[bytes]:
    lineage_bin = str(Path(sys.executable).with_name("lineage"))
    copies = ["--lookup-copies"] if lookup_copies else []
    with log.open("wb") as stderr:  # the child keeps its own copy of the descriptor
        server = subprocess.Popen([lineage_bin, "--store", str(store), "serve", "--port",
                                   str(port), "--workers", str(workers), *copies],
                                  stderr=stderr)
    deadline = time.monotonic() + 600  # lookup copies of a 10M-document store: ~20 s
    while time.monotonic() < deadline:
        try:
            asyncio.run(_one(port, _get("/api/streams")))
            return server
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(log.read_text()) from None
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("the server did not start")


def server_cpu_seconds(server: subprocess.Popen[bytes]) -> float:
    """CPU time used so far by the server's processes (the supervisor and its workers),
    from /proc: how much machine each answer took, whatever else the machine ran."""
    pids = [server.pid]
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


def _post(path: str, body: bytes) -> bytes:
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (line.partition(":") for line in lines[1:] if line)}
    if headers.get("transfer-encoding") == "chunked":  # datasette's answers (headline.py)
        body = b""
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            body += (await reader.readexactly(size + 2))[:-2]
        await reader.readuntil(b"\r\n")  # no trailers
        return status, headers, body
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


async def _one(port: int, request: bytes) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    status, _, _ = await _read_answer(reader)
    writer.close()
    return status


async def _client(port: int, make: Callable[[], tuple[bytes, str]], deadline: float,
                  latencies: list[float], errors: list[str],
                  pace: tuple[float, float] | None = None) -> None:
    """A client asking until `deadline`: its next question as soon as an answer is in (a
    closed loop), or with `pace` (first time, interval) one every interval from the first
    time on, the next at once when an answer came late (an open loop)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    due = pace[0] if pace else 0.0
    while (due if pace else time.perf_counter()) < deadline:
        if pace:
            if (wait := due - time.perf_counter()) > 0:
                await asyncio.sleep(wait)
            due += pace[1]
        request, exit_code = make()
        started = time.perf_counter()
        try:
            writer.write(request)
            status, headers, _ = await _read_answer(reader)
        except (OSError, asyncio.IncompleteReadError) as exc:
            errors.append(type(exc).__name__)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            continue
        latencies.append(time.perf_counter() - started)
        if status != 200 or headers.get("x-lineage-exit-code") != exit_code:
            errors.append(f"{status} exit {headers.get('x-lineage-exit-code')}")
    writer.close()


async def _load(port: int, make: Callable[[], tuple[bytes, str]], clients: int,
                seconds: float, cpu: Callable[[], float], rate: float | None = None,
                ) -> dict[str, object]:
    """`clients` connections asking as fast as answers come (closed loop), or, with a
    `rate`, asking `rate` questions a second in all, spread evenly over them (open loop:
    the latency a service sees below the server's capacity)."""
    latencies: list[float] = []
    errors: list[str] = []
    warm_until = time.perf_counter() + 1.0  # connections and caches first, not timed
    await asyncio.gather(*(_client(port, make, warm_until, [], errors) for _ in range(clients)))
    errors.clear()
    cpu_before, client_before = cpu(), time.process_time()
    started = time.perf_counter()
    interval = None if rate is None else clients / rate
    await asyncio.gather(*(_client(port, make, started + seconds, latencies, errors,
                                   None if interval is None else
                                   (started + i * interval / clients, interval))
                           for i in range(clients)))
    elapsed = time.perf_counter() - started
    cpu_used, client_used = cpu() - cpu_before, time.process_time() - client_before
    latencies.sort()
    ms = [x * 1000 for x in latencies]
    return {"clients": clients, "offered_rps": rate, "requests": len(ms), "errors": len(errors),
            "error_kinds": sorted(set(errors))[:5],
            "p50_ms": round(statistics.median(ms), 2) if ms else None,
            "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 2) if ms else None,
            "throughput_rps": round(len(ms) / elapsed, 1),
            "server_cpu_ms_per_request": round(cpu_used * 1000 / max(1, len(ms)), 2),
            "client_cpu_ms_per_request": round(client_used * 1000 / max(1, len(ms)), 3)}


def workloads(store: Path) -> dict[str, Callable[[], tuple[bytes, str]]]:
    """Each workload makes its next request (and the exit code its answer must carry)."""
    import blake3

    import lineage

    opened = lineage.open_store(store)
    steps = int(opened.stream("main")["steps"])
    # Documents the stream holds (exit code 0), enough that a run of a few thousand
    # questions seldom asks one twice (an answer asked again comes from memory).
    hashes = [row[0] for row in opened.sql(
        "SELECT content_hash FROM occurrences WHERE stream = 'main' "
        "USING SAMPLE 200000 ROWS (reservoir, 7)",
        max_rows=None).rows]
    rng = random.Random(7)

    def docs() -> tuple[bytes, str]:
        return _get(f"/api/docs?step={rng.randrange(steps)}&stream=main"), "0"

    def by_hash() -> tuple[bytes, str]:
        return _get(f"/api/trained-on?hash={rng.choice(hashes)}&stream=main"), "0"

    # The example corpus's files, posted byte for byte: a rights holder's exact question.
    # Each asks with its own min_containment (an exact answer does not depend on it), so
    # that none comes from the server's memory of answers: 282 files would, after a while.
    held = {row[0] for row in opened.sql("SELECT content_hash FROM occurrences WHERE "
                                         "stream = 'examples'", max_rows=None).rows}
    files = [data for data in sorted(p.read_bytes() for p in
                                     (REPO / "examples" / "corpus").rglob("*") if p.is_file())
             if blake3.blake3(data).hexdigest() in held]  # not those past its last step

    def posted_file() -> tuple[bytes, str]:
        return _post(f"/api/trained-on?min_containment=0.{rng.randrange(10**9):09d}",
                     rng.choice(files)), "0"

    # 80 words of one of those files, re-spaced: a rights holder's pasted passage, matched
    # by its fingerprints and checked against the document's text (partial, exit code 0).
    passages = [found for data in files
                if len(found := data.decode("utf-8", "replace").split()) >= 200]

    def excerpt() -> tuple[bytes, str]:
        chosen = rng.choice(passages)
        start = rng.randrange(len(chosen) - 80)
        return _post("/api/trained-on?stream=examples",
                     " ".join(chosen[start:start + 80]).encode()), "0"

    def by_text() -> tuple[bytes, str]:
        text = " ".join(rng.choice(WORDS) for _ in range(60)) + f" {rng.random()}"
        return _post("/api/trained-on?stream=main", text.encode()), "1"

    popular_steps = [rng.randrange(steps) for _ in range(50)]
    popular_hashes = hashes[:50]

    def docs_again() -> tuple[bytes, str]:
        return _get(f"/api/docs?step={rng.choice(popular_steps)}&stream=main"), "0"

    def by_hash_again() -> tuple[bytes, str]:
        return _get(f"/api/trained-on?hash={rng.choice(popular_hashes)}&stream=main"), "0"

    return {"docs --step": docs, "trained-on by hash": by_hash,
            "trained-on a posted file, exact": posted_file,
            "trained-on by text": by_text,
            "trained-on a passage of a file": excerpt,
            "docs --step, 50 steps asked again": docs_again,
            "trained-on by hash, 50 files asked again": by_hash_again}


def reference_ms() -> float:
    """CPU milliseconds for a fixed piece of plain Python (building and reading small
    dicts of strings and integers, as an answer does), the median of five. The same code
    answers 20-100% slower in some hours of a shared machine than in others; this says
    how fast the hour was, whatever the server's code."""
    def once() -> float:
        started = time.process_time()
        rows = [{"id": f"doc/{i:010d}", "source": "web", "start": i * 7, "end": i * 7 + 5}
                for i in range(40_000)]
        total = sum(row["end"] - row["start"] for row in rows if row["source"] == "web")
        assert total == 200_000
        return (time.process_time() - started) * 1000

    once()  # the allocator's first arenas
    return round(statistics.median(once() for _ in range(5)), 1)


def medians(rounds: list[dict[str, object]]) -> list[dict[str, object]]:
    """Per workload and client count: the median of each figure over the rounds, the
    errors summed."""
    cells: dict[tuple[str, int, object], list[dict[str, object]]] = {}
    for row in rounds:
        cells.setdefault((str(row["workload"]), int(row["clients"]), row.get("offered_rps")),  # type: ignore[call-overload]
                         []).append(row)
    out = []
    for (workload, clients, offered), rows in cells.items():
        entry: dict[str, object] = {"workload": workload, "clients": clients,
                                    "offered_rps": offered}
        for key in ("p50_ms", "p99_ms", "throughput_rps", "server_cpu_ms_per_request",
                    "client_cpu_ms_per_request", "reference_ms"):
            values = [float(r[key]) for r in rows if r[key] is not None]  # type: ignore[arg-type]
            entry[key] = round(statistics.median(values), 2) if values else None
            entry[key.replace("_ms", "") + "_runs"] = values
        entry["errors"] = sum(int(r["errors"]) for r in rows)  # type: ignore[call-overload]
        entry["requests"] = sum(int(r["requests"]) for r in rows)  # type: ignore[call-overload]
        out.append(entry)
    return out


def print_table(rows: list[dict[str, object]]) -> None:
    print("| workload | clients | asked | p50 | p99 | throughput | server CPU per answer "
          "| client CPU per answer | reference | requests | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        asked = "at once" if r["offered_rps"] is None else f"{r['offered_rps']:g}/s"
        print(f"| {r['workload']} | {r['clients']} | {asked} | {r['p50_ms']} ms | "
              f"{r['p99_ms']} ms | "
              f"{r['throughput_rps']}/s | {r['server_cpu_ms_per_request']} ms | "
              f"{r['client_cpu_ms_per_request']} ms | {r['reference_ms']} ms | "
              f"{r['requests']} | {r['errors']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=10_000_000)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3, help="rounds; medians are reported")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--only", nargs="+", help="only the workloads whose names start so")
    parser.add_argument("--rates", type=float, nargs="+",
                        help="also ask at these rates (questions a second, in all)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench-serve"))
    parser.add_argument("--lookup-copies", action="store_true",
                        help="serve with `lineage serve --lookup-copies`")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stops the server on the way out
    args.workdir.mkdir(parents=True, exist_ok=True)
    store = prepare(args.workdir, args.documents)
    made = {name: make for name, make in workloads(store).items()
            if not args.only or any(name.startswith(o) for o in args.only)}
    server = start_server(store, args.port, args.workers, args.workdir / "serve.log",
                          args.lookup_copies)
    if args.lookup_copies:  # the kernel writes the new copies back in the first minute:
        os.sync()  # measure the server as it runs after that, not during it
    results: dict[str, object] = {
        "machine": {"cores": os.cpu_count(), "python": sys.version.split()[0],
                    "interpreter": os.path.realpath(sys.executable),  # builds differ
                    "load_before": os.getloadavg()},
        "documents": args.documents, "workers": args.workers, "seconds": args.seconds,
        "lookup_copies": args.lookup_copies,
        "runs": []}
    rounds: list[dict[str, object]] = []
    try:
        for round_number in range(args.runs):  # rounds in turn: a busy minute hits all cells
            for name, make in made.items():
                for clients, rate in [(c, r) for c in args.clients
                                      for r in [None, *(args.rates or [])]]:
                    row = {"round": round_number, "workload": name,
                           "reference_ms": reference_ms(),
                           **asyncio.run(_load(args.port, make, clients, args.seconds,
                                               lambda: server_cpu_seconds(server), rate))}
                    print(json.dumps(row), flush=True)
                    rounds.append(row)
    finally:
        server.terminate()
        server.wait(timeout=30)
    results["runs"] = rounds
    results["medians"] = medians(rounds)
    print_table(results["medians"])
    results["machine"]["load_after"] = os.getloadavg()  # type: ignore[index]
    out = REPO / "bench" / "out" / "serve.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
