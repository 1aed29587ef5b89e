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
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

PROTOCOL = "lineage.serve.tcp:NoDelayHttpToolsProtocol"  # uvicorn's `http` setting
# How uvicorn runs the application, for `lineage serve` and the tests alike ("auto": uvloop
# where it is installed, which is everywhere but Windows).
UVICORN_SETTINGS: dict[str, Any] = {
    "http": PROTOCOL, "loop": "auto", "log_level": "warning", "access_log": False,
    "server_header": False, "proxy_headers": False}


class NoDelayHttpToolsProtocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(OneWritePerTurn(transport))  # type: ignore[arg-type]


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
