"""Bounded byte streams for the pickle scan: every read is capped and none raises.

`Source` is a forward-only stream with a per-stream cap and the scan's shared budget (it also
computes a zip member's CRC-32); `CountingFile` counts the bytes read from the file on disk.
"""

from __future__ import annotations

import zlib
from typing import IO, BinaryIO

from lineage.formats.pickle_scan.findings import Budget

_CHUNK = 64 * 1024


class Source:
    """A forward-only stream with a per-stream cap and the scan's shared budget.

    Reads never raise: a stream error ends the data and is kept in `error`; a cap ends it and
    sets `limited`, so the decoder can tell a truncated pickle from a scan limit.
    """

    def __init__(
        self,
        stream: IO[bytes],
        *,
        limit: int,
        budget: Budget,
        size: int | None = None,
        seekable: bool = False,
        crc: bool = False,
        prefix: bytes = b"",
    ) -> None:
        self._stream = stream
        self._limit = limit
        self._budget = budget
        self._size = size  # stream length when known
        self._seekable = seekable  # skip() may seek instead of reading (plain files only)
        self._buf = b""
        self._off = 0
        self._consumed = 0  # bytes taken from the stream (prefix included)
        self.pos = 0  # offset of the next unread byte
        self.eof = False
        self.limited = False
        self.error: Exception | None = None
        self.crc: int | None = 0 if crc else None
        if prefix:
            self._buf = self._account(prefix)

    def _account(self, data: bytes) -> bytes:
        self._consumed += len(data)
        self._limit -= len(data)
        self._budget.left -= len(data)
        if self.crc is not None:
            self.crc = zlib.crc32(data, self.crc)
        if self._size is not None and self._consumed >= self._size:
            self.eof = True
        return data

    def _read_raw(self, want: int) -> bytes:
        if self._size is not None and self._consumed >= self._size:
            self.eof = True  # the end of the data, even when it coincides with the cap
        if self.eof:
            return b""
        allowed = min(want, self._limit, self._budget.left)
        if allowed <= 0:
            return b""
        try:
            data = self._stream.read(allowed)
        except Exception as exc:  # a damaged member (zlib, headers) or an I/O error: data ends
            self.error = exc
            self.eof = True
            return b""
        if len(data) < allowed:
            self.eof = True
        return self._account(data)

    def _refill(self, need: int) -> bool:
        """Make `need` more bytes available; False if the stream or a cap ended first."""
        have = len(self._buf) - self._off
        # Reads grow with what is already buffered, so a long line costs linear time.
        data = self._read_raw(max(need, _CHUNK, have))
        if data:
            self._buf = self._buf[self._off :] + data
            self._off = 0
        if len(self._buf) - self._off >= have + need:
            return True
        if not self.eof:
            self.limited = True
        return False

    def read(self, n: int) -> bytes:
        """Up to n bytes; fewer only at the end of the data or a cap."""
        missing = n - (len(self._buf) - self._off)
        if missing > 0:
            self._refill(missing)
        data = self._buf[self._off : self._off + n]
        self._off += len(data)
        self.pos += len(data)
        return data

    def read_line(self) -> bytes | None:
        """The bytes up to and including the next newline, or None if the data ends first."""
        scanned = 0
        while True:
            end = self._buf.find(b"\n", self._off + scanned)
            if end >= 0:
                line = self._buf[self._off : end + 1]
                self._off = end + 1
                self.pos += len(line)
                return line
            scanned = len(self._buf) - self._off
            if not self._refill(1):
                return None

    def skip(self, n: int) -> bool:
        """Pass over n bytes without keeping them; False if the data ends first."""
        take = min(n, len(self._buf) - self._off)
        self._off += take
        self.pos += take
        n -= take
        if n > _CHUNK and self._seekable and self._size is not None:  # big values: no read
            return self._seek_forward(n)
        while n:
            data = self._read_raw(min(n, 16 * _CHUNK))
            if not data:
                if not self.eof:
                    self.limited = True
                return False
            n -= len(data)
            self.pos += len(data)
        return True

    def _seek_forward(self, n: int) -> bool:
        assert self._size is not None
        wanted = self._consumed + n  # the stream offset equals what was consumed: nothing buffered
        target = min(wanted, self._size)
        try:
            self._stream.seek(target)
        except OSError as exc:
            self.error = exc
            self.eof = True
            return False
        self.pos += target - self._consumed
        self._consumed = target
        self.eof = target >= self._size
        return target == wanted

    def at_end(self) -> bool:
        return len(self._buf) == self._off and not self._refill(1)

    def remaining(self) -> int | None:
        if self._size is None:
            return None
        return self._size - self.pos


class CountingFile:
    """A binary file that counts the bytes read through it (zipfile reads through this too)."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self.count += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def seekable(self) -> bool:
        return True
