"""ONNX structure reading with our own protobuf decoder, checked against the onnx package.

Fixtures come from the real writer (`onnx.helper`, `onnx.save_model`); malformed files are
derived from those real bytes or assembled from hand-written wire format. `onnx.load(...,
load_external_data=False)` serves as the oracle: for every model both accept, every field we
report must match what it reports.
"""

from __future__ import annotations

import math
import os
import pickle
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from lineage.errors import InputError
from lineage.formats.onnx_reader import (
    DATA_TYPES,
    RULES,
    ExternalData,
    OnnxInputError,
    OnnxModel,
    read_onnx,
)

# ---------------------------------------------------------------------------------------------
# Real models from onnx.helper


def mlp_model() -> onnx.ModelProto:
    """MatMul + Add + Relu with two float32 initializers: the smallest realistic model."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    weight = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "W")
    bias = numpy_helper.from_array(np.zeros(3, dtype=np.float32), "B")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("Add", ["h", "B"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "mlp", [x], [y], [weight, bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def mixed_dtype_model() -> onnx.ModelProto:
    """Initializers in several dtypes, stored raw and in the typed repeated fields."""
    f16 = np.array([1.0, -2.5, 3.25], dtype=np.float16)
    initializers = [
        numpy_helper.from_array(np.ones((8, 4), dtype=np.float32), "w_f32"),  # raw_data
        helper.make_tensor("w_f16", TensorProto.FLOAT16, [3], f16.view(np.uint16).tolist()),
        numpy_helper.from_array(np.arange(-5, 5, dtype=np.int8).reshape(2, 5), "w_i8"),
        helper.make_tensor("shape_i64", TensorProto.INT64, [4], [1, 2, -3, 2**40]),  # int64_data
        helper.make_tensor("scale_f64", TensorProto.DOUBLE, [], [0.5]),  # a scalar: no dims
        helper.make_tensor("mask", TensorProto.BOOL, [2, 2], [True, False, True, True]),
        helper.make_tensor("ids_u64", TensorProto.UINT64, [2], [7, 2**63]),  # uint64_data
        helper.make_tensor("labels", TensorProto.STRING, [2], [b"cat", b"horse"]),
        helper.make_tensor("empty", TensorProto.FLOAT, [0, 3], []),
    ]
    inputs = [
        helper.make_tensor_value_info("tokens", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("unranked", TensorProto.FLOAT, None),  # no shape field
        helper.make_tensor_value_info("pixels", TensorProto.FLOAT16, [1, 3, 224, 224]),
        helper.make_value_info(
            "history",
            helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2])),
        ),
        helper.make_value_info(
            "lookup",
            helper.make_map_type_proto(
                TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.DOUBLE, None)
            ),
        ),
    ]
    unknown_dim = helper.make_tensor_value_info("out", TensorProto.FLOAT, [None, 7])
    nodes = [
        helper.make_node("Gather", ["w_f32", "tokens"], ["g"]),
        helper.make_node("FusedMatMul", ["g", "w_f32"], ["f"], domain="com.microsoft"),
        helper.make_node("Relu", ["f"], ["r1"]),
        helper.make_node("Relu", ["r1"], ["out"]),
    ]
    graph = helper.make_graph(nodes, "mixed", inputs, [unknown_dim], initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
        producer_name="lineage-tests",
        producer_version="1.2.3",
    )
    helper.set_model_props(model, {"exporter": "hand", "license": "Apache-2.0"})
    return model


def save(model: onnx.ModelProto, path: Path) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


def save_external(folder: Path, *, size_threshold: int = 1024) -> Path:
    """The big weight goes to weights.bin; the 12-byte bias stays inline (below threshold)."""
    folder.mkdir(parents=True, exist_ok=True)
    model = mlp_model()
    big = numpy_helper.from_array(np.arange(256 * 3, dtype=np.float32).reshape(256, 3), "W")
    model.graph.initializer[0].CopyFrom(big)
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 256
    path = folder / "model.onnx"
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=True,
        location="weights.bin",
        size_threshold=size_threshold,
    )
    return path


def edit_external(path: Path, **entries: str | None) -> Path:
    """Rewrite the first external tensor's entries in place (None removes an entry)."""
    model = onnx.load(str(path), load_external_data=False)
    tensor = next(t for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL)
    current = {e.key: e.value for e in tensor.external_data}
    current.update(entries)
    del tensor.external_data[:]
    for key, value in current.items():
        if value is not None:
            tensor.external_data.add(key=key, value=value)
    return save(model, path)


