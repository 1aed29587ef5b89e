"""The experiment and store-verification questions build their typed answers themselves:
what they return is the Answer type, and it prints as the command's `--json` does."""

from __future__ import annotations

import sys
from pathlib import Path

import lineage.exp
from lineage.answer import AnswerList
from lineage.api import Store
from lineage.exp.answers import (
    DiffEntry,
    Experiment,
    ExperimentDiff,
    ExperimentRun,
    ExperimentSummary,
    ExportedBundle,
    ImportedBundle,
)
from lineage.exp.bundle import export_bundle, import_bundle
from lineage.exp.compare import diff_records
from lineage.exp.records import attempts_of, get_record, list_records
from lineage.store.answers import PartProblem, StoreVerification
from lineage.store.integrity import verify_store

from .conftest import Cli


def _run(store: Store, weights: Path, code: int) -> ExperimentRun:
    command = [sys.executable, "-c", f"print('out'); raise SystemExit({code})"]
    return lineage.exp.run(store, command, weights=weights, revision="r1", echo=False,
                           name="typed", attempt=code > 0)


def test_the_experiment_questions_return_their_answer_types(
    store: Store, weights: Path, tmp_path: Path
) -> None:
    first, second = _run(store, weights, 0), _run(store, weights, 3)
    assert type(first) is ExperimentRun
    listed = list_records(store)
    assert isinstance(listed, AnswerList) and listed.row_type is ExperimentSummary
    assert [type(row) for row in listed] == [ExperimentSummary, ExperimentSummary]
    assert [row.attempt for row in listed] == [1, 2]
    assert [a.attempt for a in attempts_of(store, "typed")] == [1, 2]
    record = get_record(store, "typed#1")
    assert type(record) is Experiment and record.id == first.id

    diff = diff_records(record, get_record(store, "typed"), everything=True)
    assert type(diff) is ExperimentDiff and (diff.a, diff.b) == (first.id, second.id)
    assert all(type(entry) is DiffEntry for entry in diff.changes)
    exit_codes = [c for c in diff.changes if c.field == "exit_code"]
    assert [(c.key, c.a, c.b) for c in exit_codes] == [(None, 0, 3)]
    assert "key" not in exit_codes[0].to_dict()  # a fact without a key prints none
    cli = Cli(store.root)
    assert diff.to_dict() == cli.json("exp", "diff", first.id, second.id, "--all", code=1)

    bundle = tmp_path / "b.zip"
    exported = export_bundle(store, [first.id, second.id], bundle)
    assert type(exported) is ExportedBundle and exported.records == 2
    imported = import_bundle(store, bundle)
    assert type(imported) is ImportedBundle
    assert imported.added == () and set(imported.already_present) == {first.id, second.id}


def test_store_verification_is_typed_and_names_each_problem_owner(
    store: Store, weights: Path
) -> None:
    run = _run(store, weights, 0)
    report = verify_store(store)
    assert type(report) is StoreVerification and report.ok and report.problems == ()
    log = next(p for p in (store.root / "logs").rglob("*") if p.is_file())
    log.unlink()
    report = verify_store(store)
    assert not report.ok and all(type(p) is PartProblem for p in report.problems)
    assert [(p.status, p.owner) for p in report.problems] == [
        ("missing", f"experiment {run.id}")]
    assert report.to_dict() == Cli(store.root).json("store", "verify", code=1)
