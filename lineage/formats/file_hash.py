"""Hashing files in parallel without being fooled by what a folder holds.

Two digests, both over the exact bytes of a regular file:

    sha256    what `sha256sum` prints; also the name of a Git LFS blob in a hub cache
    git-sha1  Git's blob id: SHA-1 of `b"blob <size>\\0"` followed by the bytes; the name
              a hub cache gives the blob of a file stored in Git itself (configs, tokenizers)

Each distinct file is read once, by a thread pool (large reads let hashlib release the GIL).
A file is opened without following a symbolic link and without blocking on a FIFO, and is
checked to be regular after opening, so a file swapped after it was vetted is refused. A
file smaller than a read is read in one call of one byte more than fstat says it holds: a
short read at that size is its end (a list of 300,000 small files is mostly these).
"""

from __future__ import annotations

import gc
import hashlib
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from lineage.errors import InputError

ALGORITHMS = ("sha256", "git-sha1")
_READ_CHUNK = 1 << 20
_TASKS_PER_WORKER = 16  # small enough for progress and balance, large enough to amortise

Progress = Callable[[int, int], object]
_Target = TypeVar("_Target", str, Path)  # callers with many files keep them as strings


class Refusal(Exception):
    """A rule a file (or a line) broke: the rule id and a one-line reason."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.message = message


Outcome = tuple[str, int] | Refusal  # (hex digest, bytes read), or why the file was refused


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a folder's or a list's hundreds of thousands
    of small rows are built (dicts and strings: no cycles to find), as it was after. Each
    collection walks every row made so far: on 300,000 files, 1.4 of 7.3 s."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def sha256_files(paths: list[Path], *, workers: int | None = None) -> dict[Path, str]:
    """Hex SHA-256 of each path, hashed in parallel; each distinct file is read once.

    InputError when a path is missing, not a regular file or unreadable.
    """
    real: dict[Path, Path] = {}
    for path in paths:
        real[path] = resolve_regular(path)
    digests = hash_files(sorted(set(real.values())), workers=workers)
    result: dict[Path, str] = {}
    for path, target in real.items():
        outcome = digests[target]
        if isinstance(outcome, Refusal):
            raise InputError(path, str(outcome))
        result[path] = outcome[0]
    return result


def resolve_regular(path: Path) -> Path:
    """The resolved regular file behind `path`; InputError names what else it is."""
    try:
        target = Path(path).resolve(strict=True)
        mode = target.stat().st_mode
    except FileNotFoundError:
        raise InputError(path, "missing-file: no such file") from None
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        raise InputError(path, f"unreadable-file: {reason(exc)}") from None
    if not stat.S_ISREG(mode):
        raise InputError(path, f"not-a-regular-file: {kind(mode)}")
    return target


def hash_files(
    targets: list[_Target], *, algorithm: str | Mapping[_Target, str] = "sha256",
    workers: int | None = None, progress: Progress | None = None,
) -> dict[_Target, Outcome]:
    """Digest and size per resolved path (a Path or a str); per-file failures come back as
    Refusal.

    `algorithm` is one of ALGORITHMS for every file, or a mapping path -> algorithm.
    `progress(done, total)` is called after each file.
    """
    results: dict[_Target, Outcome] = {}
    targets = list(dict.fromkeys(targets))
    if not targets:
        return results
    chosen = (lambda t: algorithm) if isinstance(algorithm, str) else algorithm.__getitem__
    count = max(1, min(workers or os.cpu_count() or 1, len(targets)))
    # Tasks of several files: a task per file costs more than hashing a small file does.
    size = max(1, len(targets) // (count * _TASKS_PER_WORKER))
    batches = [targets[i:i + size] for i in range(0, len(targets), size)]
    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(_digest_batch, batch, chosen) for batch in batches]
        for future in as_completed(futures):
            results.update(future.result())
            if progress is not None:
                progress(len(results), len(targets))
    return results


def _digest_batch(batch: list[_Target], chosen: Callable[[_Target], str]
                  ) -> dict[_Target, Outcome]:
    buffer = bytearray(_READ_CHUNK)  # one per task: zeroing 1 MiB per small file cost more
    return {target: _digest_or_refusal(target, chosen(target), buffer) for target in batch}


def _digest_or_refusal(target: str | Path, algorithm: str, buffer: bytearray) -> Outcome:
    try:
        return digest_regular_file(target, algorithm, buffer=buffer)
    except Refusal as refusal:
        return refusal
    except FileNotFoundError:  # gone since it was located: missing, not a mismatch
        return Refusal("missing-file", "no such file (removed while verifying?)")
    except OSError as exc:
        return Refusal("unreadable-file", reason(exc))


def digest_regular_file(target: str | Path, algorithm: str = "sha256", *,
                        buffer: bytearray | None = None) -> tuple[str, int]:
    """Hash a resolved path. O_NONBLOCK keeps a FIFO swapped in from hanging us, O_NOFOLLOW
    refuses a symlink swapped in after resolution, fstat confirms it is still regular.
    `buffer`: where to read (a caller hashing many files reuses one)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(target, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refusal("not-a-regular-file", kind(info.st_mode))
        digest = hashlib.sha256() if algorithm == "sha256" else hashlib.sha1(
            b"blob %d\0" % info.st_size, usedforsecurity=False)
        total = _read_all(fd, info.st_size, digest, buffer)
    finally:
        os.close(fd)
    if algorithm == "git-sha1" and total != info.st_size:  # the header promised another size
        raise Refusal("unreadable-file", f"size changed while reading ({info.st_size} -> {total})")
    return digest.hexdigest(), total


def _read_all(fd: int, size: int, digest: hashlib._Hash, buffer: bytearray | None) -> int:
    """Feed the file's bytes to `digest` up to its end; the count read."""
    total = 0
    if size < _READ_CHUNK:  # one read asking for a byte more: a short one ends the file
        data = os.read(fd, size + 1)
        digest.update(data)
        total = len(data)
        if total == size:
            return total
    if buffer is None:
        buffer = bytearray(_READ_CHUNK)
    view = memoryview(buffer)
    with open(fd, "rb", buffering=0, closefd=False) as handle:  # grown, or a large file
        while count := handle.readinto(buffer):
            digest.update(view[:count])
            total += count
    return total


def kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)
