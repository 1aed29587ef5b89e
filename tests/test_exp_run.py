"""`lineage exp run` as people live with it: live and whole output, exit codes, signals,
the command's own interpreter, strict options, attempts, baselines, diff and bundles."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.errors import InputError
from lineage.exp.bundle import import_bundle
from lineage.exp.gate import run_experiment
from lineage.exp.probe import find_interpreter, probe_runtime

from .conftest import Cli, spawn_lineage, write_spec_1_bundle

SYSTEM_PYTHON = Path("/usr/bin/python3")


def _run(cli: Cli, weights: Path, *args: str, code: int | None = 0,
         revision: str = "r1") -> Any:
    return cli("exp", "run", "--weights", str(weights), "--revision", revision, *args, code=code)


def _sums(folder: Path) -> Path:
    listing = subprocess.run(["sha256sum", "model.safetensors", "config.json"], cwd=folder,
                             capture_output=True, text=True, check=True).stdout
    path = folder.parent / "SHA256SUMS"
    path.write_text(listing)
    return path


def test_output_passes_through_and_is_kept_whole(cli: Cli, weights: Path) -> None:
    script = "seq 1 5000 >&2; printf 'out\\n'; printf 'no newline'"
    result = _run(cli, weights, "--name", "seq", "--", "bash", "-c", script)
    expected_err = "".join(f"{i}\n" for i in range(1, 5001))
    assert result.stdout == "out\nno newline"  # the command's stdout, and nothing else
    assert result.stderr.startswith(expected_err)  # then lineage's summary, like time(1)
    summary = result.stderr[len(expected_err):].splitlines()
    assert summary[0].startswith("experiment exp-") and ": passed" in summary[0]
    assert "  structure: exit 0" in summary and "\\n" not in result.stderr  # real lines
    assert cli("exp", "logs", "seq", "--stderr").stdout == expected_err
    assert cli("exp", "logs", "seq").stdout == "out\nno newline"
    record = cli.json("exp", "show", "seq")
    assert record["command"]["stderr"] == {
        "blake3": "blake3:" + blake3.blake3(expected_err.encode()).hexdigest(),
        "bytes": len(expected_err)}


def test_with_json_the_command_stdout_goes_to_stderr(cli: Cli, weights: Path) -> None:
    result = _run(cli, weights, "--json", "--", "bash", "-c", "echo to-stdout; echo to-err >&2")
    record = json.loads(result.stdout)  # stdout is one JSON document
    assert record["outcome"] == "passed" and record["command"]["stdout"]["bytes"] == 10
    assert "to-stdout\n" in result.stderr and "to-err\n" in result.stderr


def test_a_damaged_log_is_refused_not_printed(cli: Cli, store: Store, weights: Path) -> None:
    record = json.loads(_run(cli, weights, "--json", "--", "echo", "hello").stdout)
    (log,) = [p for p in (store.root / "logs").iterdir()
              if p.name == record["command"]["stdout"]["blake3"].split(":")[1] + ".zst"]
    import zstandard

    log.write_bytes(zstandard.ZstdCompressor().compress(b"jello\n"))
    result = cli("exp", "logs", record["id"], code=2)
    assert result.stdout == "" and "does not match its digest" in result.stderr
    verified = cli.json("store", "verify", code=1)
    assert [p["path"] for p in verified["problems"]] == [log.relative_to(store.root).as_posix()]


@pytest.mark.parametrize(("args", "expected", "outcome", "failure"), [
    (["--", "bash", "-c", "exit 3"], 3, "command-failed", "command failed"),
    (["--", "true"], 0, "passed", None),
    (["--", "no-such-command-xyz"], 127, "command-failed", "command not found"),
    (["--", "bash", "-c", "no-such-command-xyz"], 127, "command-failed", "command not found"),
    (["--", "/"], 126, "command-failed", "cannot run"),  # a directory: not executable
    (["--timeout", "0.5", "--", "sleep", "30"], 124, "timed-out", "timeout"),
    (["--", "bash", "-c", "kill -KILL $$"], 137, "command-failed", "command failed"),
])
def test_lineage_exits_with_the_command_exit_code(
    cli: Cli, weights: Path, args: list[str], expected: int, outcome: str,
    failure: str | None
) -> None:
    record = json.loads(_run(cli, weights, "--json", *args, code=expected).stdout)
    assert record["outcome"] == outcome
    assert (record["failure"] or {}).get("type") == failure
    if failure in ("command not found", "cannot run"):  # no advice about the model
        assert "memory" not in record["failure"]["action"]
        assert "architecture" not in record["failure"]["action"] or failure == "cannot run"
    assert cli.json("exp", "show", record["id"])["outcome"] == outcome  # committed


def test_a_failed_check_exits_1_and_is_recorded(cli: Cli, weights: Path, tmp_path: Path) -> None:
    (weights / "model.safetensors").write_bytes(b"\x10\x00")
    marker = tmp_path / "ran"
    record = json.loads(_run(cli, weights, "--json", "--", "touch", str(marker), code=1).stdout)
    assert record["outcome"] == "check-failed" and record["failure"]["type"] == "short prefix"
    assert not marker.exists() and cli.json("exp", "list")[0]["id"] == record["id"]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_is_forwarded_recorded_and_leaves_no_process(
    store: Store, weights: Path, tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    pidfile = tmp_path / "pid"
    # A command that starts a background child in its group and prints as it goes.
    script = f"echo $$ > {pidfile}; sleep 300 & echo started; wait"
    proc = spawn_lineage("--store", str(store.root), "exp", "run", "--weights", str(weights),
                         "--revision", "r", "--name", "stopped", "--", "bash", "-c", script)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "started\n"  # live, while the command still runs
    group = int(pidfile.read_text())
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert _live_members(group) == []  # the command's whole process group is gone
    record = Cli(store.root).json("exp", "show", "stopped")
    assert record["outcome"] == "interrupted"
    assert record["interrupted"] == {"signal": sig.name, "during": "command"}
    assert record["command"]["stdout"]["bytes"] == len("started\n")


def _live_members(group: int) -> list[int]:
    """Processes of a group that are not zombies (reaping an orphan may take a moment)."""
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while being listed
        if int(fields[2]) == group and fields[0] != "Z":
            live.append(int(stat.parent.name))
    return live


def test_a_signal_during_the_checks_is_recorded(
    weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lineage.exp import gate

    real = gate.read_folder

    def interrupted_check(folder: Path, **options: Any) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)  # a real signal, mid-check
        return real(folder, **options)

    monkeypatch.setattr(gate, "read_folder", interrupted_check)
    # Whatever handler was in place before (another library's, in a shared test worker)
    # must be the one in place after.
    before = signal.getsignal(signal.SIGTERM)
    marker = tmp_path / "ran"
    record = run_experiment(weights=weights, revision="r", command=["touch", str(marker)])
    assert record["outcome"] == "interrupted" and record["command"] is None
    assert record["interrupted"] == {"signal": "SIGTERM", "during": "checks"}
    assert gate.exit_code(record) == 143 and not marker.exists()
    from lineage.cli.exp_render import show_lines

    shown = "\n".join(show_lines({"id": "exp-x", **record}))
    assert "interrupted by SIGTERM during the checks" in shown
    assert "command     (not run)" in shown
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored


@pytest.mark.skipif(not SYSTEM_PYTHON.is_file(), reason="needs the system's /usr/bin/python3")
def test_runtime_versions_come_from_the_command_interpreter(weights: Path, tmp_path: Path) -> None:
    truth = json.loads(subprocess.run(
        [str(SYSTEM_PYTHON), "-I", "-c", "import json, platform; from importlib import "
         "metadata; print(json.dumps([platform.python_version(), "
         "sorted(d.metadata['Name'].lower() for d in metadata.distributions())]))"],
        capture_output=True, text=True, check=True).stdout)
    record = run_experiment(weights=weights, revision="r",
                            command=[str(SYSTEM_PYTHON), "-c", "pass"])
    runtime = record["runtime"]
    assert runtime["status"] == "probed" and runtime["interpreter"] == str(SYSTEM_PYTHON)
    assert runtime["python"] == truth[0]
    assert set(runtime["packages"]) <= set(truth[1])
    assert ("onnxruntime" in runtime["packages"]) == ("onnxruntime" in truth[1])
    script = tmp_path / "train.py"
    script.write_text(f"#!{SYSTEM_PYTHON} -u\nprint('hi')\n")
    script.chmod(0o755)
    via_shebang = run_experiment(weights=weights, revision="r", command=[str(script)])
    assert via_shebang["runtime"]["python"] == truth[0]
    assert via_shebang["runtime"]["via"] == f"the shebang of {script}"


def test_a_command_that_is_not_python_is_not_probed(weights: Path) -> None:
    record = run_experiment(weights=weights, revision="r", command=["bash", "-c", "true"])
    assert record["runtime"]["status"] == "not probed" and "packages" not in record["runtime"]


def test_the_probe_looks_through_env_and_sees_pythonpath(tmp_path: Path) -> None:
    site = tmp_path / "extra-site" / "vllm-0.0.1.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.1\n")
    argv = ["env", "-u", "NOTHING", f"PYTHONPATH={site.parent}", sys.executable, "-c", "pass"]
    found = probe_runtime(argv, env=dict(os.environ), cwd=tmp_path)
    assert found["interpreter"] == sys.executable and found["packages"]["vllm"] == "0.0.1"
    plain = probe_runtime([sys.executable], env={**os.environ, "PYTHONPATH": ""}, cwd=tmp_path)
    assert "vllm" not in plain["packages"]


def test_find_interpreter(tmp_path: Path) -> None:
    env = {"PATH": os.path.dirname(sys.executable)}
    assert find_interpreter(["python", "x.py"], env=env, cwd=tmp_path)[0] == \
        os.path.join(os.path.dirname(sys.executable), "python")
    script = tmp_path / "job"
    script.write_text("#!/usr/bin/env -S python -u\n")
    assert find_interpreter(["./job"], env=env, cwd=tmp_path)[0] == \
        os.path.join(os.path.dirname(sys.executable), "python")
    script.write_text("#!/bin/sh\n")
    assert find_interpreter(["./job"], env=env, cwd=tmp_path) == (
        None, "./job is a script for /bin/sh, not Python")
    assert find_interpreter(["nope-xyz"], env=env, cwd=tmp_path)[0] is None


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_git_env_params_and_metrics_are_recorded(
    cli: Cli, weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "train.sh").write_text("echo '{\"loss\": 0.25, \"steps\": 10}' > metrics.json\n")
    _git(repo, "add", "train.sh")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "one")
    _git(repo, "remote", "add", "origin", "https://user:secret@example.com/team/repo.git")
    (repo / "train.sh").write_text((repo / "train.sh").read_text() + "# changed\n")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("MY_SETTING", "on")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    record = json.loads(_run(cli, weights, "--json", "--env", "MY_SETTING", "--param", "lr=0.1",
                             "--param", "seed=7", "--metrics", "metrics.json", "--allow-risk",
                             "python-code", "--allow-risk", "auto-map", "--", "bash",
                             "train.sh").stdout)
    assert record["allowed_risks"] == ["auto-map", "python-code"]
    assert record["git"]["commit"] == _git(repo, "rev-parse", "HEAD")
    assert record["git"]["dirty"] is True and record["git"]["changed_files"] == 1
    assert record["git"]["remote"] == "https://example.com/team/repo.git"  # no credentials
    assert record["env"]["OMP_NUM_THREADS"] == "3" and record["env"]["MY_SETTING"] == "on"
    assert record["env"]["CUDA_VISIBLE_DEVICES"] is None
    assert record["params"] == {"lr": "0.1", "seed": "7"}
    assert record["metrics"]["values"] == {"loss": 0.25, "steps": 10}
    assert record["command"]["cwd"] == str(repo)


def test_malformed_metrics_are_refused_in_a_committed_record(
    cli: Cli, weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _run(cli, weights, "--json", "--metrics", "m.json", "--", "bash", "-c",
                  "echo '[1, 2' > m.json", code=2)  # the command succeeded: exit 2
    record = json.loads(result.stdout)
    assert record["outcome"] == "passed" and record["metrics"]["refused"]
    assert record["metrics"]["rule"] == "invalid-json"
    assert f"{tmp_path / 'm.json'}: invalid-json: not valid JSON" in result.stderr
    assert cli.json("exp", "show", record["id"])["metrics"] == record["metrics"]
    assert record["git"] == "not a git repository"
    missing = json.loads(_run(cli, weights, "--json", "--metrics", "none.json", "--",
                              "true").stdout)  # not written is not refused: exit 0
    assert "did not write" in missing["metrics"]["error"]
    assert "refused" not in missing["metrics"]
    failed = _run(cli, weights, "--json", "--metrics", "m.json", "--", "false", code=1)
    assert json.loads(failed.stdout)["metrics"]["refused"]  # the command's code comes first


@pytest.mark.parametrize(("args", "message"), [
    (["--bogus-flag", "1", "echo", "hi"], "No such option"),
    (["--bogus-flag", "1", "--", "echo", "hi"], "No such option"),
    (["echo", "hi"], "unexpected extra argument"),
    (["--param", "lr", "--", "true"], "write it as KEY=VALUE"),
    (["--env", "A=1", "--", "true"], "give the name of a variable"),
    (["--timeout", "-1", "--", "true"], "-1"),
    (["--param", "a=1", "--param", "a=2", "--", "true"], "'a' is given twice"),
    ([], "give the command after `--`"),
])
def test_options_are_parsed_strictly(
    cli: Cli, weights: Path, args: list[str], message: str
) -> None:
    result = _run(cli, weights, *args, code=2)
    assert message in result.stderr
    assert cli.json("exp", "list") == []  # nothing ran, nothing recorded


def test_a_name_is_used_once_unless_it_is_a_new_attempt(cli: Cli, weights: Path) -> None:
    first = json.loads(_run(cli, weights, "--json", "--name", "eval", "--", "true").stdout)
    refused = _run(cli, weights, "--name", "eval", "--", "true", code=2)
    assert f"'eval' is taken ({first['id']}, attempt 1); pass --attempt" in refused.stderr
    second = json.loads(_run(cli, weights, "--json", "--name", "eval", "--attempt", "--",
                             "false", code=1).stdout)
    assert (first["attempt"], second["attempt"]) == (1, 2)
    listed = cli.json("exp", "list")
    assert [(r["name"], r["attempt"]) for r in listed] == [("eval", 1), ("eval", 2)]
    assert cli.json("exp", "show", "eval")["id"] == second["id"]  # the latest attempt
    assert cli.json("exp", "show", "eval#1")["id"] == first["id"]
    assert "name eval (attempt 2)" in cli("exp", "show", "eval").stdout


def test_a_revision_baseline_is_its_own(cli: Cli, weights: Path) -> None:
    sums = _sums(weights)
    first = json.loads(_run(cli, weights, "--json", "--sums", str(sums), "--", "true").stdout)
    refused = _run(cli, weights, "--sums", str(sums), "--", "true", code=2, revision="r2")
    assert "baseline of revision 'r1'" in refused.stderr and first["id"] in refused.stderr
    warned = _run(cli, weights, "--json", "--", "true", revision="r2")
    assert "recorded under revision 'r1'" in warned.stderr
    assert json.loads(warned.stdout)["warnings"][0].endswith(
        "a new revision should be new bytes")
    assert len(cli.json("exp", "list")) == 2


def test_diff_shows_every_differing_field_readably(
    cli: Cli, weights: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    a = json.loads(_run(cli, weights, "--json", "--param", "lr=0.1", "--", "bash", "-c",
                        "echo a").stdout)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    b = json.loads(_run(cli, weights, "--json", "--", "bash", "-c", "echo b; exit 2",
                        code=2).stdout)
    diff = cli.json("exp", "diff", a["id"], b["id"], code=1)
    fields = {(c["field"], c.get("key")) for c in diff["changes"]}
    assert {("command", None), ("exit_code", None), ("stdout", "blake3"), ("outcome", None),
            ("env", "OMP_NUM_THREADS"), ("params", "lr")} <= fields
    took = (a["command"]["duration_s"], b["command"]["duration_s"])
    assert (("duration_s", None) in fields) == (took[0] != took[1])  # equal to the ms: no change
    assert ("cwd", None) not in fields and ("revision", None) not in fields  # only changes
    every = cli.json("exp", "diff", a["id"], b["id"], "--all", code=1)
    assert {"field": "revision", "a": "r1", "b": "r1"} in every["unchanged"]
    text = cli("exp", "diff", a["id"], b["id"], code=1).stdout
    assert "bash -c 'echo a'" in text and "OMP_NUM_THREADS" in text
    assert not re.search(r"None|\{'|\['|True|False", text)
    shown = cli("exp", "show", b["id"]).stdout
    assert not re.search(r"None|\{'|\['|True|False", shown)


def test_bundles_carry_the_logs(cli: Cli, weights: Path, tmp_path: Path) -> None:
    record = json.loads(_run(cli, weights, "--json", "--", "bash", "-c",
                             "seq 1 300; echo oops >&2").stdout)
    bundle = tmp_path / "records.zip"
    assert cli.json("exp", "export", record["id"], "-o", str(bundle))["logs"] == 2
    elsewhere = Cli(tmp_path / "other")
    elsewhere("init")
    imported = elsewhere.json("exp", "import", str(bundle))
    assert imported["added"] == [record["id"]] and imported["logs"] == 2
    assert elsewhere("exp", "logs", record["id"]).stdout == "".join(
        f"{i}\n" for i in range(1, 301))
    assert elsewhere("exp", "logs", record["id"], "--stderr").stdout == "oops\n"
    assert elsewhere.json("exp", "import", str(bundle))["already_present"] == [record["id"]]
    assert elsewhere.json("store", "verify")["ok"]


def test_a_bundle_with_a_swapped_log_is_refused(
    cli: Cli, weights: Path, tmp_path: Path, store: Store
) -> None:
    import zstandard

    from lineage.runs.chain import blake3_hex, canonical_json

    record = json.loads(_run(cli, weights, "--json", "--", "echo", "real").stdout)
    bundle = tmp_path / "b.zip"
    cli("exp", "export", record["id"], "-o", str(bundle))
    with zipfile.ZipFile(bundle) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    name = "logs/" + record["command"]["stdout"]["blake3"].split(":")[1] + ".zst"
    members[name] = zstandard.ZstdCompressor().compress(b"fake\n")
    listed = json.loads(members.pop("MANIFEST.json"))["members"]
    listed[name] = blake3_hex(members[name])  # a consistent manifest around a wrong log
    manifest = {"spec": "lineage-experiment-bundle/2", "members": listed,
                "digest": blake3_hex(canonical_json(listed).encode())}
    tampered = tmp_path / "t.zip"
    with zipfile.ZipFile(tampered, "w") as archive:
        for member, data in {**members, "MANIFEST.json": canonical_json(manifest).encode()
                             }.items():
            archive.writestr(member, data)
    other = tmp_path / "other"
    Cli(other)("init")
    with pytest.raises(InputError, match="does not match its record"):
        import_bundle(Store(other), tampered)
    assert Cli(other).json("exp", "list") == []


def test_an_old_bundle_without_logs_still_imports(tmp_path: Path) -> None:
    from lineage.exp.records import record_id

    bundle = tmp_path / "old.zip"
    old = write_spec_1_bundle(bundle)
    cli = Cli(tmp_path / "store")
    cli("init")
    assert cli.json("exp", "import", str(bundle))["added"] == [record_id(old)]
    shown = cli("exp", "show", "old").stdout
    assert "lineage's own (recorded before probing)" in shown
    assert "recorded before lineage kept whole logs" in cli("exp", "logs", "old", code=1).stderr
    assert cli.json("exp", "diff", "old", "old")["same"]


def test_a_python_command_output_shows_at_once(store: Store, weights: Path) -> None:
    import select

    script = "import time; print('first'); time.sleep(60)"  # no flush: a pipe buffers
    proc = spawn_lineage("--store", str(store.root), "exp", "run", "--weights", str(weights),
                         "--revision", "r", "--", sys.executable, "-c", script,
                         env={"PYTHONUNBUFFERED": ""})  # empty is unset, for Python
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    assert ready and proc.stdout.readline() == "first\n"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_second_signal_kills_a_command_that_ignores_the_first(
    store: Store, weights: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    script = f"trap '' INT; echo $$ > {pidfile}; echo started; sleep 300"
    proc = spawn_lineage("--store", str(store.root), "exp", "run", "--weights", str(weights),
                         "--revision", "r", "--name", "stubborn", "--", "bash", "-c", script)
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    proc.send_signal(signal.SIGINT)  # ignored by the command: lineage keeps waiting
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=1)
    proc.send_signal(signal.SIGINT)  # the second one is SIGKILL for the group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert _live_members(int(pidfile.read_text())) == []
    record = Cli(store.root).json("exp", "show", "stubborn")
    assert record["command"]["signal"] == "SIGKILL" and record["outcome"] == "interrupted"


def test_output_held_by_a_process_out_of_reach_is_marked_incomplete(
    weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where lineage cannot find what left the group (no /proc), the stream it holds is
    marked incomplete after a while, and the run still ends."""
    monkeypatch.setattr("lineage.exp.runner._DRAIN_S", 0.5)
    monkeypatch.setattr("lineage.exp.runner.descendants", lambda exclude: [])
    pidfile = tmp_path / "escaped"
    script = (f"setsid bash -c 'echo $$ > {pidfile}; exec sleep 30' & "
              f"until [ -s {pidfile} ]; do sleep 0.05; done; echo done")
    try:
        record = run_experiment(weights=weights, revision="r", logs_dir=tmp_path,
                                command=["bash", "-c", script])
    finally:
        escaped = int(pidfile.read_text())
        os.kill(escaped, signal.SIGKILL)  # out of lineage's reach
        with contextlib.suppress(ChildProcessError):
            os.waitpid(escaped, 0)  # adopted by this process while the command ran
    assert record["outcome"] == "passed"
    assert "incomplete" in record["command"]["stdout"]
    assert record["warnings"] == [
        f"the command's {stream} is not stored (a process lineage could not end still holds "
        "the stream); its BLAKE3 and length are recorded" for stream in ("stdout", "stderr")]


