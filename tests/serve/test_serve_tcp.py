"""What the server's connections write (lineage/serve/tcp.py): an answer's head and body,
written in one turn of the event loop, go to the socket in one write, and nothing
written is lost when the connection closes."""

from __future__ import annotations

import asyncio
import socket

from lineage.serve.tcp import OneWritePerTurn


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
