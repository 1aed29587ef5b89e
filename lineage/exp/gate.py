"""`lineage exp run`: checks in front of an experiment, the command, and its record.

Checks run in order, and the first failure stops the gate: the structure of the weights
(the folder model `lineage verify` and `inspect` use), the risks (no dangerous or unknown
finding unless its kind is allowed with `allow_risks`), then the checksums against a
trusted list, then the command (lineage.exp.runner runs it).
Whatever the outcome, interrupted runs included, the record keeps what ran, where, on
which files, with which exit codes, on which machine, with which interpreter and runtime
versions, and what the command reported (first load, output digest, providers requested
and obtained, metrics), so the next machine can be compared with this one.
"""

from __future__ import annotations

import hashlib
import os
import signal
import tempfile
from pathlib import Path
from typing import Any

from lineage.diligence.risks import NOT_OK, check_risk_kinds, folder_risks, risk_verdict
from lineage.diligence.verify import checksums_verdict
from lineage.errors import EXIT_ERROR, UsageError
from lineage.exp.capture import DEFAULT_MAX_LOG
from lineage.exp.facts import env_facts, git_facts, host_facts, lineage_version
from lineage.exp.metrics import JSONL_SUFFIXES, read_metrics, read_report
from lineage.exp.probe import probe_runtime
from lineage.exp.providers import METRICS_ENV, REPORT_ENV
from lineage.exp.runner import (
    EXIT_CANNOT_RUN,
    EXIT_NOT_FOUND,
    EXIT_TIMEOUT,
    Interrupted,
    OutputCallback,
    exit_status,
    interruptions,
    run_command,
)
from lineage.exp.weights import (
    check_revision,
    describe_snapshot,
    file_checksums,
    weights_files,
    weights_path,
)
from lineage.formats.folder import FolderModel, failure_type, read_folder
from lineage.formats.hf_cache import find_snapshot
from lineage.formats.safetensors import DEFAULT_MAX_HEADER_BYTES
from lineage.runs.chain import blake3_hex, canonical_json
from lineage.userfiles import read_regular

EXPERIMENT_SPEC = "lineage-experiment/3"
MAX_SUMS_BYTES = 64 * 2**20  # a checksum list of about 500,000 files, kept in the record
# Failure type -> outcome, for the failures of a command that ran (or could not start).
_COMMAND_FAILURES = {"command failed": "command-failed", "provider fallback": "command-failed",
                     "command not found": "command-failed", "cannot run": "command-failed",
                     "timeout": "timed-out"}

def run_experiment(
    *,
    weights: str | Path,
    revision: str,
    command: list[str],
    sums: str | Path | None = None,
    quantization: str | None = None,
    source: str | None = None,
    name: str | None = None,
    allow_fallback: bool = False,
    timeout: float | None = None,
    allow_risks: tuple[str, ...] = (),
    attempt: int | None = None,
    cwd: str | Path | None = None,
    env_names: tuple[str, ...] = (),
    params: dict[str, str] | None = None,
    metrics: str | Path | None = None,
    on_output: OutputCallback | None = None,
    logs_dir: Path | None = None,
    revision_override: bool = False,
    max_log: int | None = DEFAULT_MAX_LOG,
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
) -> dict[str, Any]:
    """Run the gate and the command; return the record (not yet stored).

    The command's output goes to `on_output(stream, bytes)` as it comes and, with
    `logs_dir`, to `<logs_dir>/stdout.zst` and `stderr.zst` (at most `max_log` bytes of
    each, its head and tail; None: whole). SIGINT and SIGTERM stop the run and are
    recorded (`outcome` "interrupted"); `exit_code(record)` says what lineage should exit
    with. Bad input raises before anything runs: weights that are neither a folder nor a
    regular file, a checksum list that is not a small regular file, a `revision` that does
    not name the cache snapshot given as weights (unless `revision_override`).
    """
    if not command:
        raise UsageError("give the command to run after `--`")
    target = weights_path(weights)
    allowed = tuple(check_risk_kinds(allow_risks))
    workdir = Path(cwd).resolve() if cwd else Path.cwd()
    env = {**os.environ, "LINEAGE_EXP_WEIGHTS": str(target)}
    # A Python command writing to a pipe holds its output back in a block buffer:
    # unbuffered, it shows as it comes.
    env["PYTHONUNBUFFERED"] = env.get("PYTHONUNBUFFERED") or "1"
    if metrics is not None and Path(metrics).suffix.lower() in JSONL_SUFFIXES:
        env[METRICS_ENV] = str(workdir / metrics)  # for providers.log_metric
    record = _new_record(revision=revision, name=name, attempt=attempt, target=target,
                         quantization=quantization, source=source, params=params or {},
                         allow_fallback=allow_fallback, allow_risks=allowed,
                         env=env_facts(env_names, env), revision_override=revision_override)
    _given_inputs(record, target, sums)
    with interruptions() as guard:
        try:
            with guard.raising():
                record["git"] = git_facts(workdir)
                record["runtime"] = probe_runtime(command, env=env, cwd=workdir)
                stopped = _gate_checks(record, target, sums, allowed, max_header_bytes)
        except Interrupted as exc:
            return _interrupted(record, exc.signum, "checks")
        if stopped is not None:
            return stopped
        _run(record, command, env, workdir, timeout, on_output, logs_dir, max_log)
        record["warnings"] += _unkept_logs(record["command"])
        if metrics is not None:
            _read_metrics(record, workdir / metrics)
        if guard.signum is not None:
            return _interrupted(record, guard.signum, "command")
    return _judge_command(record, allow_fallback)


