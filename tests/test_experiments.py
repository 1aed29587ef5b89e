"""Experiment records: the gate in front of real commands, providers requested vs
obtained, diff, and self-verifying bundles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from safetensors.numpy import save_file

from lineage.api import Store
from lineage.errors import InputError
from lineage.exp.bundle import export_bundle, import_bundle
from lineage.exp.compare import diff_records
from lineage.exp.gate import run_experiment
from lineage.exp.providers import check_providers
from lineage.exp.records import get_record, list_records, save_record

from .conftest import Cli

# A real command: loads the ONNX model with the requested providers, runs a fixed input,
# reads the safetensors weights, and reports what it obtained.
RUNNER = r'''
import hashlib, json, os, sys
import numpy as np
import onnxruntime as ort
from safetensors.numpy import load_file
from lineage.exp.providers import record_providers
folder = os.environ["LINEAGE_EXP_WEIGHTS"]
requested = sys.argv[1].split(",")
session = ort.InferenceSession(os.path.join(folder, "model.onnx"), providers=requested)
weights = load_file(os.path.join(folder, "model.safetensors"))
x = np.arange(8, dtype=np.float32).reshape(1, 8)
y = session.run(None, {"x": x})[0] + weights["bias"].sum()
record_providers(session, requested, first_load="ok",
                 output_digest="sha256:" + hashlib.sha256(y.tobytes()).hexdigest())
print("output", y.ravel()[:3])
'''


def _onnx_model(path: Path) -> None:
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 4], np.linspace(-1, 1, 32).tolist())
    b = helper.make_tensor("b", TensorProto.FLOAT, [4], [0.1, 0.2, 0.3, 0.4])
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["z"]),
         helper.make_node("Relu", ["z"], ["y"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))


@pytest.fixture
def weights(tmp_path: Path) -> Path:
    folder = tmp_path / "weights"
    folder.mkdir()
    save_file({"bias": np.full(4, 0.5, np.float32), "proj": np.eye(4, dtype=np.float32)},
              str(folder / "model.safetensors"), metadata={"format": "np"})
    _onnx_model(folder / "model.onnx")
    (folder / "config.json").write_text('{"model_type": "tiny"}')
    return folder


def _sums(folder: Path) -> Path:
    listing = subprocess.run(["sha256sum", "model.safetensors", "model.onnx", "config.json"],
                             cwd=folder, capture_output=True, text=True, check=True).stdout
    path = folder.parent / "SHA256SUMS"
    path.write_text(listing)
    return path


def _command(tmp_path: Path, providers: str = "CPUExecutionProvider") -> list[str]:
    script = tmp_path / "runner.py"
    script.write_text(RUNNER)
    return [sys.executable, str(script), providers]


def test_a_passing_experiment_records_everything(weights: Path, tmp_path: Path) -> None:
    record = run_experiment(weights=weights, revision="abc123", sums=_sums(weights),
                            quantization="none", source="file://mirror", name="first",
                            command=_command(tmp_path))
    assert record["outcome"] == "passed" and record["failure"] is None
    assert [(c["name"], c["exit_code"]) for c in record["checks"]] == [
        ("structure", 0), ("risks", 0), ("checksums", 0)]
    files = {f["path"]: f for f in record["weights"]["files"]}
    assert set(files) == {"model.safetensors", "model.onnx", "config.json"}
    assert files["config.json"]["size"] == 22
    assert record["command"]["exit_code"] == 0 and record["command"]["stdout"]["bytes"] > 0
    assert record["command"]["stdout"]["blake3"].startswith("blake3:")
    assert record["report"]["first_load"] == "ok"
    assert record["report"]["output_digest"].startswith("sha256:")
    assert record["report"]["providers"]["obtained"] == ["CPUExecutionProvider"]
    assert record["runtime"]["packages"]["onnxruntime"] and record["runtime"]["python"]
    assert record["host"]["cores"] >= 1 and record["host"]["memory_bytes"] > 0
    assert record["sums"]["text"].count("\n") == 3


@pytest.mark.parametrize(
    ("damage", "failure", "ran_checksums"),
    [
        (lambda f: (f / "model.safetensors").write_bytes(b"\x10\x00"), "short prefix", False),
        (lambda f: (f / "model.safetensors").write_bytes(
            (f / "model.safetensors").read_bytes()[:-8]), "corrupt shard", False),
        (lambda f: (f / "config.json").write_text('{"model_type": "other"}'), "hash mismatch",
         True),
        (lambda f: (f / "model.onnx").unlink(), "files missing", True),
        (lambda f: ((f / "model.onnx").unlink(), (f / "config.json").write_text("{}")),
         "hash mismatch and files missing", True),
        (lambda f: save_file({"x": np.zeros(2, np.float32)}, str(f / "extra.safetensors")),
         "index missing", False),
    ],
)
def test_the_gate_stops_at_the_first_failure_and_says_what_to_do(
    weights: Path, tmp_path: Path, damage: Any, failure: str, ran_checksums: bool
) -> None:
    sums = _sums(weights)
    damage(weights)
    marker = tmp_path / "ran"
    record = run_experiment(weights=weights, revision="r", sums=sums,
                            command=["touch", str(marker)])
    assert record["outcome"] == "check-failed"
    assert record["failure"]["type"] == failure and record["failure"]["action"]
    assert record["command"] is None and not marker.exists()  # never ran
    assert ("checksums" in [c["name"] for c in record["checks"]]) == ran_checksums


def test_requested_is_not_obtained(weights: Path, tmp_path: Path) -> None:
    report = check_providers(str(weights / "model.onnx"),
                             ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert report["obtained"] == ["CPUExecutionProvider"]
    assert report["fallback"] and report["missing"] == ["CUDAExecutionProvider"]
    assert "CPUExecutionProvider" in report["available"]
    command = _command(tmp_path, "CUDAExecutionProvider,CPUExecutionProvider")
    strict = run_experiment(weights=weights, revision="r", command=command)
    assert strict["outcome"] == "command-failed"
    assert strict["failure"]["type"] == "provider fallback"
    assert strict["command"]["exit_code"] == 0  # the silent fallback the gate catches
    allowed = run_experiment(weights=weights, revision="r", command=command,
                             allow_fallback=True)
    assert allowed["outcome"] == "passed"


def test_cli_providers_require(weights: Path, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "store")
    ok = cli.json("exp", "providers", str(weights / "model.onnx"),
                  "--request", "CPUExecutionProvider", "--require")
    assert ok["fallback"] is False
    fell = cli("exp", "providers", str(weights / "model.onnx"), "--request",
               "CUDAExecutionProvider,CPUExecutionProvider", "--require", code=1)
    assert "fallback   yes: CUDAExecutionProvider" in fell.stdout


SETTINGS_RUNNER = r'''
import os, sys
import onnxruntime as ort
from lineage.exp.providers import record_providers
options = ort.SessionOptions()
options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, sys.argv[1])
options.intra_op_num_threads = int(sys.argv[2])
session = ort.InferenceSession(os.path.join(os.environ["LINEAGE_EXP_WEIGHTS"], "model.onnx"),
                               options, providers=["CPUExecutionProvider"])
record_providers(session, ["CPUExecutionProvider"])
'''


def test_session_settings_are_recorded_and_diffed(weights: Path, tmp_path: Path) -> None:
    script = tmp_path / "settings.py"
    script.write_text(SETTINGS_RUNNER)
    a, b = (run_experiment(weights=weights, revision="r",
                           command=[sys.executable, str(script), level, threads])
            for level, threads in (("ORT_DISABLE_ALL", "1"), ("ORT_ENABLE_ALL", "1")))
    assert a["report"]["providers"]["session"] == {
        "graph_optimization_level": "ORT_DISABLE_ALL", "execution_mode": "ORT_SEQUENTIAL",
        "intra_op_num_threads": 1, "inter_op_num_threads": 0}
    changes = [c for c in diff_records(a, b)["changes"] if c["field"] == "session"]
    assert changes == [{"field": "session", "key": "graph_optimization_level",
                        "a": "ORT_DISABLE_ALL", "b": "ORT_ENABLE_ALL"}]


def _other_packages(tmp_path: Path) -> dict[str, str]:
    """A real, different package set: a distribution the lineage process can see."""
    site = tmp_path / "extra-site"
    info = site / "vllm-0.0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.1\n")
    return {"PYTHONPATH": str(site)}


def test_records_store_diff_and_travel(store: Store, weights: Path, tmp_path: Path) -> None:
    cli = Cli(store.root)
    sums = _sums(weights)
    first = json.loads(cli("exp", "run", "--weights", str(weights), "--revision", "abc",
                           "--sums", str(sums), "--name", "machine-a", "--json", "--",
                           *_command(tmp_path)).stdout)
    env = {**os.environ, **_other_packages(tmp_path)}
    second = subprocess.run(
        [sys.executable, "-m", "lineage.cli", "--store", str(store.root), "exp", "run",
         "--weights", str(weights), "--revision", "abc", "--sums", str(sums), "--name",
         "machine-b", "--json", "--", *_command(tmp_path)],
        capture_output=True, text=True, env=env)
    assert second.returncode == 0, second.stderr
    b = json.loads(second.stdout)
    assert b["runtime"]["packages"]["vllm"] == "0.0.1"
    assert "vllm" not in first["runtime"]["packages"]
    listed = cli.json("exp", "list")
    assert [r["name"] for r in listed] == ["machine-a", "machine-b"]
    diff = cli.json("exp", "diff", first["id"], b["id"], code=1)
    assert {"field": "packages", "key": "vllm", "a": None, "b": "0.0.1"} in diff["changes"]
    same = diff_records(get_record(store, first["id"]), get_record(store, first["id"]))
    assert same["same"]
    shown = cli.json("exp", "show", "machine-a")
    assert shown["id"] == first["id"] and shown["revision"] == "abc"

    bundle = tmp_path / "records.zip"
    cli("exp", "export", first["id"], b["id"], "-o", str(bundle))
    elsewhere = Cli(tmp_path / "other-store")
    elsewhere("init")
    imported = elsewhere.json("exp", "import", str(bundle))
    assert sorted(imported["added"]) == sorted([first["id"], b["id"]])
    again = elsewhere.json("exp", "import", str(bundle))
    assert again["added"] == [] and len(again["already_present"]) == 2
    assert elsewhere.json("exp", "show", first["id"])["sums"]["text"] == sums.read_text()


def test_a_tampered_bundle_is_refused(store: Store, weights: Path, tmp_path: Path) -> None:
    record = run_experiment(weights=weights, revision="r", command=["true"])
    exp_id, _ = save_record(store, record)
    bundle = tmp_path / "b.zip"
    export_bundle(store, [exp_id], bundle)
    with zipfile.ZipFile(bundle) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    name = next(n for n in members if n.startswith("records/"))
    members[name] = members[name].replace(b'"revision":"r"', b'"revision":"x"')
    tampered = tmp_path / "t.zip"
    with zipfile.ZipFile(tampered, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    with pytest.raises(InputError, match="does not match the manifest"):
        import_bundle(store, tampered)
    assert len(list_records(store)) == 1
