"""Refusing input that cannot be vouched for, each refusal with a named rule.

Ingest reads files other people made. What it cannot read completely and check, it
refuses (exit 2, one line naming the file, the place and the rule) before anything is
written, instead of hanging, running out of memory, dying of SIGBUS or coercing a value:

    special-file        a FIFO, socket or device (never opened: reading one may not end)
    unreadable          a file or folder that cannot be listed or read, a dangling link
    symlink-outside     a link in a corpus folder that leads out of it (--links refuse)
    symlink-loop        a link that loops
    changed-while-read  size or mtime changed while the file was read, or fewer or more
                        bytes were read than its size (the bytes counted are the bytes
                        hashed)
    compressed-integrity  a gzip or zstd file whose checksum, length or frames fail
    value-type          a field of the wrong JSON or Parquet type (nothing is coerced)
    not-a-number        NaN or Infinity
    integer-range       an integer outside 0..2^63-1 (or a total that exceeds it)
    nesting-depth       JSON nested deeper than the step logs' limit
    line-size           a JSONL line longer than 16 MiB, the most DuckDB reads as one
                        record (its maximum_object_size): refused as soon as reading
                        passes that, so a huge line never has to fit in memory
    manifest-size       a ready manifest's n_bytes differs from the file it names
    rank-range          a window log rank that does not fit the batch

docs/manifest-spec.md lists the same rules for users.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from lineage.errors import InputError, RuleError
from lineage.formats.file_hash import kind as file_kind
from lineage.runs.chain import MAX_DEPTH

_CHUNK = 1 << 18  # per-thread read buffer for small and medium files
_BIG_CHUNK = 1 << 23  # large files: chunks big enough for BLAKE3 to use every core
_BIG_FROM = 1 << 22
_BUFFERS = threading.local()
INT64_MAX = 2**63 - 1  # counts, offsets and totals are stored as signed 64-bit integers


class IngestRuleError(RuleError):
    """Input refused by one of the rules above; nothing was written."""


def special_file_error(path: object, mode: int) -> IngestRuleError:
    return IngestRuleError(path, "special-file", f"{file_kind(mode)}, not a regular file "
                           "or folder: reading it may never end (move it out of the input)")


def stat_input(path: Path) -> os.stat_result:
    """`os.stat` of an input PATH that must be a regular file or a folder."""
    try:
        found = os.stat(path)
    except FileNotFoundError as exc:
        if os.path.islink(path):
            raise IngestRuleError(path, "unreadable", "a link whose target does not exist") \
                from exc
        raise InputError(path, "no such file or directory") from exc
    except OSError as exc:
        raise os_error(path, exc) from exc
    if not (stat.S_ISREG(found.st_mode) or stat.S_ISDIR(found.st_mode)):
        raise special_file_error(path, found.st_mode)
    return found


def os_error(path: object, exc: OSError) -> IngestRuleError:
    """The rule an OSError met while reading breaks."""
    if exc.errno == errno.ELOOP:
        return IngestRuleError(path, "symlink-loop", "a symbolic link that loops")
    return IngestRuleError(path, "unreadable", f"cannot be read ({exc.strerror or exc}); "
                           "nothing is skipped silently: fix its permissions or move it out")


def open_fd(path: str | Path, flags: int) -> int:
    """`os.open`, the one call through which input files are opened (the hostile-input
    tests replace it to make a file unreadable: they run as root, who reads any mode)."""
    return os.open(path, flags)


def read_into(fd: int, buffer: memoryview) -> int:
    """One read into `buffer` (os.readv: no file object per file, which cost ~15 % on
    64-256 KiB files); the tests replace it to change a file while it is read."""
    return os.readv(fd, [buffer])


def open_regular(path: str | Path) -> int:
    """A descriptor on a regular file, refusing special files without blocking on them:
    O_NONBLOCK makes opening a FIFO return at once, and fstat decides on what was opened
    (not on a name that may have been replaced since it was listed)."""
    try:
        fd = open_fd(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise os_error(path, exc) from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise special_file_error(path, mode)
    return fd


def _buffer(size: int) -> memoryview:
    held: dict[int, memoryview] | None = getattr(_BUFFERS, "views", None)
    if held is None:
        held = _BUFFERS.views = {}
    if size not in held:
        held[size] = memoryview(bytearray(size))
    return held[size]


def _changed(path: object, detail: str) -> IngestRuleError:
    return IngestRuleError(path, "changed-while-read", f"{detail}: the file changed while it "
                           "was read; ingest it again once nothing writes to it")


def stat_of(path: str | Path) -> os.stat_result:
    try:
        return os.stat(path)
    except OSError as exc:
        raise os_error(path, exc) from exc


def check_unchanged(path: str | Path, before: os.stat_result) -> None:
    """A file read more than once (checked, then loaded) must not change in between."""
    after = stat_of(path)
    if (before.st_size, before.st_mtime_ns, before.st_ino) != \
            (after.st_size, after.st_mtime_ns, after.st_ino):
        raise _changed(path, f"size {before.st_size} -> {after.st_size}")


def hash_regular(path: str | Path, *, keep: bool,
                 keep_big: bool = False) -> tuple[str, int, bytes | None]:
    """(BLAKE3 hex, size, the bytes when `keep`, for files of 4 MiB and more only with
    `keep_big`) of a regular file, read in chunks (no
    memory map: a file truncated meanwhile would kill the process with SIGBUS). Size and
    mtime are compared before and after, and the bytes read must be the size."""
    import blake3

    fd = open_regular(path)
    try:
        before = os.fstat(fd)
        big = before.st_size >= _BIG_FROM
        hasher = blake3.blake3(max_threads=blake3.blake3.AUTO) if big else blake3.blake3()
        kept: bytearray | None = None
        if keep and (keep_big or not big):
            kept, total = _read_whole(fd, before.st_size)
            hasher.update(kept)
        else:
            buffer, total = _buffer(_BIG_CHUNK if big else _CHUNK), 0
            while count := read_into(fd, buffer):
                hasher.update(buffer[:count])
                total += count
        after = os.fstat(fd)
    except OSError as exc:
        raise os_error(path, exc) from exc
    finally:
        os.close(fd)
    if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
        raise _changed(path, f"size {before.st_size} -> {after.st_size}")
    if total != before.st_size:
        raise _changed(path, f"read {total} bytes of {before.st_size}")
    return hasher.hexdigest(), total, bytes(kept) if kept is not None else None


def _read_whole(fd: int, size: int) -> tuple[bytearray, int]:
    """The file into one buffer of its size plus one byte (so growth shows), and the
    number of bytes read."""
    data = bytearray(size + 1)
    view, total = memoryview(data), 0
    while total <= size and (count := read_into(fd, view[total:])):
        total += count
    view.release()
    del data[total:]
    return data, total


def read_regular(path: str | Path) -> bytes:
    """The bytes of a regular file, checked like `hash_regular`."""
    return hash_regular(path, keep=True, keep_big=True)[2] or b""


def is_compressed(path: Path) -> bool:
    return path.name.lower().endswith((".gz", ".zst"))


def compressed_error(path: object, exc: Exception) -> IngestRuleError:
    return IngestRuleError(path, "compressed-integrity", f"the compressed stream fails its "
                           f"check ({exc}): the file is damaged or cut short")


# DuckDB's default maximum_object_size: the longest JSON record its read_json reads. Lines
# are refused past it before DuckDB sees them (DuckDB itself fails somewhere between one
# and two times this, by where the line falls in its buffers).
MAX_LINE_BYTES = 16 << 20


def bounded_lines(handle: BinaryIO, path: object) -> Iterator[bytes]:
    """The lines of a binary stream (LF kept), each refused (`line-size`) once it passes
    MAX_LINE_BYTES without an LF: at most that much of a line is ever held. The line
    number is `where`."""
    number = 0
    while line := handle.readline(MAX_LINE_BYTES + 1):
        number += 1
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            raise IngestRuleError(path, "line-size", f"a line longer than "
                                  f"{MAX_LINE_BYTES >> 20} MiB, the most one JSON record may "
                                  "take (split the record, or store its text in Parquet)",
                                  where=f"line {number}")
        yield line


def depth_error(path: object, where: str) -> IngestRuleError:
    return IngestRuleError(path, "nesting-depth", f"JSON nested deeper than {MAX_DEPTH} "
                           "levels", where=where)


