"""Running the command of `lineage exp run`: live output, whole logs, signals, no orphans.

The command starts in its own session (so its own process group): a Ctrl-C at the
terminal reaches lineage alone, which forwards it (and SIGTERM) to the whole group, waits
for the command to finish, and records that it was interrupted. On the way out the group
is killed, so nothing the command started outlives lineage. Its stdout and stderr are
read as they come, handed to a callback (the terminal), hashed (BLAKE3 of the bytes as
written) and, when a folder is given, compressed with zstd into a file: memory stays at
one read buffer per stream whatever the command prints.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import blake3

OutputCallback = Callable[[str, bytes], None]
STREAMS = ("stdout", "stderr")
EXIT_TIMEOUT = 124  # as timeout(1)
EXIT_CANNOT_RUN, EXIT_NOT_FOUND = 126, 127  # as a shell
TERM_GRACE_S = 5.0  # after SIGTERM on a timeout, before SIGKILL
_READ_SIZE = 1 << 16
_DRAIN_S = 5.0  # how long to wait for output still held by an escaped process
_GROUP_END_S = 2.0  # for killed members to be reaped (a zombie still counts as a member)


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


class _Capture:
    """One output stream: to the callback as it comes, hashed, optionally compressed."""

    def __init__(self, name: str, pipe: IO[bytes], on_output: OutputCallback | None,
                 log_path: Path | None) -> None:
        self.name, self.pipe, self.on_output = name, pipe, on_output
        self.hasher = blake3.blake3()
        self.size = 0
        self.log_path = log_path
        self.log_error: str | None = None
        self.thread = threading.Thread(target=self._pump, name=f"lineage-{name}", daemon=True)

    def _pump(self) -> None:
        import zstandard

        writer = None
        if self.log_path:
            try:
                sink = open(self.log_path, "wb")  # noqa: SIM115 (closed with the writer)
            except OSError as exc:
                self.log_error = f"{type(exc).__name__}: {exc}"
            else:
                # level 1 keeps up with a chatty command; text still shrinks many times
                writer = zstandard.ZstdCompressor(level=1).stream_writer(sink)
        with self.pipe:  # the thread owns it: an escaped process may hold it open long
            while chunk := os.read(self.pipe.fileno(), _READ_SIZE):
                self.hasher.update(chunk)
                self.size += len(chunk)
                if writer:
                    writer = self._log(writer, chunk)
                if self.on_output:
                    self._tell(chunk)
        if writer:
            self._log(writer, None)

    def _log(self, writer: Any, chunk: bytes | None) -> Any:
        """Write (or, with None, finish) the log; a failing disk stops the log, never
        the draining of the pipe (a full pipe would stall the command)."""
        import zstandard

        try:
            if chunk is None:
                writer.flush(zstandard.FLUSH_FRAME)
                writer.close()  # closes the file too
            else:
                writer.write(chunk)
            return writer
        except OSError as exc:
            self.log_error = f"{type(exc).__name__}: {exc}"
            return None

    def _tell(self, chunk: bytes) -> None:
        try:
            self.on_output(self.name, chunk)  # type: ignore[misc]
        except (OSError, ValueError):
            self.on_output = None  # the terminal went away: keep recording regardless

    def summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = {"blake3": "blake3:" + self.hasher.hexdigest(),
                                   "bytes": self.size}
        if self.thread.is_alive():
            summary["incomplete"] = "a process that left the command's group holds the stream"
        if self.log_error:
            summary["log_error"] = self.log_error
        return summary


def run_command(
    argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float | None = None,
    on_output: OutputCallback | None = None, logs_dir: Path | None = None,
) -> dict[str, Any]:
    """Run `argv`; return exit code, signal, duration and a digest of each stream.

    With `logs_dir`, each stream is also written to `<logs_dir>/<stream>.zst`.
    """
    started = time.monotonic()
    with interruptions() as guard:
        try:
            proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            return _not_started(argv, cwd, exc, on_output)
        assert proc.stdout is not None and proc.stderr is not None  # both are PIPE
        captures = [_Capture(name, pipe, on_output,
                             logs_dir / f"{name}.zst" if logs_dir else None)
                    for name, pipe in zip(STREAMS, (proc.stdout, proc.stderr), strict=True)]
        for capture in captures:
            capture.thread.start()
        try:
            with guard.forwarding(proc.pid):
                timed_out = _wait(proc, timeout)
        finally:
            kill_group(proc.pid, signal.SIGKILL)  # whatever the command left behind
            proc.wait()
            _await_group_end(proc.pid)
            for capture in captures:
                capture.thread.join(_DRAIN_S)
    code = proc.returncode
    result: dict[str, Any] = {
        "argv": argv, "cwd": str(cwd), "exit_code": code,
        "signal": signal.Signals(-code).name if code < 0 else None,
        "timed_out": timed_out, "duration_s": round(time.monotonic() - started, 3),
    }
    for capture in captures:
        result[capture.name] = capture.summary()
    return result


def _await_group_end(group: int) -> None:
    """Give the killed members a moment to go, so none is left when lineage exits."""
    deadline = time.monotonic() + _GROUP_END_S
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.01)


def _wait(proc: subprocess.Popen[bytes], timeout: float | None) -> bool:
    """Wait for the command; on a timeout, SIGTERM its group, then SIGKILL. True if it
    timed out."""
    try:
        proc.wait(timeout)
        return False
    except subprocess.TimeoutExpired:
        kill_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
    return True


def _not_started(argv: list[str], cwd: Path, exc: OSError,
                 on_output: OutputCallback | None) -> dict[str, Any]:
    """A command that could not start: recorded like a shell reports it (127, 126)."""
    found = isinstance(exc, FileNotFoundError)
    reason = "command not found" if found else f"cannot run ({exc.strerror})"
    message = f"lineage: {reason}: {argv[0]}\n".encode()
    if on_output:
        on_output("stderr", message)
    empty = {"blake3": "blake3:" + blake3.blake3(b"").hexdigest(), "bytes": 0}
    return {"argv": argv, "cwd": str(cwd), "exit_code": EXIT_NOT_FOUND if found
            else EXIT_CANNOT_RUN, "signal": None,
            "timed_out": False, "duration_s": 0.0, "not_started": f"{reason}: {argv[0]}",
            "stdout": dict(empty), "stderr": dict(empty)}


def exit_status(code: int | None) -> int:
    """A command's exit code as a shell reports it: a signal N becomes 128 + N."""
    if code is None:
        return 0
    return 128 - code if code < 0 else code