def test_a_log_the_disk_refuses_is_left_out_with_a_warning(weights: Path,
                                                           tmp_path: Path) -> None:
    record = run_experiment(weights=weights, revision="r", logs_dir=tmp_path / "gone",
                            command=["echo", "hi"])
    assert record["outcome"] == "passed" and record["command"]["stdout"]["bytes"] == 3
    assert "FileNotFoundError" in record["command"]["stdout"]["log_error"]
    assert [w.split(" (")[0] for w in record["warnings"]] == [
        "the command's stdout is not stored", "the command's stderr is not stored"]


def test_gc_removes_log_files_no_record_registers(cli: Cli, store: Store, weights: Path) -> None:
    record = json.loads(_run(cli, weights, "--json", "--", "echo", "kept").stdout)
    orphan = store.root / "logs" / ("ab" * 32 + ".zst")
    orphan.write_bytes(b"left by a killed run")
    os.utime(orphan, (0, 0))
    assert cli.json("store", "verify")["unregistered"] == ["logs/" + orphan.name]
    assert cli.json("store", "gc")["removed"] == ["logs/" + orphan.name]
    assert cli("exp", "logs", record["id"]).stdout == "kept\n"


_names = st.text(alphabet="abcdefgh_", min_size=1, max_size=4)
_values = st.one_of(st.none(), st.text(alphabet="xyz019.", max_size=5))


