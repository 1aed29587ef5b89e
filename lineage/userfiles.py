"""Files a user names on the command line: read without hanging, write without harm.

A leaf module (it imports only `lineage.errors`), so every layer can open what a user
gives it the same way:

- `open_regular` opens a path for reading without blocking (a FIFO would wait for a
  writer forever), checks with fstat that the open file is a regular file (a device,
  FIFO or socket is refused by the rule `not-a-regular-file`) and, where a format is
  small, that its size is under a cap (rule `too-large`); `read_regular` reads such a
  file whole and stops at the cap even if the file grows while it is read.
- `write_output` writes the file a `-o` option names: only a regular file or a new path
  (never a device, FIFO, socket or folder), through a temporary file in the target's
  folder that is fsynced and renamed over it, so a failed write leaves the old file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from lineage.errors import InputError, UsageError

NOT_REGULAR = "not-a-regular-file"
TOO_LARGE = "too-large"
_READ_CHUNK = 1 << 20


def file_kind(mode: int) -> str:
    """What a stat mode is, in words an error message can use."""
    for test, name in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "a special file"


def open_regular(path: str | os.PathLike[str], *, what: str = "file",
                 max_bytes: int | None = None, follow_links: bool = True) -> BinaryIO:
    """`path` opened for reading in binary, once it is known to be a regular file no
    larger than `max_bytes`. Raises InputError naming the path and the rule."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as exc:
        raise InputError(path, f"{what} not found") from exc
    except OSError as exc:  # a socket cannot be opened at all (ENXIO): say what it is
        kind = _kind_or_none(path)
        if kind is not None and kind != "a regular file":
            raise InputError(path, f"{NOT_REGULAR}: {kind}, not a {what}") from exc
        raise InputError(path, f"unreadable: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(path, f"{NOT_REGULAR}: {file_kind(info.st_mode)}, not a {what}")
        if max_bytes is not None and info.st_size > max_bytes:
            raise InputError(path, _too_large(info.st_size, max_bytes, what))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _kind_or_none(path: str | os.PathLike[str]) -> str | None:
    try:
        return file_kind(os.stat(path).st_mode)
    except OSError:
        return None


def read_regular(path: str | os.PathLike[str], *, what: str, max_bytes: int,
                 follow_links: bool = True) -> bytes:
    """The bytes of a small regular file, refused past `max_bytes` (also when it grows
    while being read)."""
    with open_regular(path, what=what, max_bytes=max_bytes, follow_links=follow_links) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputError(path, _too_large(len(data), max_bytes, what, grew=True))
    return data


def _too_large(size: int, limit: int, what: str, *, grew: bool = False) -> str:
    how = "grew past" if grew else f"{size:,} bytes, over"
    return f"{TOO_LARGE}: {how} the {_bytes_text(limit)} limit for a {what}"


def _bytes_text(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n:,} bytes"


def check_output_path(path: str | os.PathLike[str]) -> Path:
    """`path` if a `-o` option may write it: a new path in an existing folder, or an
    existing regular file. UsageError otherwise, before any work is done."""
    target = Path(path)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        folder = target.parent
        if not folder.is_dir():
            raise UsageError(f"{target}: cannot write: the folder {folder} does not exist") \
                from None
        return target
    except OSError as exc:
        raise UsageError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{target}: cannot write: it is {file_kind(info.st_mode)}, "
                         "not a regular file (-o takes a file path)")
    return target


def write_output(path: str | os.PathLike[str],
                 data: bytes | str | Callable[[BinaryIO], None]) -> Path:
    """Write `data` (bytes, text as UTF-8, or a function writing to a binary handle) to
    the file `path`: a temporary file beside it, fsynced, then renamed over it. A failed
    write removes the temporary file, leaves any old file as it was and raises
    UsageError naming the path and the reason."""
    target = check_output_path(path)
    temp = target.with_name(f".tmp-{os.getpid()}-{os.urandom(4).hex()}-{target.name}")
    try:
        with open(temp, "xb") as handle:
            if callable(data):
                data(handle)
            else:
                handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        check_output_path(target)  # it may have become something else meanwhile
        os.replace(temp, target)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise UsageError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_folder(target.parent)
    return target


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a folder; the rename is done
    finally:
        os.close(fd)