def rule_of(path: Path, **kwargs: Any) -> str:
    with pytest.raises(OnnxInputError) as caught:
        read_onnx(path, **kwargs)
    assert caught.value.rule_id in RULES
    assert str(path) in str(caught.value)
    return caught.value.rule_id


# ---------------------------------------------------------------------------------------------
# The oracle: what onnx.load reports, in our result's shape


def oracle(path: Path, *, sizes: bool = True) -> dict[str, Any]:
    """What onnx reports; sizes=False leaves nbytes out (a mutated tensor may not convert)."""
    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    return {
        "ir_version": model.ir_version,
        "opset_import": tuple((o.domain, o.version) for o in model.opset_import),
        "producer_name": model.producer_name,
        "producer_version": model.producer_version,
        "metadata": {p.key: p.value for p in model.metadata_props},
        "graph_name": graph.name,
        "node_count": len(graph.node),
        "op_types": dict(Counter(map(op_key, graph.node))),
        "inputs": tuple(map(oracle_value_info, graph.input)),
        "outputs": tuple(map(oracle_value_info, graph.output)),
        "initializers": tuple(oracle_initializer(t, path.parent, sizes) for t in graph.initializer),
        "sparse_initializers": len(graph.sparse_initializer),
        "nodes": tuple((op_key(n), n.name, tuple(n.input), tuple(n.output)) for n in graph.node),
    }