@settings(max_examples=60, deadline=None)
@given(env_a=st.dictionaries(_names, _values), env_b=st.dictionaries(_names, _values),
       params_a=st.dictionaries(_names, _values), params_b=st.dictionaries(_names, _values))
def test_diff_lists_exactly_the_differing_facts_both_ways(
    env_a: dict[str, Any], env_b: dict[str, Any], params_a: dict[str, Any],
    params_b: dict[str, Any]
) -> None:
    from lineage.exp.compare import diff_records

    base = {"weights": {"files": []}, "host": {}, "revision": "r"}
    a, b = {**base, "env": env_a, "params": params_a}, {**base, "env": env_b, "params": params_b}
    expected = {(field, key) for field, one, two in (("env", env_a, env_b),
                                                     ("params", params_a, params_b))
                for key in set(one) | set(two) if one.get(key) != two.get(key)}
    forward, backward = diff_records(a, b), diff_records(b, a)
    assert {(c["field"], c.get("key")) for c in forward["changes"]} == expected
    assert {(c["field"], c.get("key"), c["a"], c["b"]) for c in forward["changes"]} == {
        (c["field"], c.get("key"), c["b"], c["a"]) for c in backward["changes"]}
    assert forward["same"] == (not expected) and diff_records(a, a)["same"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(alphabet="abc 019-_.:", max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(alphabet="abc", min_size=1, max_size=3), inner, max_size=3),
    max_leaves=12)


