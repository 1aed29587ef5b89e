"""`lineage serve --workers N`: N server processes behind one port, each new connection
handed to the next of them in turn.

uvicorn's own `--workers` lets every process accept from one shared listening socket.
The process that wakes first accepts every connection waiting (asyncio and libuv accept
in a loop), so clients that connect together, as a pool of keep-alive connections
does, tend to land on one process while the others idle: measured with 16 clients on 2
cores, one worker used 8.7-10.1 s of CPU and the other 0.01-1.0 s in five runs of eight,
and answers took twice as long as with the clients shared out. Here the supervisor
accepts, and passes each connection's descriptor (SCM_RIGHTS over a Unix socket pair) to
the workers in turn; each worker is uvicorn, serving the connections it is given
(lineage/serve/worker.py).

Connections are dealt only once every worker has said it is ready (its application made,
its loop running): until then they wait in the listening socket's queue, so the first
answer a client gets means every worker answers.

Ctrl-C or SIGTERM closes the workers' channels: each then finishes the answers it has
begun and stops, and the supervisor after them. A worker that exits on its own stops the
server with an error (the worker's own is on stderr above it).
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
from types import FrameType

from lineage.errors import UsageError

STOP_SECONDS = 15  # a worker's graceful stop, before it is killed
READY = b"r"  # what a worker sends on its channel once it serves


def can_hand_over() -> bool:
    """Whether this platform can pass a connection to another process (POSIX can)."""
    return hasattr(socket, "send_fds") and os.name == "posix"


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on `host`:`port`; UsageError if the address cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(2048)
    except OSError as exc:
        listener.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return listener


def serve(listener: socket.socket, workers: int) -> None:
    """Hand the connections `listener` accepts to `workers` worker processes until
    interrupted; close it then."""
    # Both stop the server, as they stop uvicorn's own: SIGINT too, which a process
    # started in the background by a shell inherits as ignored.
    previous = {signum: signal.signal(signum, _interrupt)
                for signum in (signal.SIGINT, signal.SIGTERM)}
    started: list[tuple[subprocess.Popen[bytes], socket.socket]] = []
    try:
        started.extend(_start_worker() for _ in range(workers))
        for process, channel in started:
            _await_ready(process, channel)
        _deal(listener, started)
    except KeyboardInterrupt:
        pass
    finally:
        listener.close()
        _stop(started)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _start_worker() -> tuple[subprocess.Popen[bytes], socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "lineage.serve.worker", str(theirs.fileno())],
            pass_fds=[theirs.fileno()])
    finally:
        theirs.close()
    return process, ours


def _await_ready(process: subprocess.Popen[bytes], channel: socket.socket) -> None:
    """Wait, however long a busy machine takes, for the worker to say it serves; stop if
    it exits first (checked each second)."""
    channel.settimeout(1.0)
    try:
        while True:
            try:
                said: bytes | None = channel.recv(1)
            except TimeoutError:
                said = None
            if said == READY:
                return
            if said == b"" or process.poll() is not None:  # b"": its end is closed
                _worker_exited(process)
    finally:
        channel.settimeout(None)


def _deal(listener: socket.socket,
          started: list[tuple[subprocess.Popen[bytes], socket.socket]]) -> None:
    """Accept connections and pass each to the next worker; stop if a worker exits (it
    is noticed within a second, with or without traffic)."""
    listener.settimeout(1.0)
    turn = itertools.count()
    while True:
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            for process, _ in started:
                if process.poll() is not None:
                    _worker_exited(process)
            continue
        process, channel = started[next(turn) % len(started)]
        try:
            socket.send_fds(channel, [b"c"], [connection.fileno()])
        except OSError:
            _worker_exited(process)
        finally:
            connection.close()  # the worker holds its own copy


def _worker_exited(process: subprocess.Popen[bytes]) -> None:
    code = process.wait()
    raise UsageError(f"a server worker exited (exit code {code}); its error is above")


def _stop(started: list[tuple[subprocess.Popen[bytes], socket.socket]]) -> None:
    """Close the channels (a worker stops when its channel closes, once the answers it
    began are given) and wait; kill a worker that takes too long."""
    for _, channel in started:
        channel.close()
    for process, _ in started:
        try:
            process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
