"""What differs between two experiment records, field by field, most consequential first.

A record is flattened into (field, key, value) facts in a fixed order: the files and
revision, what ran and where, the verdicts, the outputs, the runtime, the surroundings,
the durations and the host. Two records are compared fact by fact; only the differing
ones are listed unless every fact is asked for. Records of every spec version are read
(a fact an old record lacks is None).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from lineage.exp.answers import DiffEntry, ExperimentDiff

Fact = tuple[str, str | None, Any]


def diff_records(a: Mapping[str, Any], b: Mapping[str, Any], *, everything: bool = False
                 ) -> ExperimentDiff:
    """`changes`: the differing facts; with `everything`, also `unchanged` (the rest).
    `a` and `b` are records as `Experiment`s or as their JSON objects."""
    # Facts are the records' JSON values, as stored, whatever their spec version
    facts_a, facts_b = _indexed(dict(a)), _indexed(dict(b))
    order = list(facts_a) + [k for k in facts_b if k not in facts_a]
    changes: list[DiffEntry] = []
    unchanged: list[DiffEntry] = []
    for field, key in order:
        va, vb = facts_a.get((field, key)), facts_b.get((field, key))
        entry = DiffEntry(field=field, key=key, a=va, b=vb)
        (changes if va != vb else unchanged).append(entry)
    return ExperimentDiff(a=a.get("id"), b=b.get("id"), same=not changes, changes=tuple(changes),
                          unchanged=tuple(unchanged) if everything else None)


def _indexed(record: dict[str, Any]) -> dict[tuple[str, str | None], Any]:
    return {(field, key): value for field, key, value in record_facts(record)}


def record_facts(record: dict[str, Any]) -> Iterator[Fact]:
    yield from _weights(record)
    command = record.get("command") or {}
    yield "command", None, command.get("argv")
    yield "cwd", None, command.get("cwd")
    yield from _verdicts(record)
    yield "exit_code", None, command.get("exit_code")
    yield "signal", None, command.get("signal")
    yield "interrupted", None, (record.get("interrupted") or {}).get("signal")
    yield from _outputs(record)
    yield from _runtime(record)
    yield from _surroundings(record)
    yield "duration_s", None, command.get("duration_s")
    host = record.get("host") or {}
    for key in ("os", "release", "machine", "cpu", "cores", "memory_bytes", "accelerators"):
        yield "host", key, host.get(key)
    yield "lineage", None, record.get("lineage")


def _weights(record: dict[str, Any]) -> Iterator[Fact]:
    for item in sorted(record.get("weights", {}).get("files", []), key=lambda f: f["path"]):
        yield "files", item["path"], item["sha256"]
    for field in ("revision", "quantization", "source"):
        yield field, None, record.get(field)
    snapshot = record.get("weights", {}).get("snapshot") or {}
    yield "snapshot", "repo_id", snapshot.get("repo_id")
    yield "snapshot", "revision", snapshot.get("revision")
    yield "revision_override", None, record.get("revision_override")
    yield "sums", None, (record.get("sums") or {}).get("sha256")


def _verdicts(record: dict[str, Any]) -> Iterator[Fact]:
    yield "outcome", None, record.get("outcome")
    for check in record.get("checks", []):
        yield "checks", check["name"], check["exit_code"]
    yield "failure", None, (record.get("failure") or {}).get("type")
    yield "allowed_risks", None, record.get("allowed_risks")
    yield "allow_fallback", None, record.get("allow_fallback")


def _outputs(record: dict[str, Any]) -> Iterator[Fact]:
    command = record.get("command") or {}
    for stream in ("stdout", "stderr"):
        yield stream, "blake3", (command.get(stream) or {}).get("blake3")
        yield stream, "bytes", (command.get(stream) or {}).get("bytes")
    report = record.get("report") or {}
    yield "output_digest", None, report.get("output_digest")
    yield "first_load", None, report.get("first_load")
    providers = report.get("providers") or {}
    yield "providers", "requested", providers.get("requested")
    yield "providers", "obtained", providers.get("obtained")
    session = providers.get("session") or {}  # absent from records made before it was kept
    for key in ("graph_optimization_level", "execution_mode", "intra_op_num_threads",
                "inter_op_num_threads"):
        yield "session", key, session.get(key)


def _runtime(record: dict[str, Any]) -> Iterator[Fact]:
    runtime = record.get("runtime") or {}
    probed = runtime.get("status", "probed") == "probed"  # spec 1: lineage's own runtime
    yield "interpreter", None, runtime.get("interpreter") if probed else runtime.get("status")
    yield "python", None, runtime.get("python")
    for name, version in sorted((runtime.get("packages") or {}).items()):
        yield "packages", name, version


def _surroundings(record: dict[str, Any]) -> Iterator[Fact]:
    for name, value in sorted((record.get("env") or {}).items()):
        yield "env", name, value
    git = record.get("git")
    if isinstance(git, dict):
        for key in ("commit", "dirty", "remote"):
            yield "git", key, git.get(key)
    else:
        yield "git", "commit", git  # "not a git repository", or None before spec 2
    for key, value in sorted((record.get("params") or {}).items()):
        yield "params", key, value
    metrics = record.get("metrics") or {}
    if metrics.get("error"):
        yield "metrics", "error", metrics["error"]
    for key, value in sorted((metrics.get("values") or {}).items()):
        yield "metrics", key, value
