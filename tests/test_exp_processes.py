"""`lineage exp run` leaves nothing running and keeps a bounded log: a timeout or the end
of the command ends its process group and the processes that left it (`setsid`, a
daemon's double fork), recorded as `escaped`; `--max-log` keeps each stream's head and
tail, with the whole stream's BLAKE3 and length still recorded."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import blake3
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.exp.capture import DEFAULT_MAX_LOG, _Log

from .conftest import Cli

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def _run(cli: Cli, weights: Path, *args: str, code: int = 0) -> dict[str, object]:
    result = cli("exp", "run", "--weights", str(weights), "--revision", "r", "--json", *args,
                 code=code)
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@contextlib.contextmanager
def _killed_after(pidfile: Path):  # type: ignore[no-untyped-def]
    """Whatever the test finds, the process it started is not left behind."""
    try:
        yield
    finally:
        if pidfile.exists() and pidfile.read_text().strip():
            pid = int(pidfile.read_text())
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _escaping(pidfile: Path, how: str) -> str:
    """A shell line starting `sleep 300` outside the command's group, its pid in pidfile,
    ignoring SIGTERM: by `setsid` (its parent still the command), or by a double fork
    (its parent gone at once, as a daemon does)."""
    inner = f'trap "" TERM; echo $$ > {pidfile}; exec sleep 300'
    start = f"setsid bash -c '{inner}' &" if how == "setsid" else \
        f"( setsid bash -c '{inner}' & ) ;"
    return f"{start} until [ -s {pidfile} ]; do sleep 0.02; done"


@pytest.mark.parametrize("how", ["setsid", "double-fork"])
def test_a_timeout_ends_what_left_the_group_and_records_it(
    cli: Cli, weights: Path, tmp_path: Path, how: str
) -> None:
    pidfile = tmp_path / "escaped.pid"
    with _killed_after(pidfile):
        record = _run(cli, weights, "--timeout", "1", "--", "bash", "-c",
                      _escaping(pidfile, how) + "; sleep 300", code=124)
        pid = int(pidfile.read_text())
        assert not _alive(pid)  # it ignored SIGTERM: SIGKILL after the grace period
    assert record["outcome"] == "timed-out"
    assert record["failure"]["type"] == "timeout"  # type: ignore[index]
    command = record["command"]
    assert {"pid": pid, "name": "sleep", "ended": True} in command["escaped"]  # type: ignore[index]
    assert cli.json("exp", "show", str(record["id"]))["command"]["escaped"] == \
        command["escaped"]  # type: ignore[index]
    shown = cli("exp", "show", str(record["id"])).stdout
    assert f"ended {len(command['escaped'])} process(es) that had left the command's " \
        f"group" in shown and f"sleep ({pid})" in shown  # type: ignore[index]


def test_what_a_finished_command_left_running_is_ended_and_recorded(
    cli: Cli, weights: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "daemon.pid"
    with _killed_after(pidfile):
        record = _run(cli, weights, "--", "bash", "-c",
                      _escaping(pidfile, "double-fork") + "; echo started")
        pid = int(pidfile.read_text())
        assert not _alive(pid)
    assert record["outcome"] == "passed"
    assert record["command"]["escaped"] == [  # type: ignore[index]
        {"pid": pid, "name": "sleep", "ended": True}]
    assert "incomplete" not in record["command"]["stdout"]  # type: ignore[index]


def test_processes_lineage_did_not_start_for_the_command_are_left_alone(
    store: Store, weights: Path
) -> None:
    """The Python API runs inside someone's program: its other children are its own."""
    import lineage.exp

    bystander = subprocess.Popen(["sleep", "300"])
    try:
        record = lineage.exp.run(store, ["bash", "-c", "sleep 0.1 & true"], weights=weights,
                                 revision="r", echo=False)
        assert bystander.poll() is None and record.command is not None
        assert record.command.escaped == ()
    finally:
        bystander.kill()
        bystander.wait()


