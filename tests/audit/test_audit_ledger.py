"""The ledger: records checked by rule before any is written, idempotent adds, the chain
head, signatures, and the `lineage audit` commands (exit codes, --json = typed answers)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from lineage.api import Store
from lineage.audit import records as R
from lineage.audit.ledger import add_records, iter_records, run_head
from lineage.errors import InputError

from ..conftest import Cli
from .audit_run import NOW, RUN, Chain, ledger


def test_ids_are_the_canonical_record_without_its_signature(fresh: tuple[Store, Chain]) -> None:
    _, chain = fresh
    record = chain.initial()
    signed = {**record, "signature": "-----BEGIN SSH SIGNATURE-----\nAAAA\n"}
    assert R.record_id(record) == R.record_id(signed) == "blake3:" + __import__(
        "blake3").blake3(json.dumps(record, sort_keys=True, separators=(",", ":"),
                                    ensure_ascii=False).encode()).hexdigest()
    assert R.record_id({**record, "duration_s": 1.5}) != R.record_id(record)


def test_adding_twice_is_a_no_op(fresh: tuple[Store, Chain]) -> None:
    store, chain = fresh
    records = ledger(chain)
    first = add_records(store, records, source="a")
    again = add_records(store, [*records, records[0]], source="b")
    assert len(first.added) == len(records) and first.present == []
    assert again.added == [] and len(again.present) == len(records) + 1
    assert store.sql("SELECT count(*) FROM audit_records").rows == [(len(records),)]
    listed = iter_records(store, RUN)
    assert sorted(map(R.record_id, listed)) == sorted(first.added)
    assert [r["created_at"] for r in listed] == sorted(r["created_at"] for r in listed)
    assert all(r["kind"] == "claim" for r in iter_records(store, RUN, kind="claim"))


def test_a_wrong_chain_head_is_refused_by_name(fresh: tuple[Store, Chain]) -> None:
    store, chain = fresh
    record = chain.initial()
    other = R.attestation(**{k: record[k] for k in ("run", "step", "unit", "start", "state_hash",
                                                    "expected", "machine", "duration_s",
                                                    "tools", "auditor")},
                          chain_head="blake3:" + "ab" * 32)
    with pytest.raises(InputError, match=r"^src:record 2: chain-head: .* but run 'tiny' ends "
                       f"at {chain.head}"):
        add_records(store, [record, other], source="src")
    assert store.sql("SELECT count(*) FROM audit_records").rows == [(0,)]  # none written
    assert run_head(store, RUN) == chain.head


def _broken(record: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(record)
    *parents, key = path.split(".")
    target = changed
    for parent in parents:
        target = target[parent]
    if value is _DELETE:
        del target[key]
    else:
        target[key] = value
    return changed


_DELETE = object()
MALFORMED = [
    ("spec", "lineage-audit/2", "spec"),
    ("kind", "vote", "kind"),
    ("step", _DELETE, "fields"),
    ("extra", 1, "fields"),
    ("step", -1, "step"),
    ("step", True, "step"),
    ("chain_head", "sha256:00", "chain_head"),
    ("result", "mismatch", "attestation.result"),
    ("unit", "whole-run", "attestation.unit"),
    ("start.kind", "somewhere", "attestation.start"),
    ("machine.swapped", "no", "attestation.machine"),
    ("duration_s", float("nan"), "attestation.duration_s"),
    ("tools", {"python": "3"}, "attestation.tools"),
    ("auditor.name", " ", "auditor"),
    ("auditor.public_key", "ssh-rsa AAAA", "auditor"),
    ("created_at", "2026-12-01 10:00:00", "created_at"),
    ("created_at", "2026-13-01T10:00:00Z", "created_at"),
    ("signature", "not armored", "signature"),
]


@pytest.mark.parametrize(("path", "value", "rule"), MALFORMED)
def test_malformed_records_are_refused_by_rule(fresh: tuple[Store, Chain], path: str,
                                               value: Any, rule: str) -> None:
    store, chain = fresh
    bad = _broken(chain.published(4), path, value)
    with pytest.raises(InputError, match=rf"^in\.jsonl:record 1: {rule}: "):
        add_records(store, [bad], source="in.jsonl")


def test_more_refusals_name_their_rule(fresh: tuple[Store, Chain]) -> None:
    store, chain = fresh
    cases = [
        (_broken(chain.published(4), "start.step", 2), "attestation.start"),
        (_broken(chain.initial(), "step", 3), "attestation.start"),
        (_broken(chain.published(4), "unit", "initial-state"), "attestation.unit"),
        (_broken(chain.claim(0, 3, who="x", made=NOW), "last_step", 1)
         | {"first_step": 2}, "claim.steps"),
        (_broken(chain.claim(0, 3, who="x", made=NOW), "expires_at", "2020-01-01T00:00:00Z"),
         "claim.expires_at"),
        (_broken(chain.offer(chain.initial()), "state_digest", "x"), "checkpoint.state_digest"),
        (_broken(chain.offer(chain.initial()), "loss", float("inf")), "checkpoint.loss"),
        ([1, 2], "object"),
    ]
    for bad, rule in cases:
        with pytest.raises(InputError, match=rf": {rule}: "):
            add_records(store, [bad], source="f")


def test_records_are_checked_against_the_chain(fresh: tuple[Store, Chain]) -> None:
    store, chain = fresh
    wrong = _broken(chain.published(4), "expected", chain.state[5])
    wrong["state_hash"] = chain.state[5]
    with pytest.raises(InputError, match="expected: .* is not the chain's state_hash of step 4"):
        add_records(store, [wrong], source="f")
    with pytest.raises(InputError, match="step: run 'tiny' has no step 40"):
        add_records(store, [chain.claim(30, 40, who="x", made=NOW)], source="f")
    with pytest.raises(InputError, match="run: no run named 'nope'"):
        add_records(store, [_broken(chain.initial(), "run", "nope")], source="f")


def test_a_signed_record_needs_the_signature_module(fresh: tuple[Store, Chain]) -> None:
    store, chain = fresh
    signed = {**chain.initial(), "signature": "-----BEGIN SSH SIGNATURE-----\nAAAA\n"
              "-----END SSH SIGNATURE-----\n"}
    try:
        import lineage.audit.sshsig  # noqa: F401
    except ModuleNotFoundError:
        with pytest.raises(InputError, match="signature: a signed record needs "
                           "lineage.audit.sshsig"):
            add_records(store, [signed], source="f")
    else:  # the module is there: a signature that is not valid is refused by name
        with pytest.raises(InputError, match="signature"):
            add_records(store, [signed], source="f")


# -- the commands ------------------------------------------------------------------------


@pytest.fixture
def cli_audited(fresh: tuple[Store, Chain], tmp_path: Path) -> tuple[Cli, Store, Chain, Path]:
    store, chain = fresh
    records = ledger(chain)
    jsonl = tmp_path / "records.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records[:10]))
    (tmp_path / "records.json").write_text(json.dumps(records[10:]))
    return Cli(store.root), store, chain, tmp_path


def test_record_then_status_show_who(cli_audited: tuple[Cli, Store, Chain, Path]) -> None:
    cli, store, chain, folder = cli_audited
    added = cli.json("audit", "record", str(folder / "records.jsonl"),
                     str(folder / "records.json"))
    assert len(added["added"]) == 26 and added["present"] == []
    again = cli.json("audit", "record", str(folder / "records.json"))
    assert again["added"] == [] and len(again["present"]) == 16
    status = cli.json("audit", "status", RUN)
    assert status == json.loads(store.audit_status(RUN).to_json())
    assert status["steps_verified"] == 9 and status["intervals"]["confirmed"] == 1
    text = cli("audit", "status", RUN).stdout
    assert "1 confirmed" in text and "step 0 (ann) -> step 1 (bob)" in text
    assert "inconclusive steps 17" in text
    shown = cli.json("audit", "show", RUN, "--step", "8")
    assert shown == json.loads(store.audit_step(RUN, 8).to_json())
    assert shown["status"] == "disputed" and len(shown["attestations"]) == 2
    who = cli.json("audit", "who", RUN)
    assert who == json.loads(store.audit_who(RUN).to_json())
    names = [p["name"] for p in who["participants"]]
    assert names == sorted(names) == ["ann", "bob", "cat", "dan", "eve", "fay", "gus"]


def test_claim_makes_a_visible_claim(cli_audited: tuple[Cli, Store, Chain, Path]) -> None:
    cli, store, _, _ = cli_audited
    made = cli.json("audit", "claim", RUN, "--steps", "8-15", "--auditor", "hal",
                    "--expires", "2d", "--payout", "lnurl1dp68gurn8ghj7<&>")
    assert made["added"] is True and made["id"] == R.record_id(made["record"])
    assert made["record"]["first_step"] == 8 and made["record"]["last_step"] == 15
    assert made["record"]["auditor"]["payout"] == "lnurl1dp68gurn8ghj7<&>"
    status = store.audit_status(RUN)
    assert status.intervals.claimed == 2 and status.next_unclaimed[0] == 0
    assert cli.json("audit", "show", RUN, "--step", "9")["claimed_by"] == ["hal"]
    who = {p["name"]: p["payouts"] for p in cli.json("audit", "who", RUN)["participants"]}
    assert who == {"hal": ["lnurl1dp68gurn8ghj7<&>"]}
    assert cli("audit", "who", RUN).stdout.splitlines()[-1].split("│")[-1].strip() == \
        "lnurl1dp68gurn8ghj7<&>"
    page = cli("audit", "report", RUN, "--format", "html").stdout
    assert "<td>lnurl1dp68gurn8ghj7&lt;&amp;&gt;</td></tr>" in page  # escaped, in its row


@pytest.mark.parametrize(("args", "message"), [
    (("audit", "claim", RUN, "--steps", "9-3", "--auditor", "a"), "ends before it starts"),
    (("audit", "claim", RUN, "--steps", "1-2", "--auditor", "a", "--expires", "soon"),
     "--expires 'soon'"),
    (("audit", "claim", RUN, "--steps", "1-99", "--auditor", "a"), "has no step 99"),
    (("audit", "show", RUN, "--step", "32"), "has no step 32"),
    (("audit", "status", "nope"), "no run named 'nope'"),
])
def test_command_errors_are_one_line_exit_2(cli_audited: tuple[Cli, Store, Chain, Path],
                                            args: tuple[str, ...], message: str) -> None:
    cli, *_ = cli_audited
    result = cli(*args, code=2)
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_a_bad_file_is_named_with_its_line(cli_audited: tuple[Cli, Store, Chain, Path]) -> None:
    cli, _, chain, folder = cli_audited
    bad = folder / "bad.jsonl"
    bad.write_text(json.dumps(chain.initial()) + "\n{not json\n")
    result = cli("audit", "record", str(bad), code=2)
    assert f"{bad}:line 2: json: not JSON" in result.stderr
    wrong = folder / "wrong.jsonl"
    wrong.write_text(json.dumps({**chain.initial(), "result": "mismatch"}) + "\n")
    result = cli("audit", "record", str(wrong), code=2)
    assert f"{wrong}:record 1: attestation.result: " in result.stderr
