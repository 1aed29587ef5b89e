"""uvicorn's HTTP/1.1 protocol on httptools (the C parser of Node's llhttp), with Nagle's
algorithm off on every connection.

httptools parses a request in C, where h11 does it in Python: measured on loopback, a
kept answer cost the server 0.21 ms of CPU with h11 and 0.10 ms with httptools and
uvloop (docs/performance.md).

A uvicorn worker started with `--workers N` gets its listening socket from the supervisor
as a bare descriptor, and asyncio sets TCP_NODELAY only on sockets it knows to be TCP,
which those are not shown to be. A small answer is written as two segments (its head,
then its body); with Nagle's algorithm on, the second waits for the client's ACK of the
first, which a client delays up to 40 ms: measured, a kept answer of 900 bytes took 45 ms
with two workers and 0.3 ms with one. Setting the option on each connection ends that.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

if TYPE_CHECKING:
    import asyncio

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
        super().connection_made(transport)
