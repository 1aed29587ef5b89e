"""Durable, atomic file writes: temp file in the same directory, fsync, rename, fsync dir.

A crash at any point leaves either the old file or the new one, never a mix. Temporary
names carry the writer's pid so a later run can tell abandoned ones from live ones.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from lineage.errors import CommitUnknownError, StoreFullError, StoreWriteError

P = ParamSpec("P")
R = TypeVar("R")
TEMP_PREFIX = ".tmp-"
_READ_CHUNK = 1 << 20


def temp_path_for(final: Path) -> Path:
    """A temp name beside `final`, unique to this process and call."""
    # os.urandom, not `secrets`: that import costs ~2 ms of every command's start-up
    return final.with_name(f"{TEMP_PREFIX}{os.getpid()}-{os.urandom(4).hex()}-{final.name}")


def temp_owner_pid(path: Path) -> int | None:
    """The pid encoded in a temp name, or None when the name is not a temp name."""
    if not path.name.startswith(TEMP_PREFIX):
        return None
    head = path.name[len(TEMP_PREFIX) :].split("-", 1)[0]
    return int(head) if head.isdigit() else None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_abandoned_temps(folder: Path) -> list[Path]:
    """Delete temp files in `folder` whose writing process is gone."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for path in sorted(folder.iterdir()):
        pid = temp_owner_pid(path)
        if pid is not None and not pid_alive(pid):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink in `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(temp: Path, final: Path) -> None:
    """fsync `temp`, rename it over `final`, fsync the directory."""
    fsync_file(temp)
    os.replace(temp, final)
    fsync_dir(final.parent)


@contextmanager
def disk_full_guard(*cleanup: Path) -> Iterator[None]:
    """Turn a failed write into one line after removing the partial files named:
    StoreFullError for a full disk (or quota, or file size limit), StoreWriteError for
    any other error of the file system while writing (EIO, a read-only disk).

    Every write in lineage commits in one DuckDB COMMIT and nothing after the COMMIT
    raises (docs/store.md), so an error that reaches here left nothing committed. Python
    reports these as OSError; pyarrow and DuckDB as their own errors that only carry the
    system's message, so both forms are recognised.
    """
    try:
        yield
    except (StoreFullError, CommitUnknownError):
        raise
    except Exception as exc:
        kind = write_failure(exc)
        if kind is None:
            raise
        for path in cleanup:
            remove_quietly(path)
        where = getattr(exc, "filename", None) or (cleanup[0] if cleanup else "the store")
        if kind == "full":
            raise StoreFullError(
                f"disk full while writing {where}: nothing was committed; free space and re-run"
            ) from exc
        raise StoreWriteError(
            f"could not write {where} ({_reason(exc)}): nothing was committed; check the "
            "disk and re-run") from exc


def guarded_write(func: Callable[P, R]) -> Callable[P, R]:
    """`func` (a whole write: ingest, build, record) under disk_full_guard."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with disk_full_guard():
            return func(*args, **kwargs)

    return wrapper


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_FULL_TEXT = ("No space left on device", "Disk quota exceeded", "File too large")
_IO_ERRNOS = (errno.EIO, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_IO_TEXT = ("Input/output error", "Read-only file system", "fsync failed")


def write_failure(exc: BaseException) -> str | None:
    """"full" for a full disk, "io" for another failure of the file system, else None."""
    text = str(exc)
    if isinstance(exc, OSError) and exc.errno in _FULL or any(t in text for t in _FULL_TEXT):
        return "full"
    if isinstance(exc, OSError) and exc.errno in _IO_ERRNOS or any(t in text for t in _IO_TEXT):
        return "io"
    return None


def is_disk_full(exc: BaseException) -> bool:
    return write_failure(exc) == "full"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return first[:200]


def close_writers(*writers: Any) -> None:
    """Close each pyarrow ParquetWriter given (None is skipped), every one even when an
    earlier one fails; the first failure is raised after. A writer whose close failed is
    marked closed: pyarrow would otherwise try again when it is collected, and print that
    second failure as an ignored exception with its traceback."""
    failure: BaseException | None = None
    for writer in writers:
        if writer is None:
            continue
        try:
            writer.close()
        except BaseException as exc:
            failure = failure or exc
            writer.is_open = False
            handle = getattr(writer, "file_handle", None)
            if handle is not None:  # left open by the failed close: the file is abandoned
                with contextlib.suppress(OSError):
                    handle.close()
    if failure is not None:
        raise failure


@contextmanager
def parquet_writer(where: Any, schema: Any, **options: Any) -> Iterator[Any]:
    """A pyarrow ParquetWriter closed on leaving, as `close_writers` closes it. When the
    body failed, that failure is the one raised (the close's own is dropped)."""
    import pyarrow.parquet as pq

    writer = pq.ParquetWriter(where, schema, **options)
    try:
        yield writer
    except BaseException:
        with contextlib.suppress(Exception):
            close_writers(writer)
        raise
    close_writers(writer)


def remove_quietly(path: Path) -> None:
    """Remove a file or folder, ignoring what fails: it is clean-up (often after a
    commit, which must not turn into an error); what stays, `store gc` removes."""
    try:
        if path.is_dir() and not path.is_symlink():
            for child in path.iterdir():
                remove_quietly(child)
            path.rmdir()
        else:
            path.unlink()
    except OSError:
        pass


def blake3_file(path: Path) -> str:
    """Hex BLAKE3-256 of a file's bytes, memory-mapped and hashed on all cores."""
    import blake3

    hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
    hasher.update_mmap(path)
    return hasher.hexdigest()


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
