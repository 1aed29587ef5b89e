"""One local Ray cluster of two CPUs for the tests of `--engine ray` (about 5-20 s to
start), shared by the session and stopped at its end; `ray_stores` compares what the two
engines leave in a store."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lineage.api import open_store


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _worker_ports(size: int = 100) -> tuple[int, int]:
    """A window of ports for the cluster's workers and driver, free now and below the
    kernel's ephemeral range. Every cluster started with Ray's defaults hands its first
    driver port 10002, so two clusters on one machine (two xdist workers, or two
    checkouts testing at once) kill each other's drivers; the window starts at a place
    taken from this process's pid so that concurrent sessions probe different ones."""
    windows = (32_000 - 10_100) // size
    first = os.getpid() % windows
    for k in range(windows):
        low = 10_100 + ((first + k) % windows) * size
        if all(_is_free(port) for port in range(low, low + size)):
            return low, low + size - 1
    raise RuntimeError("no free window of ports for a Ray cluster's workers")


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`ray start --head --block --num-cpus 2` in a process of its own (its daemons'
    files and processes are its business, not this test process's), joined with
    ray.init; stopped by ending that process, which stops its daemons. Yields the
    cluster's address, for commands run in processes of their own."""
    import ray

    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    address = f"127.0.0.1:{_free_port()}"
    min_worker_port, max_worker_port = _worker_ports()
    log = (tmp_path_factory.mktemp("ray") / "head.log").open("w")
    head = subprocess.Popen(
        [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block",
         "--num-cpus", "2", "--include-dashboard", "false", "--disable-usage-stats",
         "--node-ip-address", "127.0.0.1",
         "--object-store-memory", str(256 << 20),  # a shared machine: not 30 % of its RAM
         "--port", address.rsplit(":", 1)[1],
         "--min-worker-port", str(min_worker_port), "--max-worker-port", str(max_worker_port),
         "--dashboard-agent-listen-port", str(_free_port())],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
                break
            except (ConnectionError, RuntimeError):
                if time.monotonic() > deadline or head.poll() is not None:
                    raise
                time.sleep(1)
        yield address
    finally:
        ray.shutdown()
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops its daemons on it
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        log.close()


_CATALOG = {
    "corpora": "SELECT * EXCLUDE (created_at) FROM corpora ORDER BY name",
    "corpus_sources": "SELECT * FROM corpus_sources ORDER BY ALL",
    "text_indexes": "SELECT * FROM text_indexes ORDER BY corpus",
    "streams": "SELECT * EXCLUDE (created_at) FROM streams ORDER BY name",
    "parquet_files": "SELECT * EXCLUDE (created_at) FROM parquet_files ORDER BY path",
}


def store_state(root: Path) -> dict[str, Any]:
    """Every hash and row the catalog records (times left out) and the bytes of every
    file under tables/: two stores built from the same input must agree on all of it."""
    with open_store(root).reader(views=False) as con:
        state: dict[str, Any] = {name: con.execute(sql).fetchall()
                                 for name, sql in _CATALOG.items()}
    tables = root / "tables"
    state["files"] = {str(p.relative_to(tables)): p.read_bytes()
                      for p in sorted(tables.rglob("*")) if p.is_file()}
    return state


def leftovers(root: Path) -> list[str]:
    """Files a finished or failed command left in the store's staging folder."""
    staging = root / "staging"
    return sorted(str(p.relative_to(staging)) for p in staging.rglob("*")) \
        if staging.exists() else []
