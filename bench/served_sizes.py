"""A served lookup's cost as the store grows: server CPU per new answer at 16 clients.

    .venv/bin/python bench/served_sizes.py --store STORE [--stream open1b] [--runs 3]
                                           [--seconds 5] [--label 100M]

`lineage serve` (2 workers) answers random steps (`/api/docs`), one random window of a
random step (`/api/docs?window=`), random content hashes of documents the stream holds
(`/api/trained-on?hash=`) and, when the store has a run on the stream, random steps traced
(`/api/trace?step=`), 16 closed-loop clients each, in rounds;
the CPU of the server's processes comes from /proc (bench/serve.py's accounting), so the
figure is what each answer costs the machine whatever else it runs. The same store sizes
bench/open1b.py builds (its stream is `open1b`) give the curve; a flat curve is the goal.
The Open-1B shape keeps 80,957 steps at every size, so a step's windows (and the documents
a `docs --step` answer lists) grow with the corpus: the one-window answer lists a few
documents at every size, and the documents an answer lists (the mean over 200 random
steps, in process) are written beside each figure.
Results go to bench/out/served-<label>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve  # noqa: E402  (bench/serve.py: server start, load loop, CPU accounting)

REPO = Path(__file__).resolve().parents[1]
PORT = 8781


def questions(store: Path, stream: str) -> dict[str, Any]:
    """Each workload's next request (and the exit code its answer must carry)."""
    import lineage

    opened = lineage.open_store(store)
    info = opened.stream(stream)
    steps = int(info["steps"])
    hashes = [r[0] for r in opened.sql(
        f"SELECT content_hash FROM occurrences WHERE stream = '{stream}' "
        "USING SAMPLE 100000 ROWS (reservoir, 7)", max_rows=None).rows]
    runs = [r[0] for r in opened.sql(
        f"SELECT name FROM runs WHERE stream = '{stream}' ORDER BY name").rows]
    rng = random.Random(7)
    windows = int(info["batch"])
    made = {
        "docs": lambda: (serve._get(f"/api/docs?step={rng.randrange(steps)}&stream={stream}"),
                         "0"),
        "docs, one window": lambda: (serve._get(one_window(rng, steps, windows, stream)),
                                     "0"),
        "trained-on by hash": lambda: (serve._get(
            f"/api/trained-on?hash={rng.choice(hashes)}&stream={stream}"), "0"),
    }
    if runs:
        made["trace --step"] = lambda: (serve._get(
            f"/api/trace?run={runs[0]}&step={rng.randrange(steps)}"), "0")
    return {"made": made, "documents": opened.sql(
        "SELECT sum(documents) FROM corpora").rows[0][0], "steps": steps,
        "listed": listed(opened, stream, steps, windows)}


def one_window(rng: random.Random, steps: int, windows: int, stream: str) -> str:
    """A random window of a random step (window numbers count from the stream's start)."""
    step = rng.randrange(steps)
    return (f"/api/docs?step={step}&window={step * windows + rng.randrange(windows)}"
            f"&stream={stream}")


def listed(store: Any, stream: str, steps: int, windows: int) -> dict[str, float]:
    """The mean number of document segments a step's answer and a window's answer list."""
    from lineage.stream.query import docs_in_step

    rng = random.Random(11)
    whole = [len(docs_in_step(store, rng.randrange(steps), stream=stream)["documents"])
             for _ in range(200)]
    window = []
    for _ in range(200):
        step = rng.randrange(steps)
        window.append(len(docs_in_step(store, step, stream=stream, window=step * windows
                                       + rng.randrange(windows))["documents"]))
    return {"docs": statistics.fmean(whole), "docs, one window": statistics.fmean(window)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--stream", default="open1b")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--label", default=None)
    args = parser.parse_args()
    asked = questions(args.store, args.stream)
    cells: dict[str, list[dict[str, Any]]] = {}
    for _ in range(args.runs):  # a fresh server each round: its caches start empty
        server = serve.start_server(args.store, PORT, 2, args.store.parent / "serve.log")
        cpu = functools.partial(serve.server_cpu_seconds, server)
        try:
            for name, make in asked["made"].items():
                cells.setdefault(name, []).append(
                    asyncio.run(serve._load(PORT, make, 16, args.seconds, cpu)))
        finally:
            server.terminate()
            server.wait(timeout=30)
    rows = {name: {"server_cpu_ms_per_request": statistics.median(
                       c["server_cpu_ms_per_request"] for c in runs),
                   "p50_ms": statistics.median(c["p50_ms"] for c in runs),
                   "p99_ms": statistics.median(c["p99_ms"] for c in runs),
                   "errors": sum(c["errors"] for c in runs),
                   "rounds": [c["server_cpu_ms_per_request"] for c in runs]}
            for name, runs in cells.items()}
    label = args.label or f"{asked['documents'] // 1_000_000}M"
    result = {"store": str(args.store), "documents": asked["documents"],
              "steps": asked["steps"], "documents_listed": asked["listed"],
              "load": os.getloadavg(), "rows": rows}
    out = REPO / "bench" / "out" / f"served-{label}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
