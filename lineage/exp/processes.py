"""What a command left running, found even outside its process group, and ended.

A process can leave the command's process group on purpose (`setsid`, a daemon's double
fork): `killpg` no longer reaches it, and once its parent exits it is re-parented, so its
ancestry is lost. Without cgroups, two things keep it within reach on Linux:

- while the command runs, lineage is a *child subreaper* (prctl PR_SET_CHILD_SUBREAPER):
  an orphan below it is re-parented to lineage instead of init, so it stays a descendant;
- descendants are found by walking /proc (each process's parent is in /proc/PID/stat).

Each one found is signalled through a pidfd opened after its start time was checked
again, so a pid reused meanwhile is never signalled; lineage reaps the orphans it
adopted. Where there is no /proc or no prctl, nothing is found and the command's group is
all that is ended (docs/experiments.md says so).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")
_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


@dataclass(frozen=True)
class Process:
    """One process as /proc/PID/stat shows it."""

    pid: int
    ppid: int
    group: int
    session: int
    state: str  # R, S, D, Z, ...
    start: int  # clock ticks after boot: with the pid, names one process for good
    name: str  # the executable's name (comm), at most 15 characters

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def read_process(pid: int) -> Process | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None  # gone
    try:  # comm is in parentheses and may itself hold spaces and parentheses
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        return Process(pid=pid, ppid=int(fields[1]), group=int(fields[2]),
                       session=int(fields[3]), state=fields[0], start=int(fields[19]),
                       name=name)
    except (ValueError, IndexError):  # not the layout proc(5) documents: not one we know
        return None


def _all_processes() -> Iterator[Process]:
    try:
        entries = list(os.scandir(_PROC))
    except OSError:
        return
    for entry in entries:
        if entry.name.isdigit() and (found := read_process(int(entry.name))) is not None:
            yield found


def children() -> set[int]:
    """This process's children now (to tell them from what a command leaves behind)."""
    me = os.getpid()
    return {p.pid for p in _all_processes() if p.ppid == me}


def descendants(*, exclude: Iterable[int] = ()) -> list[Process]:
    """Every process below this one, zombies included, except the subtrees of `exclude`."""
    below: dict[int, list[Process]] = {}
    for found in _all_processes():
        below.setdefault(found.ppid, []).append(found)
    skipped, result, todo = set(exclude), [], [os.getpid()]
    while todo:
        for child in below.get(todo.pop(), []):
            if child.pid not in skipped:
                result.append(child)
                todo.append(child.pid)
    return result


def send(process: Process, signum: int) -> bool:
    """Signal `process` if it is still the same one (same pid and start time); True when
    it was signalled or is already gone, False when the system refused."""
    try:
        fd = os.pidfd_open(process.pid)
    except ProcessLookupError:
        return True
    except (OSError, AttributeError):  # no pidfd (old kernel): the start check is all
        return _send_by_pid(process, signum)
    try:
        now = read_process(process.pid)
        if now is None or now.start != process.start:
            return True  # it ended; the pid now names another process
        signal.pidfd_send_signal(fd, signum)
        return True
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    finally:
        os.close(fd)


def _send_by_pid(process: Process, signum: int) -> bool:
    now = read_process(process.pid)
    if now is None or now.start != process.start:
        return True
    try:
        os.kill(process.pid, signum)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return True


def reap(processes: Iterable[Process], *, keep: int) -> None:
    """Collect the exit status of the adopted orphans among `processes` that ended (a
    zombie stays in the table until its parent does); `keep` is the command itself,
    which its Popen object waits for."""
    me = os.getpid()
    for found in processes:
        if found.zombie and found.ppid == me and found.pid != keep:
            with suppress(ChildProcessError, OSError):
                os.waitpid(found.pid, os.WNOHANG)


@contextmanager
def adopting_orphans() -> Iterator[bool]:
    """Be a child subreaper while the block runs (Linux); yields whether it could."""
    if not sys.platform.startswith("linux"):
        yield False
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        before = ctypes.c_int(0)
        libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(before), 0, 0, 0)
        adopted = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        yield False
        return
    try:
        yield adopted
    finally:
        if adopted and not before.value:
            libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