def _given_inputs(record: dict[str, Any], target: Path, sums: str | Path | None) -> None:
    """The snapshot the weights are (its revision must be the one given: InputError
    otherwise, unless overridden) and the checksum list, read once, before anything runs."""
    snapshot = find_snapshot(target)
    mismatch = check_revision(snapshot, record["revision"],
                              override=record["revision_override"])
    record["weights"]["snapshot"] = describe_snapshot(snapshot)
    record["warnings"] += [mismatch] if mismatch else []
    if sums is not None:
        text = read_regular(sums, what="checksum list", max_bytes=MAX_SUMS_BYTES)
        record["sums"] = {"path": str(Path(sums).resolve()),
                          "sha256": hashlib.sha256(text).hexdigest(),
                          "text": text.decode("utf-8", errors="replace")}


def _read_metrics(record: dict[str, Any], path: Path) -> None:
    record["metrics"] = read_metrics(path)
    if record["metrics"].get("refused"):
        record["warnings"].append(f"{record['metrics']['error']} (the metrics are recorded "
                                  "as refused)")


def _new_record(*, revision: str, name: str | None, attempt: int | None, target: Path,
                quantization: str | None, source: str | None, params: dict[str, str],
                allow_fallback: bool, allow_risks: tuple[str, ...], env: dict[str, Any],
                revision_override: bool) -> dict[str, Any]:
    """A record before anything was checked or run (spec 3; docs/experiments.md)."""
    return {
        "spec": EXPERIMENT_SPEC, "name": name, "attempt": attempt, "created_at": _now(),
        "revision": revision, "revision_override": revision_override,
        "quantization": quantization, "source": source,
        "allow_fallback": allow_fallback, "allowed_risks": sorted(set(allow_risks)),
        "weights": {"path": _weights_path(target), "files": [], "digest": None,
                    "snapshot": None},
        "sums": None, "checks": [], "failure": None, "command": None, "report": {},
        "params": dict(sorted(params.items())), "metrics": None, "env": env, "git": None,
        "host": host_facts(), "runtime": None, "lineage": lineage_version(),
        "interrupted": None, "outcome": "passed", "warnings": [],
    }


def _unkept_logs(command: dict[str, Any]) -> list[str]:
    """A stream the store could not keep: its digest is recorded, its bytes are not."""
    found = []
    for stream in ("stdout", "stderr"):
        summary = command.get(stream) or {}
        why = summary.get("log_error") or summary.get("incomplete")
        if why:
            found.append(f"the command's {stream} is not stored ({why}); its BLAKE3 and "
                         "length are recorded")
    return found


def _weights_path(target: Path) -> str:
    """A folder as its real path; a file by its own name (resolving a cache snapshot's
    link would name its blob)."""
    return str(target.resolve() if target.is_dir() else Path(os.path.abspath(target)))


