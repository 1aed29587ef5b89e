"""Compressed streams as joblib writes them, inflated only as far as they are read.

`joblib.dump(..., compress=...)` writes one pickle through zlib (the default), gzip, bz2, xz or
lzma; loading inflates it and unpickles the result. `compression_of(head)` names the method
from the first bytes; `InflatingReader` hands out decompressed bytes on demand, never more
than asked for, so a reader's byte cap also caps what is inflated (a compression bomb costs
no more than its cap).
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from typing import BinaryIO, Protocol

__all__ = ["InflatingReader", "compression_of"]

_CHUNK = 64 * 1024


def compression_of(head: bytes) -> str | None:
    """ "zlib", "gzip", "bz2", "xz" or "lzma" from a stream's first four bytes, else None."""
    if head.startswith(b"\x1f\x8b\x08"):
        return "gzip"
    if head.startswith(b"BZh") and head[3:4].isdigit():
        return "bz2"
    if head.startswith(b"\xfd7zX"):
        return "xz"
    if head.startswith(b"]\x00\x00"):  # lzma "alone": properties byte 0x5d, dictionary size
        return "lzma"
    if len(head) >= 2 and head[0] == 0x78 and (head[0] * 256 + head[1]) % 31 == 0:
        return "zlib"  # RFC 1950: CMF 0x78 (deflate, 32 KiB window) and a valid FCHECK
    return None


class _Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...  # read-only on every stdlib decompressor

    def decompress(self, data: bytes, max_length: int = ...) -> bytes: ...


def _decompressor(method: str) -> _Decompressor:
    if method == "zlib":
        return zlib.decompressobj()
    if method == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if method == "bz2":
        return bz2.BZ2Decompressor()
    if method == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    return lzma.LZMADecompressor(format=lzma.FORMAT_ALONE)


class InflatingReader:
    """read(n) of the decompressed bytes; errors of damaged data propagate to the caller.

    Concatenated streams are read on, as the readers of gzip, bz2 and lzma files (and joblib's)
    do: bytes after one stream's end start the next one.
    """

    def __init__(self, raw: BinaryIO, method: str, *, prefix: bytes = b"") -> None:
        self._raw = raw
        self._method = method
        self._zlib = method in ("zlib", "gzip")  # zlib keeps unread input in unconsumed_tail
        self._decompressor = _decompressor(method)
        self._pending = prefix
        self._raw_done = False
        self._error: Exception | None = None

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            raise ValueError("InflatingReader reads bounded amounts only")
        if self._error is not None:
            raise self._error
        out: list[bytes] = []
        try:
            self._inflate(n, out)
        except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError) as exc:
            if not out:
                raise
            self._error = exc  # hand out what was inflated first; the next read raises
        return b"".join(out)

    def _inflate(self, want: int, out: list[bytes]) -> None:
        while want > 0:
            if self._decompressor.eof and not self._next_stream():
                break
            if not self._pending and self._needs_input() and not self._fill():
                raise EOFError("the compressed stream ends before its end marker")
            data = self._decompressor.decompress(self._pending, want)
            self._pending = self._decompressor.unconsumed_tail if self._zlib else b""  # type: ignore[attr-defined]
            out.append(data)
            want -= len(data)

    def _fill(self) -> bool:
        self._pending = b"" if self._raw_done else self._raw.read(_CHUNK)
        self._raw_done = not self._pending
        return bool(self._pending)

    def _next_stream(self) -> bool:
        leftover = self._pending + getattr(self._decompressor, "unused_data", b"")
        self._pending = leftover
        if not leftover and not self._fill():
            return False
        self._decompressor = _decompressor(self._method)
        return True

    def _needs_input(self) -> bool:
        if self._zlib:
            return True
        return bool(getattr(self._decompressor, "needs_input", True))