def op_key(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"


def oracle_value_info(info: onnx.ValueInfoProto) -> tuple[Any, ...]:
    kind, elem, shape = oracle_type(info.type)
    return (info.name, kind, elem, shape)


def oracle_type(proto: onnx.TypeProto) -> tuple[str, str | None, Any]:
    which = proto.WhichOneof("value")
    if which in ("tensor_type", "sparse_tensor_type"):
        tensor = getattr(proto, which)
        shape = None
        if tensor.HasField("shape"):
            shape = tuple(oracle_dim(d) for d in tensor.shape.dim)
        return which.removesuffix("_type"), TensorProto.DataType.Name(tensor.elem_type), shape
    if which in ("sequence_type", "optional_type"):
        kind, elem, shape = oracle_type(getattr(proto, which).elem_type)
        return f"{which.removesuffix('_type')}<{kind}>", elem, shape
    if which == "map_type":
        kind, elem, shape = oracle_type(proto.map_type.value_type)
        key = TensorProto.DataType.Name(proto.map_type.key_type)
        return f"map<{key},{kind}>", elem, shape
    return (which or "").removesuffix("_type"), None, None


def oracle_dim(dim: onnx.TensorShapeProto.Dimension) -> int | str | None:
    if dim.HasField("dim_value"):
        return dim.dim_value
    if dim.HasField("dim_param"):
        return dim.dim_param
    return None


TYPED_FIELDS = (
    "float_data",
    "int32_data",
    "string_data",
    "int64_data",
    "double_data",
    "uint64_data",
)


def oracle_initializer(tensor: onnx.TensorProto, folder: Path, sizes: bool) -> tuple[Any, ...]:
    name = TensorProto.DataType.Name(tensor.data_type)
    elements = math.prod(tensor.dims)
    if tensor.data_location == TensorProto.EXTERNAL:
        entries = {e.key: e.value for e in tensor.external_data}
        size = (folder / entries["location"]).stat().st_size
        length = int(entries["length"]) if "length" in entries else None
        offset = int(entries.get("offset", 0))
        external = ExternalData(entries["location"], offset, length, size)
        nbytes = length if length is not None else size - offset
        return (tensor.name, name, tuple(tensor.dims), elements, nbytes, "external", external)
    if tensor.HasField("raw_data"):
        storage = "raw"
    elif any(len(getattr(tensor, f)) for f in TYPED_FIELDS):
        storage = "typed"
    else:
        storage = "none"
    if not sizes:
        nbytes = None
    elif tensor.data_type == TensorProto.STRING:
        nbytes = sum(map(len, tensor.string_data))
    else:  # numpy's own idea of the size: an independent count of the typed fields
        nbytes = numpy_helper.to_array(tensor).nbytes
    return (tensor.name, name, tuple(tensor.dims), elements, nbytes, storage, None)


def ours(path: Path, *, sizes: bool = True) -> dict[str, Any]:
    model = read_onnx(path, nodes=True)
    summary = {key: getattr(model, key) for key in oracle_keys()}
    summary["nodes"] = tuple((n.op_type, n.name, n.inputs, n.outputs) for n in model.nodes)
    summary["inputs"] = tuple(astuple(v) for v in model.inputs)
    summary["outputs"] = tuple(astuple(v) for v in model.outputs)
    summary["initializers"] = tuple(
        (
            t.name,
            t.data_type,
            t.dims,
            t.elements,
            t.nbytes if sizes else None,
            t.storage,
            t.external,
        )
        for t in model.initializers
    )
    return summary


def astuple(value: Any) -> tuple[Any, ...]:
    return (value.name, value.kind, value.elem_type, value.shape)


def oracle_keys() -> list[str]:
    return [
        "ir_version", "opset_import", "producer_name", "producer_version", "metadata",
        "graph_name", "node_count", "op_types", "sparse_initializers",
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Agreement with onnx.load on real models


def test_mlp_model_matches_onnx(tmp_path: Path) -> None:
    path = save(mlp_model(), tmp_path / "mlp.onnx")
    assert 150 < path.stat().st_size < 250  # the tiny model really is tiny
    assert ours(path) == oracle(path)
    model = read_onnx(path)
    assert model.op_types == {"MatMul": 1, "Add": 1, "Relu": 1}
    assert model.inputs[0].shape == ("batch", 4) and model.inputs[0].elem_type == "FLOAT"
    assert [(t.name, t.dims, t.nbytes, t.storage) for t in model.initializers] == [
        ("W", (4, 3), 48, "raw"),
        ("B", (3,), 12, "raw"),
    ]
    assert model.parameters == 15
    assert model.dtype_shares == {"FLOAT": 1.0}
    assert model.file_size == path.stat().st_size


def test_mixed_dtypes_match_onnx(tmp_path: Path) -> None:
    path = save(mixed_dtype_model(), tmp_path / "mixed.onnx")
    assert ours(path) == oracle(path)
    model = read_onnx(path)
    by_name = {t.name: t for t in model.initializers}
    assert by_name["w_f16"].storage == "typed" and by_name["w_f16"].nbytes == 6
    assert by_name["shape_i64"].storage == "typed" and by_name["shape_i64"].nbytes == 32
    assert by_name["scale_f64"].dims == () and by_name["scale_f64"].elements == 1
    assert by_name["labels"].expected_nbytes is None  # strings have no fixed size
    assert all(t.nbytes == t.expected_nbytes for t in model.initializers if t.name != "labels")
    assert model.op_types["com.microsoft:FusedMatMul"] == 1
    assert model.op_types["Relu"] == 2
    kinds = {v.name: (v.kind, v.elem_type, v.shape) for v in model.inputs}
    assert kinds["unranked"] == ("tensor", "FLOAT", None)
    assert kinds["history"] == ("sequence<tensor>", "FLOAT", (2,))
    assert kinds["lookup"] == ("map<INT64,tensor>", "DOUBLE", None)
    assert model.outputs[0].shape == (None, 7)
    assert model.metadata == {"exporter": "hand", "license": "Apache-2.0"}
    total = 32 + 3 + 10 + 4 + 1 + 4 + 2 + 2 + 0
    assert model.parameters == total
    assert model.dtype_shares["FLOAT"] == pytest.approx(32 / total)
    assert sum(model.dtype_shares.values()) == pytest.approx(1.0)
    assert list(model.dtype_shares)[0] == "FLOAT"  # largest share first


def test_more_dtypes_sizes(tmp_path: Path) -> None:
    """bfloat16 / float8 / int4 / complex: sizes as raw_data would hold them."""
    bf16 = helper.make_tensor("bf16", TensorProto.BFLOAT16, [5], [1.0, 2.0, 3.0, 4.0, 5.0])
    f8 = helper.make_tensor("f8", TensorProto.FLOAT8E4M3FN, [3], [1.0, 2.0, 0.5])
    int4 = helper.make_tensor("i4", TensorProto.INT4, [3], [1, -2, 3])  # two per int32 value
    int4_raw = helper.make_tensor("i4raw", TensorProto.INT4, [4], b"\x21\x43", raw=True)
    c64 = helper.make_tensor("c64", TensorProto.COMPLEX64, [2], [1 + 2j, 3 + 4j])
    u32 = helper.make_tensor("u32", TensorProto.UINT32, [3], [1, 2, 3])
    graph = helper.make_graph([], "g", [], [], [bf16, f8, int4, int4_raw, c64, u32])
    path = save(helper.make_model(graph), tmp_path / "dtypes.onnx")
    model = read_onnx(path)
    sizes = {
        t.name: (t.data_type, t.storage, t.nbytes, t.expected_nbytes) for t in model.initializers
    }
    assert sizes == {
        "bf16": ("BFLOAT16", "typed", 10, 10),
        "f8": ("FLOAT8E4M3FN", "typed", 3, 3),
        "i4": ("INT4", "typed", 2, 2),
        "i4raw": ("INT4", "raw", 2, 2),
        "c64": ("COMPLEX64", "typed", 16, 16),
        "u32": ("UINT32", "typed", 12, 12),
    }


def test_data_type_table_matches_onnx() -> None:
    assert {i: name for i, (name, _) in DATA_TYPES.items()} == {
        value: name for name, value in TensorProto.DataType.items()
    }


def test_external_data_matches_onnx(tmp_path: Path) -> None:
    path = save_external(tmp_path / "m")
    assert ours(path) == oracle(path)
    model = read_onnx(path)
    weight, bias = model.initializers
    assert weight.storage == "external" and bias.storage == "raw"  # 12 bytes stay inline
    assert weight.external == ExternalData("weights.bin", 0, 3072, 3072)
    assert weight.nbytes == weight.expected_nbytes == 3072
    assert model.external_files == ("weights.bin",)
    assert model.parameters == 256 * 3 + 3


def test_all_external_with_offsets(tmp_path: Path) -> None:
    path = save_external(tmp_path / "m", size_threshold=0)
    model = read_onnx(path)
    assert ours(path) == oracle(path)
    offsets = [
        (t.name, t.external.offset, t.external.length) for t in model.initializers if t.external
    ]
    assert offsets[0] == ("W", 0, 3072) and offsets[1][0] == "B" and offsets[1][2] == 12
    assert offsets[1][1] >= 3072


def test_external_length_absent_reads_to_end(tmp_path: Path) -> None:
    path = save_external(tmp_path / "m")
    edit_external(path, length=None, offset="1024")
    (weight, _) = read_onnx(path).initializers
    assert weight.external is not None and weight.external.length is None
    assert weight.nbytes == 3072 - 1024


def test_symlink_inside_folder_is_accepted(tmp_path: Path) -> None:
    """Unlike onnx.load, which refuses every symlink, one that stays in the folder is fine."""
    path = save_external(tmp_path / "m")
    (tmp_path / "m" / "store").mkdir()
    os.replace(tmp_path / "m" / "weights.bin", tmp_path / "m" / "store" / "weights.bin")
    os.symlink("store/weights.bin", tmp_path / "m" / "weights.bin")
    assert read_onnx(path).initializers[0].external.file_size == 3072  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# External data: malicious edits


@pytest.mark.parametrize(
    "location",
    ["../../etc/passwd", "/etc/passwd", "sub/../weights.bin", "..\\..\\weights.bin",
     "C:\\weights.bin", "C:weights.bin", "//server/share/w.bin", ""],
)  # fmt: skip
def test_external_path_rejected(tmp_path: Path, location: str) -> None:
    path = edit_external(save_external(tmp_path / "m"), location=location)
    assert rule_of(path) == "external-path"


@pytest.mark.parametrize("location", ["../../etc/passwd", "/etc/passwd"])
def test_onnx_rejects_the_same_paths(tmp_path: Path, location: str) -> None:
    path = edit_external(save_external(tmp_path / "m"), location=location)
    with pytest.raises(Exception, match="outside|absolute"):
        onnx.load(str(path))


def test_external_location_entry_missing(tmp_path: Path) -> None:
    path = edit_external(save_external(tmp_path / "m"), location=None)
    assert rule_of(path) == "external-path"


def test_symlinked_data_file_pointing_outside(tmp_path: Path) -> None:
    path = save_external(tmp_path / "m")
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"\0" * 4096)
    (tmp_path / "m" / "weights.bin").unlink()
    os.symlink(outside, tmp_path / "m" / "weights.bin")
    assert rule_of(path) == "external-path"
    with pytest.raises(Exception, match="symbolic link"):
        onnx.load(str(path))


def test_symlinked_directory_pointing_outside(tmp_path: Path) -> None:
    path = save_external(tmp_path / "m")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.replace(tmp_path / "m" / "weights.bin", elsewhere / "weights.bin")
    os.symlink(elsewhere, tmp_path / "m" / "data")
    edit_external(path, location="data/weights.bin")
    assert rule_of(path) == "external-path"


def test_symlink_loop(tmp_path: Path) -> None:
    path = edit_external(save_external(tmp_path / "m"), location="loop.bin")
    os.symlink("loop.bin", tmp_path / "m" / "loop.bin")
    assert rule_of(path) == "external-path"


def test_external_file_missing(tmp_path: Path) -> None:
    path = save_external(tmp_path / "m")
    (tmp_path / "m" / "weights.bin").unlink()
    assert rule_of(path) == "external-missing"
    with pytest.raises(Exception):  # noqa: B017 - onnx raises its own error types here
        onnx.load(str(path))


def test_external_file_is_a_directory(tmp_path: Path) -> None:
    path = save_external(tmp_path / "m")
    (tmp_path / "m" / "weights.bin").unlink()
    (tmp_path / "m" / "weights.bin").mkdir()
    assert rule_of(path) == "external-missing"


def test_external_range_past_the_end(tmp_path: Path) -> None:
    path = save_external(tmp_path / "m")
    os.truncate(tmp_path / "m" / "weights.bin", 3071)  # an interrupted copy: one byte short
    assert rule_of(path) == "external-range"


@pytest.mark.parametrize(
    ("entries", "rule"),
    [
        ({"offset": "100000"}, "external-range"),  # offset beyond the file
        ({"offset": "1", "length": "3072"}, "external-range"),
        ({"offset": "abc"}, "external-range"),
        ({"offset": "-1"}, "external-range"),
        ({"length": "１２"}, "external-range"),  # full-width digits are not ASCII digits
        ({"length": "9" * 400}, "external-range"),
        ({"offset": "0", "length": "3072"}, None),
    ],
)
def test_external_offsets(tmp_path: Path, entries: dict[str, str], rule: str | None) -> None:
    path = edit_external(save_external(tmp_path / "m"), **entries)
    if rule is None:
        read_onnx(path)
    else:
        assert rule_of(path) == rule


# ---------------------------------------------------------------------------------------------
# Hand-written wire format


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def ld(number: int, payload: bytes) -> bytes:
    return tag(number, 2) + varint(len(payload)) + payload


def vint(number: int, value: int) -> bytes:
    return tag(number, 0) + varint(value % 2**64)


def graph_bytes(*fields: bytes) -> bytes:
    return ld(7, b"".join(fields))


def tensor_field(name: str, data_type: int, dims: list[int], raw: bytes = b"") -> bytes:
    fields = b"".join(vint(1, d) for d in dims) + vint(2, data_type) + ld(8, name.encode())
    return ld(5, fields + ld(9, raw))


@pytest.fixture
def mlp_bytes() -> bytes:
    return mlp_model().SerializeToString()


@pytest.fixture
def write(tmp_path: Path) -> Callable[[bytes], Path]:
    def _write(data: bytes) -> Path:
        path = tmp_path / "crafted.onnx"
        path.write_bytes(data)
        return path

    return _write


def onnx_accepts(data: bytes) -> bool:
    try:
        onnx.ModelProto().ParseFromString(data)
    except Exception:  # any parse failure counts as "rejects"
        return False
    return True


@pytest.mark.parametrize(
    ("suffix", "message"),
    [
        (tag(9, 3), "group"),  # a start-group field
        (tag(9, 4), "group"),
        (tag(9, 6), "invalid wire type 6"),
        (tag(9, 7), "invalid wire type 7"),
        (b"\x00\x01", "number 0"),
        (tag(1, 0) + b"\x80" * 10 + b"\x01", "longer than 10 bytes"),
        (tag(2, 2) + varint(1000) + b"abc", "past the end"),
        (tag(1, 0) + b"\x80\x80", "past the end"),  # a varint cut off by the end of file
        (tag(9, 1) + b"\x00" * 7, "past the end"),  # a 64-bit value one byte short
        (tag(9, 5) + b"\x00" * 3, "past the end"),
    ],
)
def test_wire_format_violations(
    mlp_bytes: bytes, write: Callable[[bytes], Path], suffix: bytes, message: str
) -> None:
    data = mlp_bytes + suffix
    with pytest.raises(OnnxInputError, match=message) as caught:
        read_onnx(write(data))
    assert caught.value.rule_id == "protobuf"
    assert not onnx_accepts(data)  # the reference parser refuses these too


def test_varint_beyond_64_bits(write: Callable[[bytes], Path], mlp_bytes: bytes) -> None:
    """Stricter than upb, which silently drops the excess bits of a 10-byte varint."""
    data = mlp_bytes + tag(1, 0) + b"\xff" * 9 + b"\x7f"
    assert onnx_accepts(data)
    assert rule_of(write(data)) == "protobuf"


def test_inner_length_past_its_message(write: Callable[[bytes], Path]) -> None:
    # The graph holds 3 bytes, its name field claims 50: the file has more, the message not.
    data = ld(7, tag(2, 2) + varint(50) + b"xyz") + ld(2, b"y" * 100)
    assert not onnx_accepts(data)
    with pytest.raises(OnnxInputError, match="GraphProto field 2 runs 50 bytes past"):
        read_onnx(write(data))


def test_truncated_model(write: Callable[[bytes], Path], mlp_bytes: bytes) -> None:
    assert rule_of(write(mlp_bytes[: len(mlp_bytes) // 2])) == "protobuf"


def test_string_not_utf8(write: Callable[[bytes], Path], mlp_bytes: bytes) -> None:
    """upb hands back the raw bytes of a broken proto2 string; we refuse them."""
    data = ld(2, b"\xff\xfe") + mlp_bytes
    assert onnx_accepts(data)
    with pytest.raises(OnnxInputError, match="not UTF-8"):
        read_onnx(write(data))


def test_string_too_long(write: Callable[[bytes], Path], mlp_bytes: bytes) -> None:
    data = mlp_bytes + ld(2, b"n" * (2**20 + 1))
    with pytest.raises(OnnxInputError, match="exceeds"):
        read_onnx(write(data))


def test_nesting_depth(tmp_path: Path) -> None:
    element = helper.make_tensor_type_proto(TensorProto.FLOAT, [1])
    for _ in range(40):
        element = helper.make_sequence_type_proto(element)
    graph = helper.make_graph([], "deep", [helper.make_value_info("s", element)], [])
    path = save(helper.make_model(graph), tmp_path / "deep.onnx")
    onnx.load(str(path))  # fine for the reference reader (limit 100)
    with pytest.raises(OnnxInputError, match="nested deeper than 32"):
        read_onnx(path)
    deep = read_onnx(path, max_depth=100).inputs[0]
    assert deep.kind == "sequence<" * 40 + "tensor" + ">" * 40
    assert (deep.elem_type, deep.shape) == ("FLOAT", (1,))


def test_packed_dims_and_broken_packed_data(write: Callable[[bytes], Path]) -> None:
    packed = ld(1, varint(2) + varint(3)) + vint(2, 1) + ld(8, b"p") + ld(9, b"\0" * 24)
    data = graph_bytes(ld(5, packed))
    assert read_onnx(write(data)).initializers[0].dims == (2, 3)
    assert onnx.load_from_string(data).graph.initializer[0].dims == [2, 3]
    broken = graph_bytes(ld(5, vint(2, 7) + ld(7, b"\x01\x80")))  # int64_data cut mid-varint
    assert rule_of(write(broken)) == "protobuf"
    long = graph_bytes(ld(5, vint(2, 7) + ld(7, b"\x01" + b"\x80" * 10 + b"\x01")))
    assert rule_of(write(long)) == "protobuf"
    odd = graph_bytes(ld(5, vint(2, 1) + ld(4, b"\0" * 6)))  # 6 bytes of float_data
    assert rule_of(write(odd)) == "protobuf"


def test_packed_varints_counted_across_chunks(write: Callable[[bytes], Path]) -> None:
    # 2**20 + 3 bytes: varints straddle the 1 MiB chunk boundary
    values = [300] * (2**19 + 1) + [1]
    packed = b"".join(varint(v) for v in values)
    data = graph_bytes(ld(5, vint(1, len(values)) + vint(2, 7) + ld(8, b"big") + ld(7, packed)))
    tensor = read_onnx(write(data)).initializers[0]
    assert (tensor.storage, tensor.nbytes, tensor.elements) == (
        "typed",
        8 * len(values),
        len(values),
    )


def test_repeated_graph_fields_merge_like_protobuf(
    write: Callable[[bytes], Path], mlp_bytes: bytes
) -> None:
    extra = graph_bytes(ld(1, ld(4, b"Sigmoid")), ld(2, b"renamed"))
    path = write(mlp_bytes + extra)
    assert ours(path) == oracle(path)
    model = read_onnx(path)
    assert (model.node_count, model.graph_name) == (4, "renamed")


def test_wrong_wire_type_is_an_unknown_field(
    write: Callable[[bytes], Path], mlp_bytes: bytes
) -> None:
    path = write(mlp_bytes + vint(7, 1) + tag(1, 5) + b"\0\0\0\0")  # graph as varint, ir as I32
    assert ours(path) == oracle(path)


def test_oneof_type_switch(write: Callable[[bytes], Path]) -> None:
    tensor_type = ld(1, vint(1, 1))
    sequence_type = ld(4, ld(1, ld(1, vint(1, 7))))
    value_info = ld(11, ld(1, b"v") + ld(2, tensor_type + sequence_type))
    path = write(graph_bytes(value_info))
    assert ours(path) == oracle(path)
    assert read_onnx(path).inputs[0].kind == "sequence<tensor>"


def test_not_onnx(write: Callable[[bytes], Path]) -> None:
    assert rule_of(write(b"")) == "not-onnx"
    assert rule_of(write(vint(1, 8) + ld(2, b"pytorch"))) == "not-onnx"
    assert rule_of(write(vint(7, 1))) == "not-onnx"  # a graph field with the wrong wire type


def test_data_type_rules(write: Callable[[bytes], Path]) -> None:
    assert rule_of(write(graph_bytes(tensor_field("w", 99, [1])))) == "data-type"
    assert rule_of(write(graph_bytes(tensor_field("w", 0, [1])))) == "data-type"  # UNDEFINED
    assert rule_of(write(graph_bytes(tensor_field("w", -1, [1])))) == "data-type"
    bad_input = ld(11, ld(1, b"x") + ld(2, ld(1, vint(1, 77))))
    assert rule_of(write(graph_bytes(bad_input))) == "data-type"
    bad_key = ld(11, ld(1, b"m") + ld(2, ld(5, vint(1, 1000))))
    assert rule_of(write(graph_bytes(bad_key))) == "data-type"
    undefined_input = ld(11, ld(1, b"x") + ld(2, ld(1, b"")))
    assert read_onnx(write(graph_bytes(undefined_input))).inputs[0].elem_type == "UNDEFINED"


def test_dims_rules(write: Callable[[bytes], Path]) -> None:
    assert rule_of(write(graph_bytes(tensor_field("w", 1, [2, -1])))) == "dims"
    assert rule_of(write(graph_bytes(tensor_field("w", 1, [2**40] * 3)))) == "dims"
    many = ld(5, b"".join(vint(1, 1) for _ in range(1025)) + vint(2, 1))
    assert rule_of(write(graph_bytes(many))) == "dims"
    shape = ld(2, b"".join(ld(1, vint(1, 1)) for _ in range(1025)))
    assert rule_of(write(graph_bytes(ld(11, ld(2, ld(1, shape)))))) == "dims"


def test_unknown_enum_value_leaves_data_location_default(write: Callable[[bytes], Path]) -> None:
    tensor = ld(5, vint(1, 2) + vint(2, 1) + ld(8, b"w") + ld(9, b"\0" * 8) + vint(14, 5))
    path = write(graph_bytes(tensor))
    assert ours(path) == oracle(path)
    assert read_onnx(path).initializers[0].storage == "raw"
    # 2**32 + 1 is 1 (EXTERNAL) once truncated to int32, as protobuf does for enums
    tensor = ld(5, vint(1, 2) + vint(2, 1) + ld(8, b"w") + vint(14, 2**32 + 1))
    path = write(graph_bytes(tensor))
    loaded = onnx.load(str(path), load_external_data=False)
    assert loaded.graph.initializer[0].data_location == TensorProto.EXTERNAL
    assert rule_of(path) == "external-path"  # external, and without a location


def test_unreadable_and_too_large(tmp_path: Path, mlp_bytes: bytes) -> None:
    assert rule_of(tmp_path) == "unreadable"  # a directory
    assert rule_of(tmp_path / "absent.onnx") == "unreadable"
    path = tmp_path / "m.onnx"
    path.write_bytes(mlp_bytes)
    assert rule_of(path, max_bytes=100) == "too-large"
    fifo = tmp_path / "fifo.onnx"
    os.mkfifo(fifo)
    assert rule_of(fifo) == "unreadable"  # and it did not block waiting for a writer


def test_error_is_an_input_error_that_pickles(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        read_onnx(tmp_path / "absent.onnx")
    copy = pickle.loads(pickle.dumps(caught.value))
    assert isinstance(copy, OnnxInputError)
    assert (copy.rule_id, copy.path, str(copy)) == (
        "unreadable",
        str(tmp_path / "absent.onnx"),
        str(caught.value),
    )


def test_result_types(tmp_path: Path) -> None:
    model = read_onnx(save(mlp_model(), tmp_path / "m.onnx"))
    assert isinstance(model, OnnxModel)
    assert model.opset_import == (("", 17),)
    assert model.ir_version == onnx.IR_VERSION


# ---------------------------------------------------------------------------------------------
# Fuzzing: mutated real bytes never raise anything but our error, never hang, and agree


@pytest.fixture(scope="module")
def seed_bytes() -> bytes:
    return mixed_dtype_model().SerializeToString()


@pytest.fixture(scope="module")
def fuzz_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "fuzz.onnx"


FUZZ = settings(
    max_examples=300,
    deadline=2000,  # a hang or a quadratic blow-up shows up as a deadline failure
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(data=st.data())
def test_fuzz_mutated_model(seed_bytes: bytes, fuzz_path: Path, data: st.DataObject) -> None:
    raw = bytearray(seed_bytes)
    for _ in range(data.draw(st.integers(1, 6), label="mutations")):
        kind = data.draw(st.sampled_from(["set", "small", "insert", "delete"]), label="kind")
        at = data.draw(st.integers(0, max(0, len(raw) - 1)), label="at")
        if kind == "set":
            raw[at : at + 1] = bytes([data.draw(st.integers(0, 255), label="byte")])
        elif kind == "small":  # nudges lengths, tags and type ids rather than wrecking them
            raw[at : at + 1] = bytes([(raw[at] + data.draw(st.integers(-2, 2))) % 256])
        elif kind == "insert":
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=12), label="inserted")
        else:
            del raw[at : at + data.draw(st.integers(1, 12), label="deleted")]
    if data.draw(st.integers(0, 3), label="truncate") == 3:
        raw = raw[: data.draw(st.integers(0, len(raw)), label="cut")]
    fuzz_path.write_bytes(bytes(raw))
    try:
        read_onnx(fuzz_path, nodes=True)  # every string field read, node edges included
    except OnnxInputError as exc:
        event(exc.rule_id)
        assert exc.rule_id in RULES
        return
    if onnx_accepts(bytes(raw)):  # both accept: every field must agree
        event("pass, onnx agrees")
        assert ours(fuzz_path, sizes=False) == oracle(fuzz_path, sizes=False)
    else:
        event("pass, onnx refuses")


def test_node_edges_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept node names cost memory: past the cap the reader stops (only with nodes=True)."""
    from lineage.formats import onnx_reader

    path = save(mlp_model(), tmp_path / "mlp.onnx")  # 3 nodes naming 8 inputs and outputs
    monkeypatch.setattr(onnx_reader, "MAX_NODE_NAMES", 6)
    assert rule_of(path, nodes=True) == "too-large"
    assert read_onnx(path).node_count == 3