def _gate_checks(record: dict[str, Any], target: Path, sums: str | Path | None,
                 allowed: tuple[str, ...], max_header_bytes: int) -> dict[str, Any] | None:
    """The checks in front of the command, then the files they were made on (hashed
    once: a digest a checksum check computed is reused); the stopped record, or None
    when all passed."""
    model = read_folder(target, max_header_bytes=max_header_bytes)
    stopped = _checks(record, target, model, sums, allowed)
    record["weights"]["files"] = weights_files(target, model, known=_checked(record))
    record["weights"]["digest"] = weights_digest(record["weights"]["files"])
    return stopped


def _checked(record: dict[str, Any]) -> dict[str, str]:
    """SHA-256 digests the checksums check computed, by path."""
    rows = [row for check in record["checks"] if check["name"] == "checksums"
            for row in check["files"]]
    return {r["path"]: r["actual"] for r in rows
            if r.get("actual") and r.get("algorithm", "sha256") in (None, "sha256")}


def _checks(record: dict[str, Any], target: Path, model: FolderModel,
            sums: str | Path | None, allowed: tuple[str, ...]) -> dict[str, Any] | None:
    structure = model.structure
    record["checks"].append({"name": "structure", "exit_code": 0 if structure["ok"] else 1,
                             "ok": structure["ok"], "errors": structure["errors"],
                             "warnings": structure["warnings"]})
    if not structure["ok"]:
        return _stop(record, _structure_failure(structure["errors"]))
    risks = risk_verdict(folder_risks(model), allow=allowed)
    record["checks"].append({"name": "risks", "exit_code": 0 if risks["ok"] else 1, **risks})
    if not risks["ok"]:
        return _stop(record, _risk_failure(risks))
    failure = _checksums(record, target, model, Path(sums) if sums is not None else None)
    return _stop(record, failure) if failure else None


def _judge_command(record: dict[str, Any], allow_fallback: bool) -> dict[str, Any]:
    command = record["command"]
    if command.get("timed_out"):
        return _stop(record, {"type": "timeout", "files": [],
                              "action": "the command ran out of its --timeout; its process "
                              "group, and what had left it, were stopped"})
    if command["exit_code"] == EXIT_NOT_FOUND:
        return _stop(record, {"type": "command not found", "files": [], "action": (
            command.get("not_started") or "exit 127: the shell did not find a command it was "
            "asked to run") + "; check the command's spelling, the PATH it runs with and the "
            "working directory (the checks passed; the weights are not in question)"})
    if command["exit_code"] == EXIT_CANNOT_RUN:
        return _stop(record, {"type": "cannot run", "files": [], "action": (
            command.get("not_started") or "exit 126: a command was found but could not be "
            "executed") + "; check its permissions (chmod +x), that it is a program and not "
            "a folder, and that it is built for this machine's architecture"})
    if command["exit_code"] != 0:
        return _stop(record, {"type": "command failed", "files": [],
                              "action": "the checks passed: now look at architecture, "
                              "quantization, runtime versions and memory pressure"})
    providers = record["report"].get("providers")
    if providers and providers.get("fallback") and not allow_fallback:
        return _stop(record, {"type": "provider fallback", "files": [],
                              "action": f"requested {providers['missing']} but the session "
                              f"ran on {providers['obtained']}; install the right runtime, "
                              "or pass --allow-fallback"})
    return record


def _interrupted(record: dict[str, Any], signum: int, during: str) -> dict[str, Any]:
    record["interrupted"] = {"signal": signal.Signals(signum).name, "during": during}
    record["outcome"] = "interrupted"
    return record


def exit_code(record: dict[str, Any]) -> int:
    """What `lineage exp run` exits with: 128 + signal when interrupted, 1 when a check
    stopped the gate, 124 on a timeout, else the command's own exit code (128 + N when a
    signal N ended it; 1 for a provider fallback the command itself did not fail on; 2
    when it succeeded but its metrics file was refused)."""
    if record.get("interrupted"):
        return 128 + signal.Signals[record["interrupted"]["signal"]].value
    if record["outcome"] == "check-failed" or not record.get("command"):
        return 1 if record["outcome"] != "passed" else 0
    if record["command"].get("timed_out"):
        return EXIT_TIMEOUT
    code = exit_status(record["command"]["exit_code"])
    if code != 0:
        return code
    if record["outcome"] != "passed":
        return 1
    return EXIT_ERROR if (record.get("metrics") or {}).get("refused") else 0


def _stop(record: dict[str, Any], failure: dict[str, Any]) -> dict[str, Any]:
    record["failure"] = failure
    record["outcome"] = _COMMAND_FAILURES.get(failure["type"], "check-failed")
    return record


