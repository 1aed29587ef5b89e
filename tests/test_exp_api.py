"""lineage.exp from Python: run, list, show, diff, logs, export_bundle and import_bundle
answer exactly what `lineage exp ... --json` prints, typed, on records made by real runs
of small commands (and one record as lineage-experiment/1 wrote it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import lineage.exp
from lineage.api import Store, init_store, open_store
from lineage.errors import ConflictError, InputError, NotFoundError, UsageError
from lineage.exp.answers import (
    Experiment,
    ExperimentCommand,
    ExperimentRun,
    ExperimentSummary,
    ExperimentWeights,
)

from .conftest import Cli, write_spec_1_bundle

SCRIPT = "import sys; print('out'); print('err', file=sys.stderr); sys.exit({code})"


def _command(code: int = 0) -> list[str]:
    return [sys.executable, "-c", SCRIPT.format(code=code)]


def _run(store: Store, weights: Path, code: int = 0, **options: object) -> ExperimentRun:
    return lineage.exp.run(store, _command(code), weights=weights, revision="r1",
                           echo=False, **options)  # type: ignore[arg-type]


def test_run_returns_the_record_and_prints_nothing(
    store: Store, weights: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    record = _run(store, weights, code=3, name="quiet", param={"temperature": 0})
    assert capfd.readouterr() == ("", "")
    assert isinstance(record, ExperimentRun) and record.id.startswith("exp-")
    assert record.outcome == "command-failed" and record.exit_code == 3
    assert record.failure is not None and record.failure.type == "command failed"
    assert isinstance(record.command, ExperimentCommand)
    assert record.command.exit_code == 3 and record.command.argv == tuple(_command(3))
    assert record.command.stdout["bytes"] == len(b"out\n")
    assert isinstance(record.weights, ExperimentWeights)
    assert {f.path for f in record.weights.files} == {"model.safetensors", "config.json"}
    assert record.params == {"temperature": "0"}  # recorded as text, as --param does
    assert record.name == "quiet" and record.attempt == 1 and record.warnings == ()
    assert lineage.exp.logs(store, "quiet") == b"out\n"
    assert lineage.exp.logs(store, "quiet", stderr=True) == b"err\n"


def test_run_passes_the_output_through_by_default(
    store: Store, weights: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    record = lineage.exp.run(store, _command(), weights=weights, revision="r1")
    assert capsysbinary.readouterr() == (b"out\n", b"err\n")
    assert record.outcome == "passed" and record.exit_code == 0
    chunks: list[tuple[str, bytes]] = []
    lineage.exp.run(store, _command(), weights=weights, revision="r1",
                    on_output=lambda stream, chunk: chunks.append((stream, chunk)))
    assert capsysbinary.readouterr() == (b"", b"")
    assert b"".join(c for s, c in chunks if s == "stdout") == b"out\n"


def test_run_record_is_what_the_command_prints(cli: Cli, store: Store, weights: Path) -> None:
    printed = cli("exp", "run", "--weights", str(weights), "--revision", "r1", "--name", "c",
                  "--json", "--", *_command(2), code=2).stdout
    typed = ExperimentRun.from_dict(json.loads(printed))
    assert typed.to_json() + "\n" == printed and typed.exit_code == 2
    ours = _run(store, weights, code=2, name="p")
    assert list(ours.to_dict()) == list(typed.to_dict())  # the same keys, in the same order
    shown = lineage.exp.show(store, ours.id)
    assert shown == ours.to_dict()  # the stored record is the record run returned
    assert list(shown) == ["id", *sorted(k for k in ours if k != "id")]  # as stored: sorted


def test_run_bad_input_raises_before_anything_runs(store: Store, weights: Path,
                                                   tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="list of arguments"):
        lineage.exp.run(store, "python -c pass", weights=weights, revision="r")
    with pytest.raises(UsageError, match="give the command"):
        lineage.exp.run(store, [], weights=weights, revision="r")
    with pytest.raises(UsageError, match="name of a variable"):
        _run(store, weights, env=["A=1"])
    with pytest.raises(InputError, match="no such weights folder"):
        lineage.exp.run(store, _command(), weights=tmp_path / "none", revision="r")
    _run(store, weights, name="taken")
    with pytest.raises(ConflictError, match="is taken"):
        _run(store, weights, name="taken")
    assert _run(store, weights, name="taken", attempt=True).attempt == 2
    assert [r.attempt for r in lineage.exp.list(store)] == [1, 2]


def test_a_failed_check_is_in_the_record(store: Store, weights: Path) -> None:
    sums = weights.parent / "SHA256SUMS"
    sums.write_text(f"{'0' * 64}  model.safetensors\n")
    record = _run(store, weights, sums=sums, name="bad-sums")
    assert record.outcome == "check-failed" and record.exit_code == 1
    assert record.command is None and record.failure is not None
    assert record.failure.type == "hash mismatch"
    assert record.failure.files == ("model.safetensors",)
    assert record.failure.by_status == {"mismatch": ("model.safetensors",)}
    assert [c["name"] for c in record.checks or ()] == ["structure", "risks", "checksums"]


def test_list_show_diff_and_logs_are_what_the_commands_print(
    cli: Cli, store: Store, weights: Path
) -> None:
    first = _run(store, weights, name="one")
    second = _run(store, weights, code=1, name="two", env=["HOME"])
    listed = lineage.exp.list(store)
    assert cli("exp", "list", "--json").stdout == listed.to_json() + "\n"
    assert [r.id for r in listed] == [first.id, second.id]
    assert all(isinstance(r, ExperimentSummary) for r in listed)
    assert listed[1].exit_code == 1 and listed[1].outcome == "command-failed"
    for name in (first.id, "two", first.id[:8], "one#1"):
        shown = lineage.exp.show(store, name)
        assert isinstance(shown, Experiment)
        assert cli("exp", "show", name, "--json").stdout == shown.to_json() + "\n"
    for everything in (False, True):
        diff = lineage.exp.diff(store, "one", "two", all=everything)
        flags = ["--all"] if everything else []
        assert cli("exp", "diff", "one", "two", *flags, "--json", code=1).stdout \
            == diff.to_json() + "\n"
        assert not diff.same and (diff.unchanged is not None) == everything
    diff = lineage.exp.diff(store, "one", "two")
    exit_codes = [c for c in diff.changes if c.field == "exit_code"]
    assert [(c.a, c.b, c.key) for c in exit_codes] == [(0, 1, None)]
    assert "key" not in exit_codes[0] and list(exit_codes[0]) == ["field", "a", "b"]
    assert any(c.field == "env" and c.key == "HOME" for c in diff.changes)
    assert lineage.exp.diff(store, "one", "one").same
    assert cli("exp", "logs", "two").stdout_bytes == lineage.exp.logs(store, "two") == b"out\n"
    assert b"".join(lineage.exp.log_chunks(store, "two", stderr=True)) == b"err\n"


def test_list_to_polars_has_one_row_per_experiment(store: Store, weights: Path) -> None:
    empty = lineage.exp.list(store).to_polars()
    assert empty.height == 0 and empty.schema["exit_code"] == pl.Int64
    runs = [_run(store, weights, code=code) for code in (0, 4)]
    frame = lineage.exp.list(store).to_polars()
    assert frame.columns == ["id", "name", "attempt", "outcome", "revision", "created_at",
                             "host_cpu", "exit_code"]
    assert frame["id"].to_list() == [r.id for r in runs]
    assert frame["exit_code"].to_list() == [0, 4]


def test_export_and_import_are_what_the_commands_print(
    cli: Cli, store: Store, weights: Path, tmp_path: Path
) -> None:
    record = _run(store, weights, name="travel")
    bundle = tmp_path / "bundle.zip"
    printed = cli("exp", "export", "travel", "-o", str(bundle), "--json").stdout
    exported = lineage.exp.export_bundle(store, ["travel"], bundle)
    assert printed == exported.to_json() + "\n"
    assert exported.records == 1 and exported.logs == 2 and exported.bundle == str(bundle)
    stores = []
    for name in ("a", "b"):
        init_store(tmp_path / name)
        stores.append(open_store(tmp_path / name))
    printed = Cli(stores[0].root)("exp", "import", str(bundle), "--json").stdout
    imported = lineage.exp.import_bundle(stores[1], bundle)
    assert printed == imported.to_json() + "\n"
    assert imported.added == (record.id,) and imported.already_present == ()
    assert lineage.exp.import_bundle(stores[1], bundle).already_present == (record.id,)
    assert lineage.exp.show(stores[1], "travel") == lineage.exp.show(store, "travel")
    assert lineage.exp.logs(stores[1], "travel") == b"out\n"


def test_a_spec_1_record_reads_with_none_for_what_it_lacks(cli: Cli, store: Store,
                                                           tmp_path: Path) -> None:
    from lineage.exp.records import record_id

    bundle = tmp_path / "old.zip"
    old = write_spec_1_bundle(bundle)
    assert lineage.exp.import_bundle(store, bundle).added == (record_id(old),)
    shown = lineage.exp.show(store, "old")
    assert cli("exp", "show", "old", "--json").stdout == shown.to_json() + "\n"
    assert shown.to_dict() == {"id": record_id(old), **dict(sorted(old.items()))}
    assert shown.attempt is None and shown.warnings is None and shown.interrupted is None
    assert "attempt" not in shown and "interrupted" not in shown
    assert shown.weights is not None and shown.weights.digest is None
    assert shown.command is not None and shown.command.cwd is None
    assert shown.command.stdout["tail"] == ""  # a key of spec 1 only, kept as it was
    with pytest.raises(NotFoundError, match="before lineage kept whole logs"):
        lineage.exp.logs(store, "old")
    assert lineage.exp.diff(store, "old", "old").same


def test_importing_the_python_faces_stays_light() -> None:
    """`import lineage` will carry these: they import their workers on first call."""
    code = ("import sys, lineage.exp, lineage.diligence.api; heavy = {'duckdb', 'polars', "
            "'numpy', 'lineage.exp.gate', 'lineage.exp.records', 'lineage.diligence.inspect', "
            "'lineage.diligence.verify', 'lineage.formats.folder'}; "
            "print(sorted(heavy & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout == "[]\n"
