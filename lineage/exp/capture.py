"""One output stream of a command: shown as it comes, hashed whole, and kept within a cap.

Every byte the command writes is handed to the callback (the terminal) and hashed (BLAKE3
and length of the whole stream). What is stored is capped by `max_log` bytes per stream:
the first half of the cap as it comes, and the last half, which is kept in a ring file on
disk (never in memory) until the stream ends. Both go, zstd-compressed, into one log file.
A stream within the cap is stored whole; a longer one is stored as its head and tail, and
its summary says how many bytes were left out between them and gives the BLAKE3 of the
bytes kept. Memory stays at one read buffer per stream whatever the command prints.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import IO, Any

import blake3

OutputCallback = Callable[[str, bytes], None]
MiB = 1 << 20
# 64 MiB a stream: a step-per-line training log of a few hundred thousand steps is kept
# whole (and shrinks several times under zstd), while a runaway command (2 GB of binary on
# stdout) costs the store and every bundle carrying the record at most 128 MiB a run.
DEFAULT_MAX_LOG = 64 * MiB
READ_SIZE = 1 << 16


class Capture:
    """One stream, read by its own thread until the last writer closes it."""

    def __init__(self, name: str, pipe: IO[bytes], on_output: OutputCallback | None,
                 log_path: Path | None, max_log: int | None) -> None:
        self.name, self.pipe, self.on_output = name, pipe, on_output
        self.hasher = blake3.blake3()
        self.size = 0
        self.log = _Log(log_path, max_log) if log_path else None
        self.thread = threading.Thread(target=self._pump, name=f"lineage-{name}", daemon=True)

    def _pump(self) -> None:
        with self.pipe:  # the thread owns it: an escaped process may hold it open long
            while chunk := os.read(self.pipe.fileno(), READ_SIZE):
                self.hasher.update(chunk)
                self.size += len(chunk)
                if self.log:
                    self.log.write(chunk)
                if self.on_output:
                    self._tell(chunk)
        if self.log:
            self.log.finish()

    def _tell(self, chunk: bytes) -> None:
        try:
            self.on_output(self.name, chunk)  # type: ignore[misc]
        except (OSError, ValueError):
            self.on_output = None  # the terminal went away: keep recording regardless

    def summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = {"blake3": "blake3:" + self.hasher.hexdigest(),
                                   "bytes": self.size}
        if self.thread.is_alive():
            summary["incomplete"] = "a process lineage could not end still holds the stream"
        elif self.log and self.log.error is None and self.log.omitted:
            summary["kept"] = self.log.kept()
        if self.log and self.log.error:
            summary["log_error"] = self.log.error
        return summary


class _Log:
    """The stored part of a stream: head as it comes, tail through a ring file."""

    def __init__(self, path: Path, max_log: int | None) -> None:
        self.path = path
        self.head_cap = None if max_log is None else max_log - max_log // 2
        self.tail_cap = 0 if max_log is None else max_log // 2
        self.head = 0  # bytes written to the log as they came
        self.ring_bytes = 0  # bytes that went past the head (the ring holds the last ones)
        self.kept_hash = blake3.blake3()
        self.error: str | None = None
        self.writer: Any = None
        self.ring: IO[bytes] | None = None
        self._guard(self._open)

    @property
    def omitted(self) -> int:
        return max(0, self.ring_bytes - self.tail_cap)

    def _open(self) -> None:
        import zstandard

        sink = open(self.path, "wb")  # noqa: SIM115 (closed with the writer)
        # level 1 keeps up with a chatty command; text still shrinks many times
        self.writer = zstandard.ZstdCompressor(level=1).stream_writer(sink)

    def write(self, chunk: bytes) -> None:
        if self.error is None:
            self._guard(lambda: self._write(chunk))

    def _write(self, chunk: bytes) -> None:
        room = len(chunk) if self.head_cap is None else max(0, self.head_cap - self.head)
        first, rest = chunk[:room], chunk[room:]
        if first:
            self.writer.write(first)
            self.kept_hash.update(first)
            self.head += len(first)
        if rest and self.tail_cap:
            if self.ring is None:  # only a stream longer than the head needs one
                self.ring = open(self.path.with_name(self.path.name + ".tail"), "w+b")  # noqa: SIM115
            self._to_ring(rest[-self.tail_cap:], self.ring_bytes + len(rest))
        self.ring_bytes += len(rest)

    def _to_ring(self, data: bytes, end: int) -> None:
        """Write `data`, the bytes just before stream offset `end` (past the head), at
        their place in the ring: offset modulo the ring's size."""
        assert self.ring is not None
        at = (end - len(data)) % self.tail_cap
        first = data[: self.tail_cap - at]
        os.pwrite(self.ring.fileno(), first, at)
        if len(data) > len(first):
            os.pwrite(self.ring.fileno(), data[len(first):], 0)

    def finish(self) -> None:
        if self.error is None:
            self._guard(self._finish)
        elif self.writer is not None:
            with suppress(OSError):
                self.writer.close()
        if self.ring is not None:
            self.ring.close()
            Path(self.ring.name).unlink(missing_ok=True)

    def _finish(self) -> None:
        import zstandard

        if self.ring is not None:
            kept = min(self.ring_bytes, self.tail_cap)
            start = (self.ring_bytes - kept) % self.tail_cap if kept else 0
            for at, length in ((start, min(kept, self.tail_cap - start)),
                               (0, kept - min(kept, self.tail_cap - start))):
                self._copy_ring(at, length)
        self.writer.flush(zstandard.FLUSH_FRAME)
        self.writer.close()  # closes the file too

    def _copy_ring(self, at: int, length: int) -> None:
        assert self.ring is not None
        while length > 0:
            piece = os.pread(self.ring.fileno(), min(length, 1 << 20), at)
            if not piece:
                raise OSError("the tail of the log was cut short")
            self.writer.write(piece)
            self.kept_hash.update(piece)
            at, length = at + len(piece), length - len(piece)

    def _guard(self, step: Callable[[], None]) -> None:
        """A failing disk stops the log, never the draining of the pipe (a full pipe
        would stall the command)."""
        try:
            step()
        except OSError as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def kept(self) -> dict[str, Any]:
        tail = min(self.ring_bytes, self.tail_cap)
        return {"head": self.head, "tail": tail, "omitted": self.omitted,
                "bytes": self.head + tail, "blake3": "blake3:" + self.kept_hash.hexdigest()}