def _structure_failure(errors: list[dict[str, str]]) -> dict[str, Any]:
    first = errors[0]
    kind = failure_type(first["rule"])[0]
    files = sorted({e["file"] for e in errors if failure_type(e["rule"])[0] == kind})
    return {"type": kind, "action": first["action"], "files": files, "rule": first["rule"]}


def _risk_failure(risks: dict[str, Any]) -> dict[str, Any]:
    blocking = [f for f in risks["findings"]
                if f["severity"] in NOT_OK and f["kind"] not in risks["allowed"]]
    dangerous = [f for f in blocking if f["severity"] == "dangerous"]
    shown = dangerous or blocking
    kinds = sorted({f["kind"] for f in shown})
    return {"type": "dangerous risk" if dangerous else "unknown risk", "rule": kinds[0],
            "files": sorted({f["file"] for f in shown}),
            "action": f"do not open these files; {shown[0]['detail']}. Review them, or accept "
                      f"the kind by name: --allow-risk {' --allow-risk '.join(kinds)}"}


def _checksums(record: dict[str, Any], target: Path, model: FolderModel,
               sums: Path | None) -> dict[str, Any] | None:
    """The checksum verdict `lineage verify` gives (a list, else a cache snapshot's blob
    names), recorded as a check; nothing is recorded when there is no trusted source.
    One file is checked alone (lineage.exp.weights.file_checksums)."""
    if target.is_dir():
        verdict = checksums_verdict(target, sums, snapshot=model.snapshot)
    else:
        verdict = file_checksums(target, model, sums)
    if verdict["ok"] is None:
        return None
    record["checks"].append({"name": "checksums", "exit_code": 0 if verdict["ok"] else 1,
                             "ok": verdict["ok"], "files": verdict["files"]})
    return None if verdict["ok"] else _checksum_failure(verdict["files"])


# Checksum statuses -> (failure type, the action it calls for). A missing file is never
# called a mismatch: one needs a fetch, the other a re-fetch and a look at the source.
_CHECKSUM_FAILURES = {
    "mismatch": ("hash mismatch", "re-fetch only these files, and make sure a resumed "
                 "download did not splice two revisions"),
    "missing": ("files missing", "the transfer is incomplete: fetch the missing files"),
    "refused": ("files refused", "a listed name is not a regular file inside the folder "
                "(a link leaving it, a FIFO, a folder): replace it with the real file"),
}


def _checksum_failure(files: list[dict[str, Any]]) -> dict[str, Any]:
    """One failure naming each bad file under its own status, worst first."""
    by_status = {status: [f["path"] for f in files if f["status"] == status]
                 for status in _CHECKSUM_FAILURES}
    found = [status for status, paths in by_status.items() if paths]
    if not found:  # an empty list or a bad list: nothing was compared
        return {"type": "no checksums", "files": [], "by_status": {},
                "action": "the list names no file that could be checked"}
    return {"type": " and ".join(_CHECKSUM_FAILURES[s][0] for s in found),
            "files": [path for s in found for path in by_status[s]],
            "by_status": {s: by_status[s] for s in found},
            "action": "; ".join(_CHECKSUM_FAILURES[s][1] for s in found)}


def _run(record: dict[str, Any], command: list[str], env: dict[str, str], workdir: Path,
         timeout: float | None, on_output: OutputCallback | None, logs_dir: Path | None,
         max_log: int | None) -> None:
    """Run the command with a report file of its own; keep what it did and reported."""
    with tempfile.TemporaryDirectory(prefix="lineage-exp-") as scratch:
        report_path = Path(scratch) / "report.json"
        record["command"] = run_command(command, env={**env, REPORT_ENV: str(report_path)},
                                        cwd=workdir, timeout=timeout, on_output=on_output,
                                        logs_dir=logs_dir, max_log=max_log)
        if os.path.lexists(report_path):
            record["report"] = read_report(report_path)


def weights_digest(files: list[dict[str, Any]]) -> str:
    """The identity of a folder's bytes: BLAKE3 of its sorted (path, SHA-256) list."""
    listed = [[f["path"], f["sha256"]] for f in sorted(files, key=lambda f: f["path"])]
    return blake3_hex(canonical_json(listed).encode("utf-8"))


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="microseconds")
