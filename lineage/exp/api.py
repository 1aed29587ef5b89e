"""Experiments from Python: each function is one `lineage exp` command, typed answers back.

    import lineage.exp as exp
    record = exp.run(store, ["python", "eval.py"], weights="models/m", revision="3f2a1c")
    record.outcome, record.exit_code, record.command.duration_s
    exp.list(store).to_polars()          # one row per experiment
    exp.diff(store, "a100-day3", "h100-day4").changes

lineage.exp re-exports these under the commands' names: `list`, `show`, `diff`, `logs`,
`run`; `export` and `import` are `export_bundle` and `import_bundle` (`import` is a
Python keyword). Answers are lineage.exp.answers; the modules doing the work are imported
on first call, so importing this one is cheap.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from lineage.exp.capture import DEFAULT_MAX_LOG

if TYPE_CHECKING:
    from lineage.answer import AnswerList
    from lineage.exp.answers import (
        Experiment,
        ExperimentDiff,
        ExperimentRun,
        ExperimentSummary,
        ExportedBundle,
        ImportedBundle,
    )
    from lineage.store.base import BaseStore

PathLike = str | os.PathLike[str]
OutputCallback = Callable[[str, bytes], None]


def run_experiment(
    store: BaseStore, command: Sequence[str], *, weights: PathLike, revision: str,
    sums: PathLike | None = None, quantization: str | None = None, source: str | None = None,
    name: str | None = None, attempt: bool = False, allow_fallback: bool = False,
    allow_risk: Iterable[str] = (), env: Iterable[str] = (),
    param: Mapping[str, object] | None = None, metrics: PathLike | None = None,
    timeout: float | None = None, cwd: PathLike | None = None, echo: bool = True,
    on_output: OutputCallback | None = None, revision_override: bool = False,
    max_log: int | None = DEFAULT_MAX_LOG, max_header_mib: float = 16.0,
) -> ExperimentRun:
    """`lineage exp run -- COMMAND`: the checks on `weights` (a folder, a Hugging Face
    cache snapshot or one model file), then `command` (a list of arguments, never a shell
    line); the record is committed whatever happens and returned.

    Nothing is raised for a failed check, a failed command, a timeout, an interruption or
    a refused metrics file: the record says so (`outcome`, `failure`, `interrupted`,
    `metrics`) and `exit_code` is what the command line would exit with. Bad input (no
    weights, a name already taken without `attempt`, a foreign checksum list, a `revision`
    that does not name the snapshot given without `revision_override`) raises before
    anything runs.

    Output: with `echo` (the default) the command's stdout and stderr pass through to
    `sys.stdout` and `sys.stderr` as they come, as on the command line; `echo=False` shows
    nothing (read them back with `logs`); `on_output(stream, chunk)` receives them instead.
    Either way the store keeps up to `max_log` bytes of each (its first and last halves;
    None keeps all) with the whole stream's BLAKE3 and length. Nothing else is printed:
    the record's `warnings` say what the command line would warn about.

    The other parameters are the command's options: `param` the --param KEY=VALUE pairs
    (values are recorded as text), `env` the names of variables to record, `allow_risk`
    the risk kinds accepted, `metrics` a JSON (final values) or JSON-lines (their history)
    file the command writes (relative to `cwd`), `timeout` seconds before its process
    group, and the processes that left it, are stopped; `cwd` the working directory
    (default: the current one); `max_header_mib` the largest safetensors header the
    checks accept (a local policy, as `verify` has it).
    """
    from lineage.errors import UsageError
    from lineage.exp.answers import ExperimentRun
    from lineage.exp.recorder import record_experiment

    if isinstance(command, str | bytes):
        raise UsageError("give the command as a list of arguments, e.g. ['python', 'eval.py']")
    if not command:
        raise UsageError("give the command after `--`, e.g. -- python run.py")
    if timeout is not None and timeout < 0:
        raise UsageError("--timeout must be at least 0 seconds")
    if max_log is not None and max_log < 0:
        raise UsageError("--max-log must be at least 0 bytes")
    if not max_header_mib > 0:
        raise UsageError("--max-header-mib must be positive")
    exp_id, record = record_experiment(
        store, weights=os.fspath(weights), revision=revision, command=list(command),
        sums=None if sums is None else os.fspath(sums), quantization=quantization,
        source=source, name=name, attempt=attempt, allow_fallback=allow_fallback,
        allow_risks=tuple(allow_risk), env_names=env_names(env),
        params={str(k): str(v) for k, v in (param or {}).items()},
        metrics=None if metrics is None else os.fspath(metrics), timeout=timeout,
        cwd=None if cwd is None else os.fspath(cwd), revision_override=revision_override,
        max_log=max_log, on_output=on_output or (_passthrough() if echo else None),
        max_header_bytes=int(max_header_mib * 2**20))
    # The record is JSON of its spec version, in the order it was recorded
    return ExperimentRun.from_dict({"id": exp_id, **record})


def env_names(names: Iterable[str]) -> tuple[str, ...]:
    """The --env names, each the name of a variable (a value there is a mistake)."""
    from lineage.errors import UsageError

    names = tuple(names)
    for name in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UsageError(f"--env {name!r}: give the name of a variable, not a value")
    return names


def _passthrough() -> OutputCallback:
    """The command's stdout on ours, its stderr on ours, as they come."""
    targets = {"stdout": sys.stdout, "stderr": sys.stderr}
    for target in targets.values():
        target.flush()

    def show(stream: str, chunk: bytes) -> None:
        target = targets[stream]
        binary = getattr(target, "buffer", None)
        if binary is None:  # a notebook's stream takes text only
            target.write(chunk.decode("utf-8", errors="replace"))
        else:
            binary.write(chunk)
            binary.flush()
        target.flush()

    return show


