"""ONNX numerics of a converted model: `exp compare-outputs` (the per-layer error table) and
`exp ort-sweep` (one model under varied session settings), on real models built with
onnx.helper and run by onnxruntime."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from lineage.exp.ort_session import session_settings
from lineage.exp.ort_sweep import LEVELS, MODES, _differences
from tests.conftest import Cli

LAYERS = 4
Models = tuple[Path, Path, Path, list[np.ndarray], list[np.ndarray]]  # A, B, input, weights


def _weights() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [(rng.standard_normal((16, 16)) * 0.5).astype(np.float32) for _ in range(LAYERS)]


def mlp(weights: list[np.ndarray]) -> onnx.ModelProto:
    """x -> (MatMul W_i -> Tanh) x 4 -> y: values h0, t0, ..., h3, t3, y."""
    nodes, previous = [], "x"
    for i in range(LAYERS):
        nodes += [helper.make_node("MatMul", [previous, f"W{i}"], [f"h{i}"]),
                  helper.make_node("Tanh", [f"h{i}"], [f"t{i}"])]
        previous = f"t{i}"
    nodes.append(helper.make_node("Identity", [previous], ["y"]))
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])],
        [numpy_helper.from_array(w, f"W{i}") for i, w in enumerate(weights)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _fp16(w: np.ndarray) -> np.ndarray:
    return w.astype(np.float16).astype(np.float32)


def _forward(weights: list[np.ndarray], x: np.ndarray) -> dict[str, np.ndarray]:
    values, h = {}, x.astype(np.float64)
    for i, w in enumerate(weights):
        values[f"h{i}"] = h @ w.astype(np.float64)
        h = values[f"t{i}"] = np.tanh(values[f"h{i}"])
    return values


@pytest.fixture
def models(tmp_path: Path) -> Models:
    weights = _weights()
    converted = list(weights)
    converted[2] = _fp16(weights[2])  # one layer's weights at float16 precision
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save_model(mlp(weights), str(a))
    onnx.save_model(mlp(converted), str(b))
    x = np.random.default_rng(8).standard_normal((2, 16)).astype(np.float32)
    inputs = tmp_path / "x.npy"
    np.save(inputs, x)
    return a, b, inputs, weights, converted


def test_the_error_jumps_at_the_layer_rounded_to_float16(models: Models, tmp_path: Path) -> None:
    a, b, inputs, weights, converted = models
    result = Cli(tmp_path / "store").json("exp", "compare-outputs", str(a), str(b),
                                          "--input", str(inputs))
    rows = {row["value"]: row for row in result["layers"]}
    assert [row["value"] for row in result["layers"]] == [
        *(f"{kind}{i}" for i in range(LAYERS) for kind in "ht"), "y"]
    assert result["first_jump"] == "h2"
    assert all(rows[v]["rel_error"] == 0 for v in ("h0", "t0", "h1", "t1"))
    assert rows["h2"]["jump"] and rows["h2"]["growth"] is None  # from exact agreement
    # the figure is max|a-b| / max|a|, checked against a float64 forward pass of both
    x = np.load(inputs)
    va, vb = _forward(weights, x)["h2"], _forward(converted, x)["h2"]
    expected = np.max(np.abs(va - vb)) / np.max(np.abs(va))
    assert rows["h2"]["rel_error"] == pytest.approx(expected, rel=0.05)
    assert rows["t2"]["growth"] == pytest.approx(rows["t2"]["rel_error"] /
                                                 rows["h2"]["rel_error"])
    text = Cli(tmp_path / "store")("exp", "compare-outputs", str(a), str(b),
                                   "--input", str(inputs)).stdout
    assert "first jump" in text and "max|a-b| / max|a|" in text


def test_jump_ratio_decides_which_growth_is_a_jump(models: Models, tmp_path: Path) -> None:
    a, _, inputs, weights, _ = models
    coarse = list(weights)
    coarse[0] = _fp16(weights[0])  # a small error from the first layer on
    coarse[2] = np.round(weights[2] * 4) / 4  # then a large one
    b = tmp_path / "coarse.onnx"
    onnx.save_model(mlp(coarse), str(b))
    cli = Cli(tmp_path / "store")
    result = cli.json("exp", "compare-outputs", str(a), str(b), "--input", str(inputs))
    assert result["first_jump"] == "h0"
    assert [r["value"] for r in result["layers"] if r["jump"]] == ["h0", "h2"]
    growth = next(r["growth"] for r in result["layers"] if r["value"] == "h2")
    strict = cli.json("exp", "compare-outputs", str(a), str(b), "--input", str(inputs),
                      "--jump-ratio", str(growth * 2))
    assert [r["value"] for r in strict["layers"] if r["jump"]] == ["h0"]


def test_inputs_are_never_unpickled_and_must_match_the_graph(models: Models,
                                                             tmp_path: Path) -> None:
    a, b, _, _, _ = models
    cli = Cli(tmp_path / "store")
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    result = cli("exp", "compare-outputs", str(a), str(b), "--input", str(objects), code=2)
    assert "objects.npy" in result.stderr and "pickle" in result.stderr
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, z=np.zeros((2, 16), np.float32))
    result = cli("exp", "compare-outputs", str(a), str(b), "--input", str(wrong), code=2)
    assert "no array for graph input x" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_onnxruntime_missing_exits_2_with_how_to_install(
        models: Models, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, inputs, _, _ = models
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import raises ImportError
    cli = Cli(tmp_path / "store")
    for args in (("compare-outputs", str(a), str(b)), ("ort-sweep", str(a))):
        result = cli("exp", *args, "--input", str(inputs), code=2)
        assert "pip install onnx onnxruntime" in result.stderr


def test_sweep_covers_levels_and_modes_as_the_sessions_report_them(models: Models,
                                                                   tmp_path: Path) -> None:
    a, _, inputs, _, _ = models
    result = Cli(tmp_path / "store").json("exp", "ort-sweep", str(a), "--input", str(inputs),
                                          "--intra-threads", "1")
    seen = [(r["settings"]["graph_optimization_level"], r["settings"]["execution_mode"])
            for r in result["settings"]]
    assert seen == [(level, mode) for level in LEVELS for mode in MODES]
    assert {r["settings"]["intra_op_num_threads"] for r in result["settings"]} == {1}
    first = result["settings"][0]
    assert (first["max_abs_diff"], first["rel_diff"]) == (0.0, 0.0)
    # every row's figure against outputs run here under the same settings
    x = {"x": np.load(inputs)}
    ref = _run(a, x, "ORT_DISABLE_ALL", "ORT_SEQUENTIAL")
    out = _run(a, x, "ORT_ENABLE_ALL", "ORT_PARALLEL")
    row = result["settings"][seen.index(("ORT_ENABLE_ALL", "ORT_PARALLEL"))]
    assert row["max_abs_diff"] == pytest.approx(float(np.max(np.abs(out - ref))), abs=1e-12)


def _run(model: Path, feeds: dict[str, np.ndarray], level: str, mode: str) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.execution_mode = getattr(ort.ExecutionMode, mode)
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, feeds)[0], dtype=np.float64)


def test_differences_follow_the_stated_formula() -> None:
    reference = [np.array([2.0, -4.0]), np.array([1.0, 1.0])]
    outputs = [np.array([2.5, -4.0]), np.array([1.0, 1.25])]
    # output 0: 0.5 abs, 0.5 / 4 rel; output 1: 0.25 abs, 0.25 / 1 rel; the largest of each
    assert _differences(outputs, reference) == {"max_abs_diff": 0.5, "rel_diff": 0.25,
                                                "note": None}


def test_session_settings_are_read_back_from_the_session(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save_model(mlp(_weights()), str(path))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    options.intra_op_num_threads, options.inter_op_num_threads = 2, 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    assert session_settings(session) == {
        "graph_optimization_level": "ORT_ENABLE_BASIC", "execution_mode": "ORT_PARALLEL",
        "intra_op_num_threads": 2, "inter_op_num_threads": 3}