def test_max_log_keeps_the_head_and_tail_and_the_whole_digest(
    cli: Cli, weights: Path, tmp_path: Path
) -> None:
    data = bytes(range(256)) * 4000  # 1,024,000 bytes
    script = "import sys; sys.stdout.buffer.write(bytes(range(256)) * 4000)"
    record = _run(cli, weights, "--name", "cut", "--max-log", "10000", "--",
                  sys.executable, "-c", script)
    stdout = record["command"]["stdout"]  # type: ignore[index]
    assert stdout["blake3"] == "blake3:" + blake3.blake3(data).hexdigest()
    assert stdout["bytes"] == len(data)
    kept = data[:5000] + data[-5000:]
    assert stdout["kept"] == {"head": 5000, "tail": 5000, "omitted": len(data) - 10000,
                              "bytes": 10000,
                              "blake3": "blake3:" + blake3.blake3(kept).hexdigest()}
    assert record["command"]["max_log"] == 10000  # type: ignore[index]
    logs = cli("exp", "logs", "cut")
    assert logs.stdout_bytes == kept
    assert f"{len(data) - 10000:,} between them left out" in logs.stderr
    # a bundle carries the cut log, checked against its own digest
    bundle = tmp_path / "cut.zip"
    cli("exp", "export", "cut", "-o", str(bundle))
    other = Cli(tmp_path / "other")
    other("init")
    assert other.json("exp", "import", str(bundle))["logs"] == 2  # stdout, empty stderr
    assert other("exp", "logs", "cut").stdout_bytes == kept


def test_a_stream_within_the_cap_is_kept_whole_and_the_default_is_64_mib(
    cli: Cli, weights: Path
) -> None:
    record = _run(cli, weights, "--name", "small", "--", "echo", "hello")
    assert record["command"]["max_log"] == DEFAULT_MAX_LOG == 64 * 2**20  # type: ignore[index]
    assert "kept" not in record["command"]["stdout"]  # type: ignore[index]
    assert cli("exp", "logs", "small").stdout == "hello\n"


@pytest.mark.parametrize(("given", "message"), [
    ("lots", "give a size such as 64MiB"), ("-1", "give a size"), ("12XB", "give a size")])
def test_a_bad_max_log_is_a_usage_error(cli: Cli, weights: Path, given: str,
                                        message: str) -> None:
    result = cli("exp", "run", "--weights", str(weights), "--revision", "r", "--max-log",
                 given, "--", "true", code=2)
    assert message in result.stderr and cli.json("exp", "list") == []


@settings(max_examples=80, deadline=None)
@given(data=st.binary(max_size=3000), cap=st.integers(0, 1200),
       cuts=st.lists(st.integers(1, 700), max_size=12))
def test_the_stored_log_is_the_stream_or_its_head_and_tail(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, cap: int, cuts: list[int]
) -> None:
    """Written in any chunks, the log holds the stream when it fits in the cap, else its
    first cap - cap // 2 and last cap // 2 bytes; `kept` counts them."""
    path = tmp_path_factory.mktemp("log") / "stdout.zst"
    log = _Log(path, cap)
    at = 0
    for size in [*cuts, len(data)]:
        log.write(data[at: at + size])
        at += size
    log.finish()
    stored = zstandard.ZstdDecompressor().stream_reader(path.read_bytes()).read()
    head, tail = cap - cap // 2, cap // 2
    if len(data) <= cap:
        assert stored == data and log.omitted == 0
    else:
        assert stored == data[:head] + (data[len(data) - tail:] if tail else b"")
        assert log.kept() == {"head": head, "tail": tail, "omitted": len(data) - cap,
                              "bytes": cap,
                              "blake3": "blake3:" + blake3.blake3(stored).hexdigest()}
    assert not list(path.parent.glob("*.tail"))  # the ring file is gone