@given(_json)
def test_readable_never_prints_a_python_repr(value: Any) -> None:
    from lineage.cli.exp_render import readable

    assert not re.search(r"None|True|False|\{'|\['|\('", readable(value))


def test_the_python_api_records_like_the_cli(store: Store, weights: Path) -> None:
    from lineage.exp.gate import exit_code
    from lineage.exp.log_files import iter_log
    from lineage.exp.recorder import record_experiment

    seen: list[tuple[str, bytes]] = []
    exp_id, record = record_experiment(
        store, weights=weights, revision="r", command=["bash", "-c", "echo hi; exit 4"],
        name="api", params={"temperature": "0"},
        on_output=lambda stream, chunk: seen.append((stream, chunk)))
    assert seen == [("stdout", b"hi\n")] and exit_code(record) == 4
    assert b"".join(iter_log(store, exp_id, "stdout")) == b"hi\n"
    assert record["params"] == {"temperature": "0"} and record["attempt"] == 1


def test_a_name_taken_while_the_command_ran_becomes_the_next_attempt(
    store: Store, weights: Path
) -> None:
    from lineage.exp.recorder import record_experiment

    # The command itself records an experiment of the same name in the same store.
    inner = [sys.executable, "-m", "lineage.cli", "--store", str(store.root), "exp", "run",
             "--weights", str(weights), "--revision", "r", "--name", "race", "--", "true"]
    exp_id, record = record_experiment(store, weights=weights, revision="r", command=inner,
                                       name="race")
    assert record["command"]["exit_code"] == 0 and record["attempt"] == 2
    assert "this is attempt 2" in record["warnings"][-1]
    listed = {r["id"]: r["attempt"] for r in Cli(store.root).json("exp", "list")}
    assert sorted(listed.values()) == [1, 2] and listed[exp_id] == 2
    assert Cli(store.root).json("exp", "show", "race")["id"] == exp_id  # the highest attempt


