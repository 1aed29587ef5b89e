"""`lineage exp run`: the gate of DOMAIN.md §1 in front of an experiment, and its record.

Checks run in order, and the first failure stops the gate: the structure of the weights
(the folder model `lineage verify` and `inspect` use), the risks (no dangerous or unknown
finding unless its kind is allowed with `allow_risks`), then the checksums against a
trusted list, then the command. Whatever the outcome, the record keeps what ran, on which
files, with which exit codes, on which machine, with which runtime versions, and what the
command reported (first load, output digest, providers requested and obtained), so the
next machine can be compared with this one.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import blake3

from lineage.errors import InputError, UsageError
from lineage.exp.facts import host_facts, runtime_versions
from lineage.exp.providers import REPORT_ENV
from lineage.formats.folder import failure_type, read_folder
from lineage.formats.sha256sums import read_sums, sha256_files, verify_sums
from lineage.report.risks import NOT_OK, check_risk_kinds, folder_risks, risk_verdict

EXPERIMENT_SPEC = "lineage-experiment/1"
TAIL_BYTES = 4096

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
    allow_risks: Iterable[str] = (),
) -> dict[str, Any]:
    """Run the gate and the command; return the record (not yet stored)."""
    if not command:
        raise UsageError("give the command to run after `--`")
    folder = Path(weights)
    allowed = check_risk_kinds(allow_risks)
    if not folder.is_dir():
        raise InputError(folder, "no such weights folder" if not folder.exists()
                         else "not a folder (--weights takes the weights folder)")
    record: dict[str, Any] = {
        "spec": EXPERIMENT_SPEC, "name": name, "created_at": _now(), "revision": revision,
        "quantization": quantization, "source": source, "allow_fallback": allow_fallback,
        "allow_risks": allowed,
        "weights": {"path": str(folder.resolve()), "files": _files(folder)},
        "sums": None, "checks": [], "failure": None, "command": None, "report": {},
        "host": host_facts(), "runtime": runtime_versions(), "outcome": "passed",
    }
    model = read_folder(folder)
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
    if sums is not None:
        failure = _checksums(record, folder, Path(sums))
        if failure:
            return _stop(record, failure)
    record["command"], record["report"] = _run(command, folder, timeout)
    if record["command"]["exit_code"] != 0:
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


def _stop(record: dict[str, Any], failure: dict[str, Any]) -> dict[str, Any]:
    record["failure"] = failure
    record["outcome"] = "command-failed" if failure["type"] in (
        "command failed", "provider fallback") else "check-failed"
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


def _checksums(record: dict[str, Any], folder: Path, sums: Path) -> dict[str, Any] | None:
    text = sums.read_text(encoding="utf-8", errors="replace")
    record["sums"] = {"path": str(sums.resolve()),
                      "sha256": sha256_files([sums])[sums], "text": text}
    report = verify_sums(folder, read_sums(sums))
    record["checks"].append({"name": "checksums", "exit_code": 0 if report.ok else 1,
                             "ok": report.ok, "files": report.files})
    return None if report.ok else _checksum_failure(report.files)


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


def _run(command: list[str], folder: Path, timeout: float | None
         ) -> tuple[dict[str, Any], dict[str, Any]]:
    import json

    with tempfile.TemporaryDirectory(prefix="lineage-exp-") as scratch:
        report_path = Path(scratch) / "report.json"
        env = {**os.environ, REPORT_ENV: str(report_path), "LINEAGE_EXP_WEIGHTS": str(folder)}
        started = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, env=env, timeout=timeout,
                                  check=False)
            code, out, err = done.returncode, done.stdout, done.stderr
        except FileNotFoundError:
            code, out, err = 127, b"", f"command not found: {command[0]}".encode()
        except subprocess.TimeoutExpired as exc:
            code, out, err = 124, exc.stdout or b"", (exc.stderr or b"") + b"\n[timeout]"
        duration = round(time.monotonic() - started, 3)
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
    return {"argv": command, "exit_code": code, "duration_s": duration,
            "stdout": _stream(out), "stderr": _stream(err)}, report


def _stream(data: bytes) -> dict[str, Any]:
    return {"blake3": "blake3:" + blake3.blake3(data).hexdigest(), "bytes": len(data),
            "tail": data[-TAIL_BYTES:].decode("utf-8", errors="replace")}


def _files(folder: Path) -> list[dict[str, Any]]:
    if not folder.is_dir():
        return []
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    digests = sha256_files(paths)
    return [{"path": p.relative_to(folder).as_posix(), "size": p.stat().st_size,
             "sha256": digests[p]} for p in paths]


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="microseconds")
