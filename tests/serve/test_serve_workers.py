"""`lineage serve --workers N` (lineage/serve/workers.py): connections dealt to the
worker processes in turn, a clean stop on SIGTERM, a clear error when a worker dies or
the port is taken."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ..conftest import spawn_lineage
from .conftest import WAIT, first_answer, free_port

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


@contextmanager
def serving(root: Path, workers: int) -> Iterator[tuple[subprocess.Popen[str], int]]:
    port = free_port()
    server = spawn_lineage("--store", str(root), "serve", "--port", str(port), "--workers",
                           str(workers))
    try:
        first_answer(server, f"http://127.0.0.1:{port}/api/streams").raise_for_status()
        yield server, port
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
        server.communicate(timeout=WAIT)


def _workers(server: subprocess.Popen[str]) -> list[int]:
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text()
    return [int(pid) for pid in children.split()]


def _connections_to(port: int, pid: int) -> int:
    """Established TCP connections to `port` held by process `pid`."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                inodes.add(fields[9])
    held = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        held += target.startswith("socket:[") and target[8:-1] in inodes
    return held


def _ask(port: int) -> socket.socket:
    """A keep-alive connection that has had one answer."""
    connection = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    connection.sendall(b"GET /api/streams HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert connection.recv(65536).startswith(b"HTTP/1.1 200")
    return connection


def test_connections_are_dealt_to_the_workers_in_turn(demo_root: Path) -> None:
    with serving(demo_root, 2) as (server, port):
        workers = _workers(server)
        assert len(workers) == 2
        held = [_ask(port) for _ in range(6)]  # opened together, as a client pool does
        try:  # each answered, so each is held by the worker that answered it
            assert sorted(_connections_to(port, pid) for pid in workers) == [3, 3]
        finally:
            for connection in held:
                connection.close()


def test_sigterm_stops_the_workers_too(demo_root: Path) -> None:
    with serving(demo_root, 2) as (server, _):
        workers = _workers(server)
        server.terminate()
        assert server.wait(timeout=WAIT) == 0
        for pid in workers:
            assert not Path(f"/proc/{pid}").exists() or \
                Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_sigint_stops_a_server_started_with_it_ignored(demo_root: Path) -> None:
    """A shell starts a background job with SIGINT ignored; the server still stops on it,
    as uvicorn's own does."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "lineage.cli", "--store", str(demo_root), "serve", "--port",
         str(port), "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        first_answer(server, f"http://127.0.0.1:{port}/api/streams").raise_for_status()
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=WAIT) == 0
    finally:
        if server.poll() is None:
            server.kill()
        server.communicate(timeout=WAIT)


def test_a_worker_that_dies_stops_the_server_with_an_error(demo_root: Path) -> None:
    with serving(demo_root, 2) as (server, _):
        subprocess.run(["kill", "-KILL", str(_workers(server)[1])], check=True)
        assert server.wait(timeout=WAIT) == 2  # without a request to notice it
        stderr = server.stderr.read() if server.stderr else ""
        assert "a server worker exited (exit code -9)" in stderr
        assert "Traceback" not in stderr


def test_a_port_in_use_is_a_one_line_error(demo_root: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        server = spawn_lineage("--store", str(demo_root), "serve", "--port", str(port),
                               "--workers", "2")
        _, stderr = server.communicate(timeout=WAIT)
    assert server.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in stderr
    assert len(stderr.strip().splitlines()) == 1
