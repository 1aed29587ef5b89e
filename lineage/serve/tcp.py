"""uvicorn's HTTP/1.1 protocol on httptools (the C parser of Node's llhttp), with Nagle's
algorithm off on every connection and what is written in one turn of the loop sent at once.

httptools parses a request in C, where h11 does it in Python: measured on loopback, a
kept answer cost the server 0.21 ms of CPU with h11 and 0.10 ms with httptools and
uvloop (docs/performance.md).

uvicorn writes an answer's head and its body apart. A worker started with `--workers N`
gets its connections as bare descriptors, and asyncio sets TCP_NODELAY only on sockets it
knows to be TCP, which those are not shown to be: with Nagle's algorithm on, the body
waited for the client's ACK of the head, which a client delays up to 40 ms (measured, a
kept answer of 900 bytes took 45 ms with two workers and 0.3 ms with one). Each
connection sets the option; and the head and body of an answer, written in the same turn
of the event loop, now go out in one write (`OneWritePerTurn`).

uvicorn bounds only the wait between requests on a kept connection (5 s); a client that
connects and sends nothing, or a request's head or body a byte at a time, or never reads
its answer, would hold a connection and its task for ever. Each connection here has three
more deadlines (docs/serve.md, "Safe by default"): a request's head must arrive within
`header_seconds` of the connection or of its first byte (else 408 and the connection is
closed), its body within `body_seconds` of the head, and an answer the client stops
reading is dropped after `send_seconds` without progress.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

PROTOCOL = "lineage.serve.tcp:NoDelayHttpToolsProtocol"  # uvicorn's `http` setting
# How uvicorn runs the application, for `lineage serve` and the tests alike ("auto": uvloop
# where it is installed, which is everywhere but Windows).
UVICORN_SETTINGS: dict[str, Any] = {
    "http": PROTOCOL, "loop": "auto", "log_level": "warning", "access_log": False,
    "server_header": False, "proxy_headers": False}


HEADER_SECONDS = 10.0  # a request's head, from the connection or the request's first byte
BODY_SECONDS = 60.0  # a request's body, from its head (8 MiB at about 140 KB/s)
SEND_SECONDS = 60.0  # an answer the client does not read, from the last progress
_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
              b"connection: close\r\ncontent-length: %d\r\n\r\n%s")


class NoDelayHttpToolsProtocol(HttpToolsProtocol):
    header_seconds = HEADER_SECONDS
    body_seconds = BODY_SECONDS
    send_seconds = SEND_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._deadline: asyncio.TimerHandle | None = None
        self._send_deadline: asyncio.TimerHandle | None = None
        super().connection_made(OneWritePerTurn(transport))  # type: ignore[arg-type]
        self._arm(self.header_seconds, self._head_too_slow)  # a silent client too

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._send_deadline is not None:
            self._send_deadline.cancel()
        super().connection_lost(exc)

    # -- a request's head and body ----------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # a later request on a kept connection
            self._arm(self.header_seconds, self._head_too_slow)

    def on_headers_complete(self) -> None:
        self._arm(self.body_seconds, self._body_too_slow)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def _arm(self, seconds: float, action: Callable[[], None]) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, action)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:  # no answer under way
            body = (b'{"error": "the request\'s head did not arrive within %g s", '
                    b'"exit_code": 2}\n' % self.header_seconds)
            self.transport.write(_TIMED_OUT % (len(body), body))
        self.transport.close()

    def _body_too_slow(self) -> None:
        # The application is reading the body: closing tells it the client is gone.
        self._deadline = None
        self.transport.close()

    # -- an answer the client does not read -------------------------------------------

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_deadline is None:
            self._send_deadline = self.loop.call_later(self.send_seconds, self.transport.abort)

    def resume_writing(self) -> None:
        if self._send_deadline is not None:
            self._send_deadline.cancel()
            self._send_deadline = None
        super().resume_writing()


class OneWritePerTurn:
    """A transport that joins what is written to it in one turn of the event loop into
    one write: uvicorn writes an answer's head and its body apart, and each write to a
    socket is a system call that, on loopback, also runs the receiving side's TCP.
    Joined, a kept answer cost the server 0.015-0.02 ms less CPU under load, and its p50
    at 16 clients fell by 12-20% (docs/performance.md)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._loop = asyncio.get_running_loop()  # made by connection_made, on the loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()  # what was written goes before the close
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
