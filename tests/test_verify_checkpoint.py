"""`lineage verify`, `lineage sums` and checkpoint ingest, on folders the real writers made."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from lineage.api import Store
from lineage.diligence.verify import safetensors_weights_digest, verify_folder
from lineage.ingest.checkpoint import ingest_checkpoint
from lineage.ingest.steps import ingest_steps

from .conftest import Cli
from .test_chain import WORLD, write_log


def _model(folder: Path, weights: dict[str, np.ndarray]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "np"})
    (folder / "config.json").write_text('{"hidden_size": 3}')
    return folder


def test_three_verdicts_are_reported_separately(tmp_path: Path) -> None:
    folder = _model(tmp_path / "m", {"w": np.ones((4, 3), np.float32)})
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(subprocess.run(["sha256sum", "model.safetensors", "config.json"],
                                   cwd=folder, capture_output=True, text=True).stdout)
    good = verify_folder(folder, sums=sums)
    assert good["ok"] and good["structure"]["ok"] and good["checksums"]["ok"]
    assert good["load"] == "not-tested"
    (folder / "config.json").write_text('{"hidden_size": 4}')  # content changed, structure fine
    changed = verify_folder(folder, sums=sums)
    assert changed["structure"]["ok"] and changed["checksums"]["ok"] is False
    assert not changed["ok"]
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[:-4])  # truncated: structure fails
    broken = verify_folder(folder)
    assert broken["structure"]["errors"][0]["rule"] in {"offsets", "coverage"}
    assert broken["checksums"]["ok"] is None


def test_cli_verify_and_sums(tmp_path: Path) -> None:
    folder = _model(tmp_path / "m", {"w": np.arange(12, dtype=np.float32).reshape(4, 3)})
    cli = Cli(tmp_path / "unused-store")
    listed = cli("sums", str(folder), "-o", str(folder / "SHA256SUMS"))
    assert listed.exit_code == 0
    check = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=folder,
                           capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.count(": OK") == 2
    ok = cli.json("verify", str(folder), "--sums", str(folder / "SHA256SUMS"))
    assert ok["structure"]["ok"] and ok["checksums"]["ok"] and ok["load"] == "not-tested"
    shutil.copy(folder / "model.safetensors", folder / "extra.safetensors")
    failed = cli.json("verify", str(folder), code=1)
    assert {e["rule"] for e in failed["structure"]["errors"]} >= {"duplicate-tensor"}
    missing = cli("verify", str(folder), "--sums", str(tmp_path / "nope"), code=2)
    assert "nope" in missing.stderr and missing.stderr.startswith("error: ")


def test_checkpoint_weights_digest_matches_the_chain(
    run_store: Store, tmp_path: Path  # noqa: F811
) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(6))
    ingest_steps(run_store, log, run="r", stream="s", world_size=WORLD)
    # write_log's weights after step k are w0 * 0.99**(k+1), in float32, step by step
    rng = np.random.Generator(np.random.Philox(1))
    w = rng.standard_normal((4, 3)).astype(np.float32)
    for _ in range(4):
        w = (w * 0.99).astype(np.float32)
    folder = _model(tmp_path / "ckpt-3", {"w": w})
    (folder / "config.json").unlink()
    assert safetensors_weights_digest(folder).startswith("blake3:")
    good = ingest_checkpoint(run_store, folder, run="r", step=3)
    assert good["matches_chain"] is True and good["status"] == "added"
    assert {f["format"] for f in good["files"]} == {"safetensors"}
    assert ingest_checkpoint(run_store, folder, run="r", step=3)["status"] == "unchanged"
    wrong = ingest_checkpoint(run_store, folder, run="r", step=4)
    assert wrong["matches_chain"] is False
    beyond = ingest_checkpoint(run_store, folder, run="r", step=50)
    assert beyond["matches_chain"] is None
    shown = Cli(run_store.root).json("run", "show", "r")
    assert [(c["step"], c["matches_chain"]) for c in shown["checkpoints"]] == [
        (3, True), (4, False), (50, None)]


def test_a_damaged_checkpoint_is_recorded_with_its_verdict(
    run_store: Store, tmp_path: Path  # noqa: F811
) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(2))
    ingest_steps(run_store, log, run="r", stream="s", world_size=WORLD)
    folder = _model(tmp_path / "bad", {"w": np.ones((2, 2), np.float32)})
    with open(folder / "model.safetensors", "ab") as handle:
        handle.write(b"\0" * 3)
    result = ingest_checkpoint(run_store, folder, run="r", step=1)
    assert result["verdicts"]["structure"]["ok"] is False
    assert result["weights_digest"] is None and result["matches_chain"] is None
    with pytest.raises(Exception, match="no run named"):
        ingest_checkpoint(run_store, folder, run="nope", step=1)


def test_optimizer_state_is_compared_and_its_names_are_checked(
    run_store: Store, tmp_path: Path  # noqa: F811
) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(4))
    ingest_steps(run_store, log, run="r", stream="s", world_size=WORLD)
    # write_log's state after step k: w0 * 0.99**(k+1); moments w * 0.5; gradients w * 0.01
    w = np.random.Generator(np.random.Philox(1)).standard_normal((4, 3)).astype(np.float32)
    for _ in range(3):
        w = (w * 0.99).astype(np.float32)
    folder = _model(tmp_path / "ckpt-2", {"w": w})
    (folder / "optimizer").mkdir()
    save_file({"optimizer/m": w * 0.5, "gradients/w": w * 0.01},
              str(folder / "optimizer" / "state.safetensors"))
    good = ingest_checkpoint(run_store, folder, run="r", step=2)
    assert (good["ok"], good["matches_chain"], good["matches_state"]) == (True, True, True)
    assert good["state_digest"] == good["chain_state_digest"]
    save_file({"optimizer/m": w * 0.5, "gradients/w": w * 0.01, "extra": w},
              str(folder / "optimizer" / "state.safetensors"))
    stray = ingest_checkpoint(run_store, folder, run="r", step=3)
    assert stray["ok"] is False and stray["state_digest"] is None
    assert stray["optimizer_errors"] == ["tensor 'extra' is not named optimizer/… or gradients/…"]
    stored = run_store.sql("SELECT step, matches_state, risks FROM checkpoints ORDER BY step").rows
    assert [(s, m) for s, m, _ in stored] == [(2, True), (3, None)]
    assert json.loads(stored[0][2]) == {"ok": True, "findings": [], "allowed": []}


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="no ssh-keygen")
def test_checkpoint_with_sums_key_fails_on_a_list_signed_by_another_key(
    run_store: Store, tmp_path: Path  # noqa: F811
) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(2))
    ingest_steps(run_store, log, run="r", stream="s", world_size=WORLD)
    folder = _model(tmp_path / "ckpt", {"w": np.ones((2, 2), np.float32)})
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(subprocess.run(["sha256sum", "model.safetensors", "config.json"],
                                   cwd=folder, capture_output=True, text=True,
                                   check=True).stdout)
    for name in ("release", "mallory"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                        str(tmp_path / name)], check=True)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"release {(tmp_path / 'release.pub').read_text()}")
    sign = ["ssh-keygen", "-Y", "sign", "-q", "-n", "file", "-f"]
    subprocess.run([*sign, str(tmp_path / "release"), str(sums)], check=True)
    cli = Cli(run_store.root)  # step 50 is past the chain: no digest to differ from
    good = cli.json("ingest", "checkpoint", str(folder), "--run", "r", "--step", "50",
                    "--sums", str(sums), "--sums-key", str(allowed))
    assert good["verdicts"]["authenticity"]["ok"] is True
    assert good["verdicts"]["authenticity"]["signer"] == "release"
    Path(f"{sums}.sig").unlink()
    subprocess.run([*sign, str(tmp_path / "mallory"), str(sums)], check=True)
    bad = cli("ingest", "checkpoint", str(folder), "--run", "r", "--step", "50",
              "--sums", str(sums), "--sums-key", str(allowed), code=1)
    assert "authenticity: FAILED (ssh: " in bad.stdout and "not-allowed" in bad.stdout
    assert "FAILED: the checkpoint is recorded" in bad.stdout