def list_experiments(store: BaseStore) -> AnswerList[ExperimentSummary]:
    """`lineage exp list`: every experiment record, oldest first; `.to_polars()` gives one
    row per experiment."""
    from lineage.exp.records import list_records

    return list_records(store)


def show_experiment(store: BaseStore, name: str) -> Experiment:
    """`lineage exp show ID`: one record in full. `name` is an id, a unique id prefix, a
    name (its highest attempt) or NAME#N (attempt N)."""
    from lineage.exp.records import get_record

    return get_record(store, name)


def diff_experiments(store: BaseStore, a: str, b: str, *, all: bool = False
                     ) -> ExperimentDiff:
    """`lineage exp diff A B`: the facts that differ, most consequential first (files,
    revision, command, verdicts, outputs, runtime, surroundings, durations, host);
    `all=True` lists the same ones too, as `unchanged`. `same` is True when none differ."""
    from lineage.exp.compare import diff_records
    from lineage.exp.records import get_record

    return diff_records(get_record(store, a), get_record(store, b), everything=all)


def log_chunks(store: BaseStore, name: str, *, stderr: bool = False) -> Iterator[bytes]:
    """The command's stdout (or stderr) as it wrote it, in chunks, checked against its
    BLAKE3 before the first chunk; for outputs too large to hold at once."""
    from lineage.exp.log_files import iter_log
    from lineage.exp.records import get_record

    record = get_record(store, name)
    return iter_log(store, record.id, "stderr" if stderr else "stdout")


def logs(store: BaseStore, name: str, *, stderr: bool = False) -> bytes:
    """`lineage exp logs ID`: the command's stdout (or stderr) exactly as it wrote it,
    checked against its BLAKE3. Raises NotFoundError for a record that kept no whole log
    (spec 1), StoreError when the stored log does not match its digest."""
    return b"".join(log_chunks(store, name, stderr=stderr))


def export_bundle(store: BaseStore, names: Sequence[str], output: PathLike
                  ) -> ExportedBundle:
    """`lineage exp export ID... -o FILE`: a self-verifying bundle (a zip) of the records,
    their checksum lists and command outputs, to take along before a rental ends."""
    from lineage.exp.bundle import export_bundle as export

    return export(store, list(names), os.fspath(output))


def import_bundle(store: BaseStore, bundle: PathLike) -> ImportedBundle:
    """`lineage exp import FILE`: check a bundle against its digests and add its records
    (idempotent: records already present are listed as such). Named `import_bundle`
    because `import` is a Python keyword."""
    from lineage.exp.bundle import import_bundle as import_

    return import_(store, os.fspath(bundle))
