"""Graph partition from the graph alone: `inspect --supported-ops FILE | --provider NAME`.

Models come from onnx.helper and are saved by onnx; the node edges our reader keeps are
checked against onnx.load's; the CPU provider's one piece is checked against ONNX Runtime's
own verbose placement log.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from lineage.errors import InputError
from lineage.formats.onnx_partition import partition_graph, read_supported_ops
from lineage.formats.onnx_reader import read_onnx
from tests.conftest import Cli


def _model(nodes: list[onnx.NodeProto], inputs: list[str], outputs: list[str],
           weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in outputs],
        [numpy_helper.from_array(a, n) for n, a in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def chain_model() -> onnx.ModelProto:
    """MatMul-Add-Relu-MatMul-Add: the example docs/reports.md shows."""
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h1"]),
             helper.make_node("Add", ["h1", "B1"], ["a1"]),
             helper.make_node("Relu", ["a1"], ["r1"]),
             helper.make_node("MatMul", ["r1", "W2"], ["h2"]),
             helper.make_node("Add", ["h2", "B2"], ["y"])]
    rng = np.random.default_rng(0)
    weights = {"W1": rng.standard_normal((4, 4)).astype(np.float32),
               "B1": np.ones(4, np.float32),
               "W2": rng.standard_normal((4, 4)).astype(np.float32),
               "B2": np.ones(4, np.float32)}
    return _model(nodes, ["x"], ["y"], weights)


def _save(model: onnx.ModelProto, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    onnx.save_model(model, str(path))
    return path


def _ops(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ops.txt"
    path.write_text(text, encoding="utf-8")
    return path


def test_chain_with_only_matmul_supported(tmp_path: Path) -> None:
    model = _save(chain_model(), tmp_path / "m")
    ops = _ops(tmp_path, "# what the provider runs\nMatMul   # and nothing else\n\n")
    cli = Cli(tmp_path / "store")
    graph = cli.json("inspect", str(model), "--supported-ops", str(ops))["partition"]
    assert graph["ops"] == ["MatMul"]
    [counts] = graph["graphs"]
    assert (counts["pieces"], counts["transfers"]) == (5, 4)
    assert (counts["supported_pieces"], counts["unsupported_pieces"]) == (2, 3)
    assert counts["crossings"] == 3  # Add -> Relu stays on the CPU
    assert counts["unsupported_ops"] == {"Add": 2, "Relu": 1}
    text = cli("inspect", str(model), "--supported-ops", str(ops)).stdout
    assert "model.onnx: 5 pieces" in text and "4 transfers" in text


def test_parallel_supported_nodes_share_one_piece(tmp_path: Path) -> None:
    """Two MatMuls on separate branches are not connected, yet one wave takes both."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["a"]),
             helper.make_node("MatMul", ["x", "W"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["y"])]
    path = _save(_model(nodes, ["x"], ["y"], {"W": np.eye(4, dtype=np.float32)}), tmp_path)
    result = partition_graph(read_onnx(path, nodes=True).nodes, {"MatMul"}.__contains__)
    assert (result.pieces, result.supported_pieces, result.transfers) == (2, 1, 2)


def test_a_supported_node_behind_an_unsupported_one_starts_a_new_piece(tmp_path: Path) -> None:
    """S1 -> U -> S2 with S1 -> S2 too: S2 joining S1's piece would make a cycle."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["s1"]),
             helper.make_node("Relu", ["s1"], ["u"]),
             helper.make_node("Add", ["s1", "u"], ["y"])]
    path = _save(_model(nodes, ["x"], ["y"], {"W": np.eye(4, dtype=np.float32)}), tmp_path)
    result = partition_graph(read_onnx(path, nodes=True).nodes,
                             {"MatMul", "Add"}.__contains__)
    assert (result.pieces, result.supported_pieces) == (3, 2)
    # s1 to Relu's piece and to Add's, u to Add's; s1 to Add stays on the provider
    assert (result.transfers, result.crossings) == (3, 2)


def test_cpu_provider_is_one_piece_as_onnxruntime_places_it(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    import onnxruntime as ort
    model = _save(chain_model(), tmp_path / "m")
    cli = Cli(tmp_path / "store")
    [counts] = cli.json("inspect", str(model), "--provider", "CPUExecutionProvider"
                        )["partition"]["graphs"]
    assert (counts["pieces"], counts["transfers"]) == (1, 0)
    capfd.readouterr()
    options = ort.SessionOptions()
    options.log_severity_level = 0  # verbose: the session logs where each node went
    ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    log = capfd.readouterr().err
    assert "All nodes placed on [CPUExecutionProvider]" in log


def test_reader_keeps_node_edges_as_onnx_load_has_them(tmp_path: Path) -> None:
    path = _save(chain_model(), tmp_path)
    oracle = onnx.load(str(path))
    ours = read_onnx(path, nodes=True).nodes
    assert [(n.op_type, n.inputs, n.outputs) for n in ours] == [
        (n.op_type, tuple(n.input), tuple(n.output)) for n in oracle.graph.node]
    assert read_onnx(path).nodes == ()  # only when asked for


def test_cycle_is_refused(tmp_path: Path) -> None:
    nodes = [helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])]
    path = _save(_model(nodes, ["x"], ["a"], {}), tmp_path)
    with pytest.raises(InputError, match="graph-cycle"):
        partition_graph(read_onnx(path, nodes=True).nodes, lambda op: True, path=path)


def test_bad_options_and_files_exit_2_with_one_line(tmp_path: Path) -> None:
    model = _save(chain_model(), tmp_path / "m")
    cli = Cli(tmp_path / "store")
    empty = _ops(tmp_path, "# nothing\n")
    result = cli("inspect", str(model), "--supported-ops", str(empty), code=2)
    assert "lists no op type" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    result = cli("inspect", str(model), "--provider", "CUDAExecutionProvider", code=2)
    assert "--supported-ops" in result.stderr
    ops = _ops(tmp_path, "MatMul\n")
    cli("inspect", str(model), "--provider", "CPU", "--supported-ops", str(ops), code=2)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}", encoding="utf-8")
    result = cli("inspect", str(tmp_path / "empty"), "--provider", "CPU", code=2)
    assert "no .onnx file" in result.stderr


def test_ops_file_with_two_words_on_a_line_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="line 2"):
        read_supported_ops(_ops(tmp_path, "MatMul\nAdd Relu\n"))
