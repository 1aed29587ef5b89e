"""The typed answers of the experiment questions (lineage.answer explains the pattern).

A record's shape depends on its spec version (docs/experiments.md), and a record read from
the store has its keys sorted (canonical JSON) where `exp run` prints them in the order
they were recorded: records are `Document`s (lineage.diligence.document), which print as
the object they were read from; a key an older record lacks reads as None. The parts
people reach for are typed (weights, command, failure, outcome); checks, report, runtime,
host, git, env and metrics stay plain dicts (their keys follow the check or the machine).
"""

from __future__ import annotations

from typing import Any

from lineage.answer import Answer, optional
from lineage.diligence.document import Document


class ExperimentSummary(Answer):
    """One row of `lineage exp list`."""

    id: str  # exp- + 12 hex of the record's BLAKE3
    name: str | None
    attempt: int | None  # None for records without a name
    outcome: str  # passed, check-failed, command-failed, timed-out, interrupted
    revision: str | None
    created_at: str  # when it was recorded (UTC)
    host_cpu: str | None
    exit_code: int | None  # the command's; None when it did not run


class WeightsFile(Document):
    """One file of the weights folder."""

    path: str
    size: int  # bytes
    sha256: str  # hex


class ExperimentWeights(Document):
    """The weights the command ran on: a folder, a hub cache snapshot or one file."""

    path: str  # absolute
    files: tuple[WeightsFile, ...]  # a snapshot's through their blobs; a file and its parts
    digest: str | None  # blake3:<hex> of the sorted (path, sha256) list; None before spec 2
    snapshot: dict[str, Any] | None  # repo_id, kind, revision, refs, folder; None before 3


class ExperimentCommand(Document):
    """What ran and how it ended; each stream's BLAKE3 and length."""

    argv: tuple[str, ...]
    cwd: str | None  # None before spec 2
    exit_code: int  # negative -N when signal N ended it (as Python reports it)
    signal: str | None  # e.g. SIGKILL
    timed_out: bool | None
    duration_s: float
    not_started: str | None  # why the command could not start (exit code 127 or 126)
    max_log: int | None  # bytes of each stream the store keeps at most (None: all)
    escaped: tuple[dict[str, Any], ...] | None  # processes that had left the group: pid,
    # name, ended (whether lineage ended them); None before spec 3
    stdout: dict[str, Any]  # blake3, bytes (whole stream); kept (head, tail, omitted,
    stderr: dict[str, Any]  # bytes, blake3) when --max-log cut it; incomplete, log_error


class ExperimentFailure(Document):
    """Why the gate or the command failed, and what to do."""

    type: str  # e.g. hash mismatch, dangerous risk, command failed, timeout
    action: str
    files: tuple[str, ...]
    rule: str | None
    by_status: dict[str, tuple[str, ...]] | None  # checksum failures: files per status


class Interruption(Document):
    """The signal that stopped the run, and when."""

    signal: str  # SIGINT or SIGTERM
    during: str  # "checks" or "command"


class Experiment(Document):
    """`lineage exp show ID`: one experiment record in full (keys as stored: sorted)."""

    id: str
    spec: str | None  # lineage-experiment/3
    name: str | None
    attempt: int | None
    created_at: str | None
    revision: str | None
    revision_override: bool | None  # --revision-override was given (spec 3)
    quantization: str | None
    source: str | None
    allow_fallback: bool | None
    allowed_risks: tuple[str, ...] | None
    weights: ExperimentWeights | None
    sums: dict[str, Any] | None  # path, sha256 and the text of the list used
    checks: tuple[dict[str, Any], ...] | None  # name, exit_code, and its findings
    failure: ExperimentFailure | None
    command: ExperimentCommand | None  # None when a check stopped the run
    report: dict[str, Any] | None  # what the command reported (first_load, providers, ...)
    params: dict[str, str] | None
    metrics: dict[str, Any] | None  # {path, values[, history, rows, cut_last_line]},
    # {path, error} when none was written, {path, error, rule, refused} when refused
    env: dict[str, str | None] | None
    git: dict[str, Any] | str | None  # commit, dirty, remote, ...; or "not a git repository"
    host: dict[str, Any] | None  # os, release, machine, cpu, cores, memory, accelerators
    runtime: dict[str, Any] | None  # the interpreter's versions as probed
    lineage: str | None  # lineage's version
    interrupted: Interruption | None
    outcome: str | None  # passed, check-failed, command-failed, timed-out, interrupted
    warnings: tuple[str, ...] | None


class ExperimentRun(Experiment):
    """`lineage exp run --json`: the record just committed (keys in recording order).

    `exit_code` (not a JSON key) is what `lineage exp run` exits with: the command's own
    exit code, 1 when a check stopped it, 124 on a timeout, 128 + N when signal N
    interrupted it, 2 when the command succeeded but its metrics file was refused.
    """

    @property
    def exit_code(self) -> int:
        from lineage.exp.gate import exit_code

        record = self.to_dict()
        record.pop("id")
        return exit_code(record)


class DiffEntry(Document):
    """One fact of two records: a field (and key within it) and both values."""

    field: str  # e.g. files, revision, exit_code, packages, host
    key: str | None = optional()  # the file, package, variable, ...; absent when the
    # field has no keys
    a: Any
    b: Any


class ExperimentDiff(Answer):
    """`lineage exp diff A B`: every fact that differs, most consequential first."""

    a: str | None  # the ids compared (None: a record given without its id)
    b: str | None
    same: bool
    changes: tuple[DiffEntry, ...]
    unchanged: tuple[DiffEntry, ...] | None = optional()  # with all=True only


class ExportedBundle(Answer):
    """`lineage exp export`: the bundle written."""

    bundle: str  # its path
    records: int
    logs: int  # command outputs included
    digest: str  # blake3:<hex> over the manifest's member list


class ImportedBundle(Answer):
    """`lineage exp import`: which records were new and which were already there."""

    bundle: str
    added: tuple[str, ...]  # ids
    already_present: tuple[str, ...]
    logs: int


__all__ = ["DiffEntry", "Experiment", "ExperimentCommand", "ExperimentDiff",
           "ExperimentFailure", "ExperimentRun", "ExperimentSummary", "ExperimentWeights",
           "ExportedBundle", "ImportedBundle", "Interruption", "WeightsFile"]
