"""The audit questions and the exports build their typed answers themselves: the core's
function returns the answer type the Python API gives, nested answers included, and that
answer prints exactly as the API's does."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineage.api import Store
from lineage.audit.answers import (
    AuditChain,
    AuditInterval,
    AuditMachine,
    AuditParticipant,
    AuditReport,
    AuditRequirements,
    AuditStatus,
    AuditStep,
    AuditWho,
    BundleWritten,
    RelayLink,
    RequirementCheck,
)
from lineage.audit.ledger import add_records

from .audit.audit_run import NOW, RUN, Chain, build_run, copy_store, ledger
from .test_export_model_card import demo  # noqa: F401  (the fixture: a run with a checkpoint)


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """The audit tests' 32-step run with its ledger of every status."""
    root = tmp_path_factory.mktemp("typed-audit")
    store = copy_store(build_run(root / "base"), root / "store")
    add_records(store, ledger(Chain.of(store)), source="test")
    return store


def test_audit_status_is_built_typed(audited: Store) -> None:
    from lineage.audit.status import audit_status

    answer = audit_status(audited, RUN, now=NOW)
    assert type(answer) is AuditStatus and type(answer.chain) is AuditChain
    assert answer.per_interval and all(type(p) is AuditInterval for p in answer.per_interval)
    assert answer.relays and all(type(link) is RelayLink
                                 for chain in answer.relays for link in chain)
    assert answer.to_json() == audited.audit_status(RUN, now=NOW).to_json()


def test_audit_step_and_who_are_built_typed(audited: Store) -> None:
    from lineage.audit.status import participants, step_records

    step = step_records(audited, RUN, 1, now=NOW)
    assert type(step) is AuditStep
    assert all(type(keys) is tuple for keys in step.signed_by.values())
    assert step.to_json() == audited.audit_step(RUN, 1, now=NOW).to_json()
    who = participants(audited, RUN)
    assert type(who) is AuditWho and who.participants
    assert all(type(p) is AuditParticipant for p in who.participants)
    assert who.to_json() == audited.audit_who(RUN).to_json()


def test_the_report_holds_the_status_answer_itself(audited: Store) -> None:
    from lineage.audit.report import coverage_report

    report = coverage_report(audited, RUN, now=NOW)
    assert type(report) is AuditReport and type(report.status) is AuditStatus
    assert all(type(m) is AuditMachine for m in report.machines) and report.machines
    assert report.status == audited.audit_status(RUN, now=NOW)


def test_requirements_and_the_bundle_are_built_typed(audited: Store, tmp_path: Path) -> None:
    from lineage.audit.actions import export_bundle
    from lineage.audit.requirements import requirements_answer

    needs = {"requirements": tmp_path / "req.json"}
    needs["requirements"].write_text('{"memory_bytes": 1024, "step_seconds": 60}',
                                     encoding="utf-8")
    answer = requirements_answer(audited, RUN, step=1, folder=tmp_path,
                                 source=needs["requirements"])
    assert type(answer) is AuditRequirements and answer.ok
    assert [type(c) for c in answer.checks] == [RequirementCheck]
    assert answer.expected_seconds_swapping == 180
    assert answer.to_json() == audited.audit_requirements(
        RUN, step=1, folder=tmp_path, requirements=needs["requirements"]).to_json()
    written = export_bundle(audited, RUN, tmp_path / "b.zip")
    assert type(written) is BundleWritten and written.run == RUN and written.records > 0


def test_the_exports_are_built_typed(demo: Store, tmp_path: Path) -> None:  # noqa: F811
    from lineage.exports.ai_act import ai_act_summary
    from lineage.exports.answers import AiActScraped, AiActSummary, ModelCard, ModelCardMetadata
    from lineage.exports.model_card import model_card
    from lineage.exports.openlineage import export_openlineage
    from lineage.exports.openlineage_answers import OpenLineageExport, OpenLineageRun

    card = model_card(demo, run="tiny", checkpoint=99)
    assert type(card) is ModelCard and type(card.metadata) is ModelCardMetadata
    assert card["metadata"]["datasets"] == [card.evidence.corpus]  # read by key, as JSON
    assert card.to_json() == demo.model_card("tiny", checkpoint=99).to_json()
    summary = ai_act_summary(demo, run="tiny")
    assert type(summary) is AiActSummary
    assert type(summary.data_sources.scraped) is AiActScraped
    assert summary.to_json() == demo.ai_act_summary(run="tiny").to_json()
    sent = export_openlineage(demo, run="sonnets", output=tmp_path / "ev.jsonl")
    assert type(sent) is OpenLineageExport and sent.runs
    assert all(type(r) is OpenLineageRun for r in sent.runs)
    assert sent.events == sum(len(r.states) for r in sent.runs)
