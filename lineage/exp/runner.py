"""Running the command of `lineage exp run`: live output, capped logs, signals, no orphans.

The command starts in its own session (so its own process group): a Ctrl-C at the
terminal reaches lineage alone, which forwards it (and SIGTERM) to the whole group, waits
for the command to finish, and records that it was interrupted. On the way out the group
is killed, and so is every process the command started that left the group (found below
lineage, lineage.exp.processes), so nothing the command started outlives lineage; those
that had left are recorded (`escaped`). Its stdout and stderr are read as they come,
handed to a callback (the terminal), hashed and kept up to a cap (lineage.exp.capture).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import blake3

from lineage.exp.capture import DEFAULT_MAX_LOG, Capture
from lineage.exp.processes import (
    Process,
    adopting_orphans,
    children,
    descendants,
    read_process,
    reap,
    send,
)

OutputCallback = Callable[[str, bytes], None]
STREAMS = ("stdout", "stderr")
EXIT_TIMEOUT = 124  # as timeout(1)
EXIT_CANNOT_RUN, EXIT_NOT_FOUND = 126, 127  # as a shell
TERM_GRACE_S = 5.0  # after SIGTERM on a timeout, before SIGKILL
_DRAIN_S = 5.0  # how long to wait for output still held by a process lineage cannot end
_GROUP_END_S = 2.0  # for killed members to be reaped (a zombie still counts as a member)
_POLL_S = 0.02


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived while no command was running (during the checks).

    A BaseException, like KeyboardInterrupt, so no `except Exception` swallows it.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


class Interruptions:
    """What to do with SIGINT and SIGTERM at each moment of a run.

    While a command runs, they are forwarded to its process group (a second one sends
    SIGKILL); while checks run, they raise `Interrupted`; otherwise (writing the record)
    they are remembered and acted on once the record is safe.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._group: int | None = None
        self._raising = False
        self._forwarded = 0

    def handle(self, signum: int, _frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
        if self._group is not None:
            self._forwarded += 1
            kill_group(self._group, signum if self._forwarded == 1 else signal.SIGKILL)
        elif self._raising:
            raise Interrupted(signum)

    @contextmanager
    def raising(self) -> Iterator[None]:
        if self.signum is not None:
            raise Interrupted(self.signum)
        self._raising = True
        try:
            yield
        finally:
            self._raising = False

    @contextmanager
    def forwarding(self, group: int) -> Iterator[None]:
        self._group = group
        try:
            if self.signum is not None:  # arrived while the command was being started
                self._forwarded += 1
                kill_group(group, self.signum)
            yield
        finally:
            self._group = None


_active: Interruptions | None = None


@contextmanager
def interruptions() -> Iterator[Interruptions]:
    """Install the SIGINT/SIGTERM handlers for a run (re-entrant; main thread only)."""
    global _active
    if _active is not None:
        yield _active
        return
    guard = Interruptions()
    if threading.current_thread() is not threading.main_thread():
        yield guard  # signals cannot be handled here; the caller's own handling stands
        return
    previous = {sig: signal.signal(sig, guard.handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    _active = guard
    try:
        yield guard
    finally:
        _active = None
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def kill_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


def run_command(
    argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float | None = None,
    on_output: OutputCallback | None = None, logs_dir: Path | None = None,
    max_log: int | None = DEFAULT_MAX_LOG,
) -> dict[str, Any]:
    """Run `argv`; return exit code, signal, duration, a digest of each stream and the
    processes that had left its group (`escaped`), each ended by lineage.

    With `logs_dir`, each stream is also written to `<logs_dir>/<stream>.zst`, at most
    `max_log` bytes of it (None: no cap; lineage.exp.capture).
    """
    started = time.monotonic()
    with interruptions() as guard, adopting_orphans():
        before = children()
        try:
            proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:  # not found, not executable, a wrong-architecture binary
            return _not_started(argv, cwd, exc, on_output)
        assert proc.stdout is not None and proc.stderr is not None  # both are PIPE
        leftovers = Leftovers(proc.pid, before)
        captures = [Capture(name, pipe, on_output,
                            logs_dir / f"{name}.zst" if logs_dir else None, max_log)
                    for name, pipe in zip(STREAMS, (proc.stdout, proc.stderr), strict=True)]
        for capture in captures:
            capture.thread.start()
        try:
            with guard.forwarding(proc.pid):
                timed_out = _wait(proc, timeout, leftovers)
        finally:
            escaped = leftovers.end_all(proc)  # whatever the command left behind
            drained = time.monotonic() + _DRAIN_S
            for capture in captures:
                capture.thread.join(max(0.0, drained - time.monotonic()))
    code = proc.returncode
    result: dict[str, Any] = {
        "argv": argv, "cwd": str(cwd), "exit_code": code,
        "signal": signal.Signals(-code).name if code < 0 else None,
        "timed_out": timed_out, "duration_s": round(time.monotonic() - started, 3),
        "max_log": max_log, "escaped": escaped,
    }
    for capture in captures:
        result[capture.name] = capture.summary()
    return result


class Leftovers:
    """The command's process group and the processes that left it, found and ended."""

    def __init__(self, group: int, before: set[int]) -> None:
        self.group = group  # the command's pid: it leads its own session and group
        self.before = before  # this process's children from before: not the command's
        self.escaped: dict[int, Process] = {}

    def found(self) -> list[Process]:
        """The command's processes still in the table; remembers those outside its group."""
        below = descendants(exclude=self.before)
        for process in below:
            if process.group != self.group and not process.zombie:
                self.escaped.setdefault(process.pid, process)
        return below

    def signal(self, signum: int) -> None:
        kill_group(self.group, signum)
        for process in self.found():
            if process.group != self.group and not process.zombie:
                send(process, signum)

    def running(self) -> bool:
        """Whether any of them is still alive (a zombie is not; the adopted ones are
        reaped here, and the group's others are reaped by their parents)."""
        below = self.found()
        reap(below, keep=self.group)
        if any(not p.zombie for p in below):
            return True
        try:
            os.killpg(self.group, 0)  # without /proc, the group is all there is to see
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def end_all(self, proc: subprocess.Popen[bytes]) -> list[dict[str, Any]]:
        """SIGKILL the group and every process found below lineage, reap the orphans
        lineage adopted, until none is left (or _GROUP_END_S passed); what had escaped."""
        deadline = time.monotonic() + _GROUP_END_S
        while True:
            kill_group(self.group, signal.SIGKILL)
            for process in self.found():
                if not process.zombie:
                    send(process, signal.SIGKILL)
            with suppress(subprocess.TimeoutExpired):
                proc.wait(_POLL_S)
            if proc.returncode is not None and not self.running():
                break
            if time.monotonic() > deadline:
                break
        proc.wait()
        return [{"pid": p.pid, "name": p.name, "ended": not _alive(p)}
                for p in sorted(self.escaped.values(), key=lambda p: p.pid)]


def _alive(process: Process) -> bool:
    now = read_process(process.pid)
    return now is not None and now.start == process.start and not now.zombie


def _wait(proc: subprocess.Popen[bytes], timeout: float | None, leftovers: Leftovers) -> bool:
    """Wait for the command; on a timeout, SIGTERM its group and whatever left it, give
    them TERM_GRACE_S to end (SIGKILL follows in end_all). True if it timed out."""
    try:
        proc.wait(timeout)
        return False
    except subprocess.TimeoutExpired:
        leftovers.signal(signal.SIGTERM)
    deadline = time.monotonic() + TERM_GRACE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None and not leftovers.running():
            break
        time.sleep(_POLL_S)
    return True


def _not_started(argv: list[str], cwd: Path, exc: OSError,
                 on_output: OutputCallback | None) -> dict[str, Any]:
    """A command that could not start: recorded like a shell reports it (127, 126)."""
    found = isinstance(exc, FileNotFoundError) and exc.filename != str(cwd)
    reason = "command not found" if found else f"cannot run ({exc.strerror or exc})"
    message = f"lineage: {reason}: {argv[0]}\n".encode()
    if on_output:
        on_output("stderr", message)
    empty = {"blake3": "blake3:" + blake3.blake3(b"").hexdigest(), "bytes": 0}
    return {"argv": argv, "cwd": str(cwd), "exit_code": EXIT_NOT_FOUND if found
            else EXIT_CANNOT_RUN, "signal": None,
            "timed_out": False, "duration_s": 0.0, "not_started": f"{reason}: {argv[0]}",
            "escaped": [], "stdout": dict(empty), "stderr": dict(empty)}


def exit_status(code: int | None) -> int:
    """A command's exit code as a shell reports it: a signal N becomes 128 + N."""
    if code is None:
        return 0
    return 128 - code if code < 0 else code