def test_the_gate_checks_a_hub_cache_snapshot_as_verify_does(
        cli: Cli, minilm_folder: Path, tmp_path: Path) -> None:
    """The gate asks the same checksum question as `lineage verify`: a snapshot's links into
    its own blobs are vetted with a list, and without a list its blob names are the source."""
    from lineage.diligence.verify import folder_sums

    from .test_hf_cache import REVISION, blob_of, flip_byte, put_in_cache

    snapshot = put_in_cache(minilm_folder, tmp_path / "hub")
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(folder_sums(snapshot))
    listed = json.loads(_run(cli, snapshot, "--sums", str(sums), "--json", "--",
                             sys.executable, "-c", "pass", revision=REVISION).stdout)
    (checked,) = [c for c in listed["checks"] if c["name"] == "checksums"]
    assert listed["outcome"] == "passed" and checked["ok"]
    assert {f["status"] for f in checked["files"]} == {"ok"}

    blob = blob_of(snapshot, "model.safetensors")
    flip_byte(blob, blob.stat().st_size // 2)  # inside a tensor: the structure still holds
    marker = tmp_path / "ran"
    stopped = json.loads(_run(cli, snapshot, "--json", "--", "touch", str(marker),
                              code=1, revision="main").stdout)
    (checked,) = [c for c in stopped["checks"] if c["name"] == "checksums"]
    assert stopped["outcome"] == "check-failed" and not checked["ok"]
    assert stopped["failure"]["type"] == "hash mismatch"
    assert stopped["failure"]["files"] == ["model.safetensors"] and not marker.exists()
