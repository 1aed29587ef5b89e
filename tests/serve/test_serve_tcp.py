"""What the server's connections write (lineage/serve/tcp.py): an answer's head and body,
written in one turn of the event loop, go to the socket in one write, and nothing
written is lost when the connection closes; clients that send or read too slowly, or
hang up half-way, are let go without a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lineage.serve.tcp import NoDelayHttpToolsProtocol, OneWritePerTurn

from .conftest import WAIT, LiveServer


class _Sink(asyncio.Protocol):
    def __init__(self) -> None:
        self.received = bytearray()
        self.closed = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.received += data

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set_result(None)


async def _pair() -> tuple[asyncio.Transport, list[bytes], _Sink]:
    """A real socket transport whose writes are recorded, and the protocol at its peer."""
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
    _, sink = await loop.connect_accepted_socket(_Sink, theirs)
    writes: list[bytes] = []
    real_write = transport.write

    def recorded(data: bytes) -> None:
        writes.append(bytes(data))
        real_write(data)

    transport.write = recorded  # type: ignore[method-assign]
    return transport, writes, sink  # type: ignore[return-value]


def test_writes_in_one_turn_go_out_as_one() -> None:
    async def run() -> tuple[list[bytes], bytes]:
        transport, writes, sink = await _pair()
        joined = OneWritePerTurn(transport)
        joined.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n")
        joined.write(b"hello")
        assert writes == []  # not yet: the turn is not over
        await asyncio.sleep(0)
        joined.write(b"next")
        await asyncio.sleep(0)
        joined.close()
        await sink.closed
        return writes, bytes(sink.received)

    writes, received = asyncio.run(run())
    assert writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", b"next"]
    assert received == b"".join(writes)


def test_closing_sends_what_was_written_first() -> None:
    async def run() -> tuple[list[bytes], bytes]:
        transport, writes, sink = await _pair()
        joined = OneWritePerTurn(transport)
        joined.write(b"last words")
        joined.close()
        assert joined.is_closing()  # the transport's own, passed through
        await sink.closed
        return writes, bytes(sink.received)

    assert asyncio.run(run()) == ([b"last words"], b"last words")


# -- slow and vanishing clients, on real sockets ----------------------------------------

@pytest.fixture
def quick_deadlines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deadlines short enough to reach in a test (the server's are 10 and 60 s)."""
    for name in ("header_seconds", "body_seconds", "send_seconds"):
        monkeypatch.setattr(NoDelayHttpToolsProtocol, name, 0.3, raising=False)


@pytest.fixture
def server_log() -> Iterator[list[logging.LogRecord]]:
    """What uvicorn logs (its loggers do not propagate to pytest's)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def _until_closed(raw: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    raw.settimeout(WAIT)
    received = bytearray()
    while chunk := raw.recv(65536):
        received += chunk
    return bytes(received)


@pytest.mark.usefixtures("quick_deadlines")
def test_a_client_that_sends_nothing_is_closed(demo_root: Path) -> None:
    with LiveServer(demo_root) as server, \
            socket.create_connection(("127.0.0.1", server.port)) as raw:
        reply = _until_closed(raw)
    assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b"did not arrive within 0.3 s" in reply


@pytest.mark.usefixtures("quick_deadlines")
def test_a_head_sent_too_slowly_is_refused_then_a_kept_connection_too(
        demo_root: Path) -> None:
    with LiveServer(demo_root) as server:
        with socket.create_connection(("127.0.0.1", server.port)) as raw:
            raw.sendall(b"GET /api/corpora HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            assert _until_closed(raw).startswith(b"HTTP/1.1 408 ")
        with socket.create_connection(("127.0.0.1", server.port)) as raw:
            raw.sendall(b"GET /api/corpora HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            raw.settimeout(WAIT)
            assert raw.recv(100).startswith(b"HTTP/1.1 200 ")  # then the next request:
            raw.sendall(b"GET /api/corpora HTTP/1.1\r\n")
            assert b"HTTP/1.1 408 " in _until_closed(raw)


@pytest.mark.usefixtures("quick_deadlines")
def test_a_body_sent_too_slowly_is_cut_without_a_traceback(
        demo_root: Path, server_log: list[logging.LogRecord]) -> None:
    with LiveServer(demo_root) as server:
        for path in ("/api/trained-on", "/api/sql"):
            with socket.create_connection(("127.0.0.1", server.port)) as raw:
                raw.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            "Content-Length: 1000\r\n\r\nabc".encode())
                assert _until_closed(raw) == b""
        assert httpx.get(f"{server.url}/api/corpora", timeout=WAIT).status_code == 200
    assert [r.getMessage() for r in server_log if r.levelno >= logging.WARNING] == []


@pytest.mark.usefixtures("quick_deadlines")
def test_an_answer_the_client_does_not_read_is_dropped(demo_root: Path) -> None:
    """About 20 MB of answer to a client that reads none of it: the connection is let go
    once the server's buffers are full and stay full."""
    query = "SELECT repeat('x', 2000) AS x FROM range(10000)"
    with LiveServer(demo_root) as server, socket.socket() as raw:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.connect(("127.0.0.1", server.port))
        raw.sendall(f"POST /api/sql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: "
                    f"{len(query)}\r\n\r\n{query}".encode())
        deadline = time.monotonic() + WAIT
        while not server.server.server_state.connections:  # until the server has it
            assert time.monotonic() < deadline, "the connection never arrived"
            time.sleep(0.01)
        while server.server.server_state.connections:
            assert time.monotonic() < deadline, "the connection was kept"
            time.sleep(0.05)
        received = bytearray()
        raw.settimeout(WAIT)
        with contextlib.suppress(ConnectionResetError):
            while chunk := raw.recv(65536):
                received += chunk
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    assert len(body) < length


def test_a_client_gone_mid_body_leaves_no_traceback(demo_root: Path) -> None:
    """`lineage serve` itself: clients that hang up half-way through a body, then one
    that asks properly; the server's log holds only its start-up line."""
    import signal

    from ..conftest import spawn_lineage
    from .conftest import first_answer, free_port

    port = free_port()
    server = spawn_lineage("--store", str(demo_root), "serve", "--port", str(port))
    try:
        first_answer(server, f"http://127.0.0.1:{port}/health").raise_for_status()
        for head in ("POST /api/trained-on HTTP/1.1\r\nContent-Length: 1000\r\n",
                     "POST /api/sql HTTP/1.1\r\nContent-Length: 1000\r\n",
                     "POST /api/trained-on HTTP/1.1\r\nContent-Length: 1000\r\n"
                     "Content-Type: multipart/form-data; boundary=b\r\n"):
            with socket.create_connection(("127.0.0.1", port)) as raw:
                raw.sendall(f"{head}Host: 127.0.0.1\r\n\r\n--b\r\nabc".encode())
                raw.shutdown(socket.SHUT_WR)  # all the body there will be
                _until_closed(raw)
        answer = httpx.get(f"http://127.0.0.1:{port}/api/corpora", timeout=WAIT)
        assert answer.status_code == 200
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=WAIT)
    assert stderr.splitlines() == [
        f"serving {demo_root} read-only at http://127.0.0.1:{port}/ (API under /api, "
        "/openapi.json); Ctrl-C stops"]
