"""An interval confirmed the way volunteers confirm one (and `make demo` shows): each
replays one step with the trainer's own replay function, relaying from the state the
previous one saved; the ledger then travels as a bundle and says the same there."""

from __future__ import annotations

from pathlib import Path

from ..conftest import EXAMPLES, Cli
from .audit_run import EVERY, RUN, copy_store

REPLAYER = f"{EXAMPLES / 'tiny_run.py'}:replay"



def _relay(cli: Cli, tmp_path: Path, steps: range, auditors: list[str]) -> None:
    previous: Path | None = None
    for step, who in zip(steps, auditors, strict=True):
        saved = tmp_path / f"relay-{step}"
        args = ["audit", "replay", RUN, "--step", str(step), "--replayer", REPLAYER,
                "--auditor", who, "--save", str(saved)]
        if previous is not None:
            args += ["--from", str(previous)]
        replayed = cli.json(*args)
        assert replayed["attestation"]["result"] == "match"
        previous = saved


def test_four_relayed_replays_confirm_an_interval_and_travel_in_a_bundle(
        base: Path, tmp_path: Path) -> None:
    store = copy_store(base, tmp_path / "store")
    cli = Cli(store.root)
    _relay(cli, tmp_path, range(EVERY, 2 * EVERY), ["ada", "ben", "cy", "dee"])
    status = cli.json("audit", "status", RUN)
    assert status["intervals"]["confirmed"] == 1 and status["steps_verified"] == EVERY
    assert [[(link["step"], link["auditor"]) for link in chain] for chain in status["relays"]] \
        == [[(4, "ada"), (5, "ben"), (6, "cy"), (7, "dee")]]
    assert status["per_interval"][0] == {"interval": 1, "first_step": 4, "last_step": 7,
                                         "status": "confirmed", "verified": 4}
    assert [p["name"] for p in cli.json("audit", "who", RUN)["participants"]] == \
        ["ada", "ben", "cy", "dee"]

    cli("audit", "export", RUN, "-o", str(tmp_path / "ledger.zip"))
    other = copy_store(base, tmp_path / "other")
    imported = Cli(other.root).json("audit", "import", str(tmp_path / "ledger.zip"))
    assert len(imported["added"]) == 8  # four attestations, four relay checkpoints
    assert Cli(other.root).json("audit", "status", RUN) == status


def test_a_tampered_relay_checkpoint_breaks_the_relay_before_anything_runs(
        base: Path, tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    store = copy_store(base, tmp_path / "store")
    cli = Cli(store.root)
    _relay(cli, tmp_path, range(EVERY, EVERY + 1), ["ada"])
    weights = tmp_path / "relay-4" / "model.safetensors"
    tensors = load_file(str(weights))
    name = sorted(tensors)[0]
    tensors[name].flat[0] += 1
    save_file(tensors, str(weights))
    result = cli("audit", "replay", RUN, "--step", "5", "--replayer", REPLAYER, "--auditor",
                 "ben", "--from", str(tmp_path / "relay-4"), code=None)
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "relay-4" in result.stderr and result.stderr.count("\n") == 1
    assert cli.json("audit", "status", RUN)["steps_verified"] == 1


def test_replays_and_claims_signed_with_an_ssh_key_verify_with_ssh_keygen(
        base: Path, tmp_path: Path) -> None:
    from lineage.audit import sshsig
    from lineage.audit.records import canonical_bytes, record_id

    from .audit_helpers import make_key, public_line, ssh_verify

    store = copy_store(base, tmp_path / "store")
    cli = Cli(store.root)
    (tmp_path / "keys").mkdir()
    key = make_key(tmp_path / "keys", "ada")
    claimed = cli.json("audit", "claim", RUN, "--steps", "4-7", "--auditor", "ada",
                       "--sign-key", str(key))["record"]
    replayed = cli.json("audit", "replay", RUN, "--step", "4", "--replayer", REPLAYER,
                        "--auditor", "ada", "--save", str(tmp_path / "relay-4"),
                        "--sign-key", str(key))
    attestation, offered = replayed["attestation"], replayed["checkpoint"]
    assert offered["attestation"] == record_id(attestation)  # signing kept the ids
    allowed = f"ada {public_line(key)}\n"
    for record in (claimed, attestation, offered):
        assert record["auditor"]["public_key"] == public_line(key)
        assert sshsig.verify_record(record)
        checked = ssh_verify(allowed, "ada", record["signature"], canonical_bytes(record),
                             tmp_path)
        assert checked.returncode == 0, checked.stderr
    shown = cli.json("audit", "show", RUN, "--step", "4")
    assert [a["signature"] for a in shown["attestations"]] == [attestation["signature"]]
    assert cli.json("audit", "status", RUN)["steps_verified"] == 1
