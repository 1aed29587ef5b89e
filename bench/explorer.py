"""The explorer's pages on a large store, in process and through a real server: the
stream page's first view (its source mix is computed once per process), a document
page, and every other kind of page a person browsing the store opens first.

    .venv/bin/python bench/explorer.py --store STORE [--stream main] [--corpus c]
                                       [--runs 5] [--out bench/out/explorer.json]

In process: `source_mix` with nothing kept (medians of --runs, wall-clock and CPU
seconds), `load_document` for
documents spread over the corpus. Through the server: uvicorn serving the application
in its own process (one worker), a fresh process for each of --runs first views of the
stream page, then each page kind's median over --runs requests. The store is only read.
Load the machine had is printed with the results (os.getloadavg before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parents[1]


def median_seconds(call: Any, runs: int, *, clock: Any = time.perf_counter) -> float:
    times = []
    for _ in range(runs):
        start = clock()
        call()
        times.append(clock() - start)
    return round(statistics.median(times), 4)


def in_process(store_root: str, stream_name: str, corpus: str, doc_ids: list[str],
               runs: int) -> dict[str, float]:
    from lineage.serve.stores import snapshots_for
    from lineage.serve.web import corpus_pages, figures

    snapshots = snapshots_for(store_root)
    store = snapshots.served()
    stream = store.stream(stream_name)

    def cold_mix() -> None:
        figures._KEPT.clear()
        figures.source_mix(store, stream)

    def documents() -> None:
        for doc_id in doc_ids:
            corpus_pages.load_document(_request(corpus, doc_id), snapshots.served())

    cold_mix()  # imports and the catalog's memo, as a running server has them
    # CPU seconds of all the process's threads: what the mix costs the machine, whatever
    # else runs on it (a shared machine stretches the wall-clock figure)
    return {"source_mix_cold_s": median_seconds(cold_mix, runs),
            "source_mix_cold_cpu_s": median_seconds(cold_mix, runs, clock=time.process_time),
            "document_page_load_s": round(median_seconds(documents, runs) / len(doc_ids), 4)}


def _request(corpus: str, doc_id: str) -> Any:
    from starlette.requests import Request

    return Request({"type": "http", "method": "GET", "path": f"/corpora/{corpus}/document",
                    "path_params": {"name": corpus}, "headers": [],
                    "query_string": urlencode({"id": doc_id}).encode()})


def spread_doc_ids(store_root: str, corpus: str, count: int) -> list[str]:
    import lineage
    from lineage.serve.web.figures import corpus_documents

    store = lineage.open_store(store_root)
    total = corpus_documents(store, corpus, offset=0, limit=1)["total"]
    return [corpus_documents(store, corpus, offset=i * total // count, limit=1)
            ["documents"][0]["doc_id"] for i in range(count)]


class Server:
    """The application under uvicorn in its own process, on a free loopback port."""

    def __init__(self, store_root: str) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        env = {**os.environ, "LINEAGE_SERVE_STORE": store_root}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory", "--port", str(self.port),
             "--log-level", "warning", "lineage.serve.app:app_from_environment"], env=env)
        self.url = f"http://127.0.0.1:{self.port}"
        self._wait()

    def _wait(self) -> None:
        import httpx

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(self.url + "/openapi.json", timeout=5)
                return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("the server did not start")

    def seconds(self, path: str) -> float:
        import httpx

        start = time.perf_counter()
        response = httpx.get(self.url + path, timeout=120)
        elapsed = time.perf_counter() - start
        if response.status_code != 200:
            raise RuntimeError(f"{path} answered {response.status_code}")
        return elapsed

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def through_server(store_root: str, pages: dict[str, str], runs: int) -> dict[str, float]:
    first_views = []
    for _ in range(runs):
        server = Server(store_root)
        try:
            server.seconds("/")  # the process's imports and catalog copy, as in use
            first_views.append(server.seconds(pages["stream"]))
        finally:
            server.stop()
    results = {"stream_first_view_s": round(statistics.median(first_views), 4)}
    server = Server(store_root)
    try:
        server.seconds("/")
        for name, path in pages.items():
            server.seconds(path)  # kept answers and parsed footers, as in use
            results[f"{name}_s"] = round(statistics.median(
                server.seconds(path) for _ in range(runs)), 4)
    finally:
        server.stop()
    return results


def main() -> None:
    store_root = str(ARGS.store)
    doc_ids = spread_doc_ids(store_root, ARGS.corpus, 10)
    load_before = os.getloadavg()
    results: dict[str, Any] = {"store": store_root, "runs": ARGS.runs}
    results["in_process"] = in_process(store_root, ARGS.stream, ARGS.corpus, doc_ids,
                                       ARGS.runs)
    steps = __import__("lineage").open_store(store_root).stream(ARGS.stream).steps
    pages = {"stream": f"/streams/{ARGS.stream}", "store": "/",
             "corpus": f"/corpora/{ARGS.corpus}",
             "corpus_deep": f"/corpora/{ARGS.corpus}?offset=9000000",
             "document": f"/corpora/{ARGS.corpus}/document?" + urlencode({"id": doc_ids[5]}),
             "step": f"/streams/{ARGS.stream}/steps/{steps // 2}",
             "step_ranks": f"/streams/{ARGS.stream}/steps/{steps // 2}?world_size=8",
             "trained_on_form": "/trained-on"}
    results["server"] = through_server(store_root, pages, ARGS.runs)
    results["load_average"] = {"before": load_before, "after": os.getloadavg()}
    print(json.dumps(results, indent=2))
    ARGS.out.parent.mkdir(parents=True, exist_ok=True)
    ARGS.out.write_text(json.dumps(results, indent=2) + "\n")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--stream", default="main")
    parser.add_argument("--corpus", default="c")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "explorer.json")
    return parser.parse_args()


if __name__ == "__main__":
    ARGS = parse_args()
    main()
