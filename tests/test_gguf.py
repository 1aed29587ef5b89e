"""GGUF structure checks.

Fixtures come from real writers: `gguf.GGUFWriter` (llama.cpp's own Python writer) for files
with tensors and every metadata value type, and three tokenizer files made by the llama.cpp
project (tests/fixtures/gguf, see NOTICE.md there). Malformed files are derived from those
real bytes by editing fields in place, located with the reference reader. The installed
reader (`gguf.GGUFReader`) serves as an oracle: everything we return must match what it says
about the same file.
"""

from __future__ import annotations

import hashlib
import lzma
import math
import os
import pickle
import struct
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFEndian, GGUFReader, GGUFValueType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType
from gguf.quants import quantize
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lineage.errors import InputError
from lineage.formats.gguf import (
    DEFAULT_ALIGNMENT,
    FILE_TYPES,
    GGML_TYPES,
    RULES,
    VALUE_TYPES,
    GGUFFile,
    GGUFInputError,
    check_gguf,
    read_gguf,
    split_parts,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gguf"
BERT = FIXTURES / "ggml-vocab-bert-bge.gguf"
LLAMA_SPM = FIXTURES / "ggml-vocab-llama-spm.gguf"
AQUILA_XZ = FIXTURES / "ggml-vocab-aquila.gguf.xz"
AQUILA_SHA256 = "7c53c3c516ac67c7ca12977b9690fdea3d2ef13bbaed6378f98191a13ef5ca00"

ALIGNMENT = 64
TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
# key -> (value, GGUF value type, array element type); one of every kind the format has.
EXTRA_METADATA: dict[str, tuple[object, GGUFValueType, GGUFValueType | None]] = {
    "test.u8": (200, GGUFValueType.UINT8, None),
    "test.i8": (-100, GGUFValueType.INT8, None),
    "test.u16": (60_000, GGUFValueType.UINT16, None),
    "test.i16": (-30_000, GGUFValueType.INT16, None),
    "test.u32": (4_000_000_000, GGUFValueType.UINT32, None),
    "test.i32": (-2_000_000_000, GGUFValueType.INT32, None),
    "test.f32": (1.5, GGUFValueType.FLOAT32, None),
    "test.u64": (2**63 + 5, GGUFValueType.UINT64, None),
    "test.i64": (-(2**62), GGUFValueType.INT64, None),
    "test.f64": (math.pi, GGUFValueType.FLOAT64, None),
    "test.yes": (True, GGUFValueType.BOOL, None),
    "test.nah": (False, GGUFValueType.BOOL, None),
    "test.text": ("héllo ✓ wörld", GGUFValueType.STRING, None),
    "test.arr_u8": ([0, 1, 255], GGUFValueType.ARRAY, GGUFValueType.UINT8),
    "test.arr_i32": ([1, -2, 3, -4], GGUFValueType.ARRAY, GGUFValueType.INT32),
    "test.arr_u64": ([0, 2**64 - 1], GGUFValueType.ARRAY, GGUFValueType.UINT64),
    "test.arr_i64": ([-(2**63), 2**63 - 1], GGUFValueType.ARRAY, GGUFValueType.INT64),
    "test.arr_f32": ([0.25, -2.0], GGUFValueType.ARRAY, GGUFValueType.FLOAT32),
    "test.arr_f64": ([1e300, -0.5], GGUFValueType.ARRAY, GGUFValueType.FLOAT64),
    "test.arr_bool": ([True, False, True], GGUFValueType.ARRAY, GGUFValueType.BOOL),
    "test.arr_str": (["a", "", "ünï"], GGUFValueType.ARRAY, GGUFValueType.STRING),
}


# ---------------------------------------------------------------------------------------------
# Helpers: the real writer, the reference reader as an oracle, byte-level editing


def sample_tensors() -> list[tuple[str, np.ndarray, GGMLQuantizationType | None]]:
    rng = np.random.default_rng(7)
    weights = rng.standard_normal((8, 64)).astype(np.float32)
    return [
        ("token_embd.weight", np.arange(256, dtype=np.float32).reshape(4, 64), None),
        ("blk.0.attn_norm.weight", np.linspace(-1, 1, 64).astype(np.float16), None),
        (
            "blk.0.ffn_up.weight",
            quantize(weights, GGMLQuantizationType.Q8_0),
            GGMLQuantizationType.Q8_0,
        ),
        ("output_norm.weight", np.ones(5, dtype=np.float32), None),  # 20 bytes: needs padding
        ("blk.0.ffn_dn.weight", np.zeros((2, 3), dtype=np.float32), None),
    ]


def write_model(
    path: Path,
    *,
    alignment: int | None = ALIGNMENT,
    tensors: list[tuple[str, np.ndarray, GGMLQuantizationType | None]] | None = None,
    configure: Callable[[GGUFWriter], None] | None = None,
    **writer_options: int,
) -> Path:
    writer = GGUFWriter(path, arch="llama", **writer_options)
    writer.add_name("tiny-test")
    writer.add_file_type(LlamaFileType.MOSTLY_Q8_0)
    writer.add_context_length(2048)
    writer.add_block_count(1)
    writer.add_embedding_length(64)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    writer.add_chat_template(TEMPLATE)
    for key, (value, vtype, sub_type) in EXTRA_METADATA.items():
        writer.add_key_value(key, value, vtype, sub_type=sub_type)
    if configure is not None:
        configure(writer)
    for name, array, raw_dtype in sample_tensors() if tensors is None else tensors:
        writer.add_tensor(name, array, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def reference_type(types: list[GGUFValueType]) -> str:
    if types == [GGUFValueType.ARRAY]:  # an empty array: gguf-py keeps no element type
        return "array[?]"
    if types[0] == GGUFValueType.ARRAY:
        return f"array[{types[-1].name.lower()}]"
    return types[0].name.lower()


def same_value(ours: object, theirs: object) -> bool:
    if isinstance(ours, list) and isinstance(theirs, list):
        return len(ours) == len(theirs) and all(map(same_value, ours, theirs))
    if isinstance(ours, float) and isinstance(theirs, float) and math.isnan(ours):
        return math.isnan(theirs)
    return type(ours) is type(theirs) and ours == theirs


def assert_matches_reference(ours: GGUFFile, path: Path, reader: GGUFReader | None = None) -> None:
    """Every field we return equals what gguf.GGUFReader says about the same file."""
    reader = GGUFReader(path) if reader is None else reader
    fields = {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert ours.version == reader.fields["GGUF.version"].contents()
    assert len(ours.tensors) == reader.fields["GGUF.tensor_count"].contents()
    assert len(ours.metadata) == reader.fields["GGUF.kv_count"].contents()
    assert ours.alignment == reader.alignment
    assert list(ours.metadata) == list(fields)  # same keys, same order
    for key, field in fields.items():
        assert same_value(ours.metadata[key], field.contents()), key
        expected = reference_type(field.types)
        if expected == "array[?]":  # ours names the element type the header gives
            assert ours.value_types[key].startswith("array["), key
        else:
            assert ours.value_types[key] == expected, key
    assert [t.name for t in ours.tensors] == [t.name for t in reader.tensors]
    if reader.tensors:  # GGUFReader pads the data start even when there are no tensors
        assert ours.data_offset == reader.data_offset
    raw = path.read_bytes()
    for mine, theirs in zip(ours.tensors, reader.tensors, strict=True):
        assert mine.dims == tuple(int(d) for d in theirs.shape)
        assert mine.type_id == int(theirs.tensor_type)
        assert mine.type_name == theirs.tensor_type.name
        assert ours.data_offset + mine.offset == theirs.data_offset
        assert mine.nbytes == theirs.n_bytes
        assert mine.elements == theirs.n_elements
        start = ours.data_offset + mine.offset
        assert raw[start : start + mine.nbytes] == theirs.data.tobytes()


def rule_of(path: Path, **caps: int) -> str:
    found, errors = check_gguf(path, **caps)
    assert found is None and len(errors) == 1, errors
    assert errors[0]["rule"] in RULES
    return str(errors[0]["rule"])


def rule_or_pass(path: Path) -> str:
    found, errors = check_gguf(path)
    return "pass" if found is not None else str(errors[0]["rule"])


def patched(raw: bytes, at: int, new: bytes) -> bytes:
    assert 0 <= at and at + len(new) <= len(raw)
    return raw[:at] + new + raw[at + len(new) :]


def u32(value: int) -> bytes:
    return struct.pack("<I", value)


def u64(value: int) -> bytes:
    return struct.pack("<Q", value)


class Layout:
    """Where each field of a real file sits, found with the reference reader."""

    def __init__(self, path: Path) -> None:
        reader = GGUFReader(path)
        self.kv = {k: f.offset for k, f in reader.fields.items() if not k.startswith("GGUF.")}
        self.tensors = {t.name: (t.field.offset, len(t.shape)) for t in reader.tensors}

    def key_at(self, key: str) -> int:
        """Offset of the key's length, the start of the pair."""
        return self.kv[key]

    def type_at(self, key: str) -> int:
        return self.kv[key] + 8 + len(key.encode())

    def value_at(self, key: str) -> int:
        """For an array: its element type; the count follows at +4, the elements at +12."""
        return self.type_at(key) + 4

    def ndims_at(self, name: str) -> int:
        return self.tensors[name][0] + 8 + len(name.encode())

    def dim_at(self, name: str, axis: int) -> int:
        return self.ndims_at(name) + 4 + 8 * axis

    def ttype_at(self, name: str) -> int:
        return self.dim_at(name, self.tensors[name][1])

    def offset_at(self, name: str) -> int:
        return self.ttype_at(name) + 4


@contextmanager
def peak_memory() -> Iterator[list[int]]:
    """Yields a list that holds the peak traced allocation in bytes once the block ends."""
    result: list[int] = []
    tracemalloc.start()
    try:
        yield result
    finally:
        result.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


# ---------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model(tmp_path_factory.mktemp("model") / "tiny-Q8_0.gguf")


@pytest.fixture(scope="module")
def model_bytes(model: Path) -> bytes:
    return model.read_bytes()


@pytest.fixture(scope="module")
def layout(model: Path) -> Layout:
    return Layout(model)


@pytest.fixture(scope="module")
def aquila(tmp_path_factory: pytest.TempPathFactory) -> Path:
    raw = lzma.decompress(AQUILA_XZ.read_bytes())
    assert hashlib.sha256(raw).hexdigest() == AQUILA_SHA256
    path = tmp_path_factory.mktemp("aquila") / "ggml-vocab-aquila.gguf"
    path.write_bytes(raw)
    return path


@pytest.fixture
def write(tmp_path: Path) -> Callable[[bytes], Path]:
    def _write(raw: bytes, name: str = "edited.gguf") -> Path:
        path = tmp_path / name
        path.write_bytes(raw)
        return path

    return _write


# ---------------------------------------------------------------------------------------------
# Tables copied from the gguf package


def test_ggml_types_match_the_gguf_package() -> None:
    expected = {int(t): (t.name, *GGML_QUANT_SIZES[t]) for t in GGMLQuantizationType}
    assert GGML_TYPES == expected


def test_file_types_match_the_gguf_package() -> None:
    assert FILE_TYPES == {int(t): t.name for t in LlamaFileType}


def test_value_types_match_the_gguf_package() -> None:
    assert {k: name for k, (name, _) in VALUE_TYPES.items()} == {
        int(t): t.name.lower() for t in GGUFValueType
    }


# ---------------------------------------------------------------------------------------------
# Files from the real writer


def test_writer_file_matches_reference_reader(model: Path) -> None:
    found = read_gguf(model)
    assert_matches_reference(found, model)
    assert found.version == 3
    assert found.alignment == ALIGNMENT
    assert found.data_offset % ALIGNMENT == 0
    assert found.file_size == model.stat().st_size
    for key, (value, _, _) in EXTRA_METADATA.items():
        assert same_value(found.metadata[key], value), key
    assert found.value_types["test.arr_str"] == "array[string]"
    assert found.value_types["general.alignment"] == "uint32"


def test_writer_file_tensors(model: Path) -> None:
    found = read_gguf(model)
    by_name = {t.name: t for t in found.tensors}
    embed = by_name["token_embd.weight"]
    assert (embed.dims, embed.shape) == ((64, 4), (4, 64))  # GGUF stores innermost first
    assert (embed.type_name, embed.nbytes, embed.elements) == ("F32", 1024, 256)
    assert by_name["blk.0.attn_norm.weight"].type_name == "F16"
    q8 = by_name["blk.0.ffn_up.weight"]
    assert (q8.type_name, q8.dims, q8.nbytes) == ("Q8_0", (64, 8), 8 * 2 * 34)
    assert all(t.offset % ALIGNMENT == 0 for t in found.tensors)
    assert found.parameters == 256 + 64 + 512 + 5 + 6


def test_writer_file_properties(model: Path) -> None:
    found = read_gguf(model)
    assert found.architecture == "llama"
    assert found.name == "tiny-test"
    assert (found.file_type_id, found.file_type) == (7, "MOSTLY_Q8_0")
    assert found.chat_template == TEMPLATE
    assert (found.context_length, found.block_count, found.embedding_length) == (2048, 1, 64)
    assert (found.head_count, found.head_count_kv) == (4, 2)
    assert found.arch_value("context_length") == 2048
    assert found.arch_value("no_such_key") is None
    assert found.tokenizer_model is None and found.vocab_size is None
    assert found.data_size == found.file_size - found.data_offset


def test_default_alignment_and_per_layer_head_counts(tmp_path: Path) -> None:
    def per_layer(writer: GGUFWriter) -> None:
        writer.add_array("llama.attention.head_count_kv", [1, 2])  # one count per layer

    path = write_model(tmp_path / "m.gguf", alignment=None, configure=per_layer)
    found = read_gguf(path)
    assert found.alignment == DEFAULT_ALIGNMENT and "general.alignment" not in found.metadata
    assert_matches_reference(found, path)
    assert found.head_count_kv == [1, 2]
    found.metadata["general.file_type"] = 999  # a file type newer than this table
    assert found.file_type == "UNKNOWN_999"


def test_zero_element_and_scalar_tensors_are_valid(tmp_path: Path) -> None:
    # llama.cpp accepts a dim of 0 ("a zero-element tensor is trivially representable").
    tensors = [
        ("empty", np.zeros((0, 4), dtype=np.float32), None),
        ("after", np.arange(3, dtype=np.int32), None),
        ("scalar", np.array(2.5, dtype=np.float64), None),
    ]
    path = write_model(tmp_path / "m.gguf", tensors=tensors)
    found = read_gguf(path)
    assert_matches_reference(found, path)
    assert [(t.dims, t.elements, t.nbytes) for t in found.tensors] == [
        ((4, 0), 0, 0),
        ((3,), 3, 12),
        ((), 1, 8),
    ]


def test_no_tensors_data_offset_is_the_end_of_the_header(tmp_path: Path) -> None:
    path = write_model(tmp_path / "m.gguf", tensors=[])
    found = read_gguf(path)
    assert_matches_reference(found, path)
    # The writer pads the header even with no tensors; llama.cpp's data section then starts
    # right after the header (no padding), which is what we report too.
    assert found.tensors == [] and found.file_size - ALIGNMENT < found.data_offset
    assert path.read_bytes()[found.data_offset :] == bytes(found.file_size - found.data_offset)


# ---------------------------------------------------------------------------------------------
# Files made by llama.cpp (tests/fixtures/gguf)


@pytest.mark.parametrize(
    ("name", "version", "tokenizer", "tokens"),
    [
        ("bert", 3, "bert", 30522),
        ("llama-spm", 3, "llama", 32000),
        ("aquila", 2, "gpt2", 100008),
    ],
)
def test_llama_cpp_vocab_files(
    name: str, version: int, tokenizer: str, tokens: int, aquila: Path
) -> None:
    path = {"bert": BERT, "llama-spm": LLAMA_SPM, "aquila": aquila}[name]
    found = read_gguf(path)
    reader = GGUFReader(path)
    assert_matches_reference(found, path, reader)
    assert found.version == version and found.tensors == [] and found.parameters == 0
    assert found.data_offset == found.file_size  # these files end unpadded after the metadata
    assert found.tokenizer_model == tokenizer == reader.fields["tokenizer.ggml.model"].contents()
    assert found.vocab_size == tokens == len(reader.fields["tokenizer.ggml.tokens"].data)
    assert found.file_size == path.stat().st_size


def test_llama_cpp_vocab_properties() -> None:
    bert = read_gguf(BERT)
    assert (bert.architecture, bert.file_type, bert.context_length) == ("bert", "MOSTLY_F16", 512)
    assert bert.metadata["bert.attention.causal"] is False
    spm = read_gguf(LLAMA_SPM)
    assert (spm.block_count, spm.head_count, spm.head_count_kv) == (32, 32, 32)
    assert spm.metadata["tokenizer.ggml.add_bos_token"] is True
    assert spm.metadata["tokenizer.ggml.tokens"][:3] == ["<unk>", "<s>", "</s>"]


# ---------------------------------------------------------------------------------------------
# Malformed files, one per rule, derived from real bytes


def test_magic(model_bytes: bytes, write: Callable[[bytes], Path]) -> None:
    assert rule_of(write(patched(model_bytes, 0, b"GGML"))) == "magic"
    assert rule_of(write(b"PK\x03\x04" + model_bytes[4:])) == "magic"
    swapped = write(patched(model_bytes, 0, b"FUGG"))
    assert rule_of(swapped) == "magic"
    assert "byte-swapped" in check_gguf(swapped)[1][0]["message"]


def test_big_endian_file_from_the_real_writer(tmp_path: Path) -> None:
    path = tmp_path / "be.gguf"
    writer = GGUFWriter(path, arch="llama", endianess=GGUFEndian.BIG)
    writer.add_block_count(1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert path.read_bytes()[:8] == b"GGUF\x00\x00\x00\x03"
    assert rule_of(path) == "magic"
    assert "big-endian" in check_gguf(path)[1][0]["message"]


@pytest.mark.parametrize("version", [0, 1, 4, 0xFFFF])
def test_version(model_bytes: bytes, write: Callable[[bytes], Path], version: int) -> None:
    assert rule_of(write(patched(model_bytes, 4, u32(version)))) == "version"


def test_truncated(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    for cut in (0, 3, 6, 20):  # inside the magic, version and counts
        assert rule_of(write(model_bytes[:cut])) == "truncated"
    # Inside a fixed-size field: the last tensor's offset.
    cut = layout.offset_at("blk.0.ffn_dn.weight") + 4
    assert rule_of(write(model_bytes[:cut])) == "truncated"
    # Right after the tensor infos, before the padding up to the data section.
    end_of_infos = layout.offset_at("blk.0.ffn_dn.weight") + 8
    assert end_of_infos % ALIGNMENT
    assert rule_of(write(model_bytes[:end_of_infos])) == "truncated"


def test_truncated_tensor_data_is_an_offset_error(
    model_bytes: bytes, write: Callable[[bytes], Path]
) -> None:
    # The last tensor's padding may be missing (llama.cpp checks offset + nbytes only)...
    found = read_gguf(write(model_bytes))
    last = found.tensors[-1]
    end = found.data_offset + last.offset + last.nbytes
    assert read_gguf(write(model_bytes[:end])).tensors == found.tensors
    # ...but not one byte of its data.
    path = write(model_bytes[: end - 1])
    assert rule_of(path) == "offset"
    assert "past the end of the file" in check_gguf(path)[1][0]["message"]


def test_count(model_bytes: bytes, write: Callable[[bytes], Path]) -> None:
    n_kv = struct.unpack_from("<Q", model_bytes, 16)[0]
    assert rule_of(write(patched(model_bytes, 8, u64(2**62)))) == "count"  # tensors
    assert rule_of(write(patched(model_bytes, 16, u64(2**62)))) == "count"  # key-value pairs
    # A count that looks harmless but the bytes left cannot back: 14 bytes per pair at least.
    big = len(model_bytes) // 14 + 1
    assert rule_of(write(patched(model_bytes, 16, u64(big)))) == "count"
    assert big > n_kv
    # The tensor cap is a local policy.
    assert rule_of(write(model_bytes), max_tensors=4) == "count"


def test_count_on_a_real_vocab_file(write: Callable[[bytes], Path]) -> None:
    raw = BERT.read_bytes()  # 0 tensors: claim 30000, 720 kB of infos in a 627 kB file
    assert rule_of(write(patched(raw, 8, u64(30_000)))) == "count"


def test_string_length(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    first_key = layout.key_at("general.architecture")
    assert rule_of(write(patched(model_bytes, first_key, u64(2**62)))) == "string-length"
    value = layout.value_at("test.text")
    just_past = len(model_bytes) - value - 8 + 1
    assert rule_of(write(patched(model_bytes, value, u64(just_past)))) == "string-length"
    name_at = layout.tensors["blk.0.ffn_dn.weight"][0]
    assert rule_of(write(patched(model_bytes, name_at, u64(2**40)))) == "string-length"


def test_array_length(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    count_at = layout.value_at("test.arr_str") + 4
    assert rule_of(write(patched(model_bytes, count_at, u64(2**60)))) == "array-length"
    count_at = layout.value_at("test.arr_u64") + 4
    assert rule_of(write(patched(model_bytes, count_at, u64(2**20)))) == "array-length"
    # The per-array cap is a local policy: the real vocabulary has 30522 tokens.
    assert rule_of(BERT, max_array_len=30_521) == "array-length"
    assert read_gguf(BERT, max_array_len=30_522).vocab_size == 30_522


def test_empty_key(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    assert rule_of(write(patched(model_bytes, layout.key_at("test.u8"), u64(0)))) == "empty-key"


def test_duplicate_key(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    at = layout.key_at("test.i16") + 8
    assert rule_of(write(patched(model_bytes, at, b"test.u16"))) == "duplicate-key"


def test_value_type(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    for bad in (13, 2**31, 2**32 - 1):
        assert rule_of(write(patched(model_bytes, layout.type_at("test.u8"), u32(bad)))) == (
            "value-type"
        )
    element_type = layout.value_at("test.arr_i32")
    assert rule_of(write(patched(model_bytes, element_type, u32(77)))) == "value-type"


def test_nested_array(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    element_type = layout.value_at("test.arr_i32")
    assert rule_of(write(patched(model_bytes, element_type, u32(9)))) == "nested-array"


def test_bool(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    assert rule_of(write(patched(model_bytes, layout.value_at("test.yes"), b"\x02"))) == "bool"
    second = layout.value_at("test.arr_bool") + 12 + 1
    path = write(patched(model_bytes, second, b"\xff"))
    assert rule_of(path) == "bool"
    assert "test.arr_bool" in check_gguf(path)[1][0]["message"]
    # A real llama.cpp file's bool, edited.
    raw = BERT.read_bytes()
    at = raw.index(b"bert.attention.causal") + len("bert.attention.causal") + 4
    assert raw[at] == 0
    assert rule_or_pass(write(patched(raw, at, b"\x01"))) == "pass"  # 1 is fine...
    assert rule_of(write(patched(raw, at, b"\x03"))) == "bool"  # ...3 is not


def test_utf8(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    key_byte = layout.key_at("test.u8") + 8 + 5
    assert rule_of(write(patched(model_bytes, key_byte, b"\xff"))) == "utf8"
    value_byte = layout.value_at("test.text") + 8 + 1  # the 2nd byte of "é"
    assert rule_of(write(patched(model_bytes, value_byte, b"\x41"))) == "utf8"
    name_byte = layout.tensors["output_norm.weight"][0] + 8
    assert rule_of(write(patched(model_bytes, name_byte, b"\xc0"))) == "utf8"
    # A token of a real vocabulary: CESU-style surrogates are not UTF-8 either.
    raw = LLAMA_SPM.read_bytes()
    at = raw.index(b"\x04\x00\x00\x00\x00\x00\x00\x00</s>") + 8
    assert rule_of(write(patched(raw, at, b"\xed\xa0\x80"))) == "utf8"


def test_alignment(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    value = layout.value_at("general.alignment")
    for bad in (0, 48, 2**32 - 1):
        assert rule_of(write(patched(model_bytes, value, u32(bad)))) == "alignment"
    as_int32 = write(patched(model_bytes, layout.type_at("general.alignment"), u32(5)))
    assert rule_of(as_int32) == "alignment"


def test_alignment_of_another_type_from_the_writer(tmp_path: Path) -> None:
    def u64_alignment(writer: GGUFWriter) -> None:
        writer.add_key_value("general.alignment", 64, GGUFValueType.UINT64)

    path = write_model(tmp_path / "m.gguf", alignment=None, configure=u64_alignment)
    assert rule_of(path) == "alignment"


def test_tensor_name(tmp_path: Path) -> None:
    name = "blk.0." + "x" * 51 + ".weight"  # 64 bytes: llama.cpp's GGML_MAX_NAME
    tensors = [(name, np.ones(4, dtype=np.float32), None)]
    assert rule_of(write_model(tmp_path / "long.gguf", tensors=tensors)) == "tensor-name"
    tensors = [(name[:-1], np.ones(4, dtype=np.float32), None)]
    assert (
        read_gguf(write_model(tmp_path / "ok.gguf", tensors=tensors)).tensors[0].name == name[:-1]
    )


def test_duplicate_tensor(
    model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]
) -> None:
    at = layout.tensors["blk.0.ffn_dn.weight"][0] + 8
    assert rule_of(write(patched(model_bytes, at, b"blk.0.ffn_up.weight"))) == "duplicate-tensor"


def test_dims(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    for n_dims in (5, 2**32 - 1):
        at = layout.ndims_at("token_embd.weight")
        assert rule_of(write(patched(model_bytes, at, u32(n_dims)))) == "dims"
    at = layout.dim_at("token_embd.weight", 1)
    assert rule_of(write(patched(model_bytes, at, u64(2**63)))) == "dims"


def test_overflow(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    name = "token_embd.weight"
    dims = u64(2**32) + u64(2**32)  # 2**64 elements
    assert rule_of(write(patched(model_bytes, layout.dim_at(name, 0), dims))) == "overflow"
    dims = u64(2**31) + u64(2**31)  # 2**62 F32 elements = 2**64 bytes
    assert rule_of(write(patched(model_bytes, layout.dim_at(name, 0), dims))) == "overflow"
    dims = u64(2**30) + u64(2**31)  # 2**63 bytes: still one too many
    assert rule_of(write(patched(model_bytes, layout.dim_at(name, 0), dims))) == "overflow"
    dims = u64(0) + u64(2**62)  # a zero dim first: no overflow, an empty tensor
    assert rule_of(write(patched(model_bytes, layout.dim_at(name, 0), dims))) == "offset"


def test_tensor_type(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    for bad in (4, 5, 31, 36, 42, 43, 2**32 - 1):  # removed from the format, or unknown
        at = layout.ttype_at("output_norm.weight")
        assert rule_of(write(patched(model_bytes, at, u32(bad)))) == "tensor-type"


def test_block_size(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    # Q8_0 packs 32 elements per block: a row of 48 does not fill whole blocks.
    at = layout.dim_at("blk.0.ffn_up.weight", 0)
    assert rule_of(write(patched(model_bytes, at, u64(48)))) == "block-size"
    # 8 rows of 64 -> 16 rows of 32 keeps the same bytes: still valid.
    found = read_gguf(write(patched(model_bytes, at, u64(32) + u64(16))))
    assert [t.dims for t in found.tensors if t.type_name == "Q8_0"] == [(32, 16)]
    # F16 -> Q4_K with a row of 64 (blocks of 256).
    at = layout.ttype_at("blk.0.attn_norm.weight")
    assert rule_of(write(patched(model_bytes, at, u32(12)))) == "block-size"


def test_offset(model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path]) -> None:
    found = read_gguf(write(model_bytes))
    second = found.tensors[1]
    at = layout.offset_at(second.name)
    for bad in (second.offset + ALIGNMENT, second.offset - ALIGNMENT, second.offset + 1, 2**63):
        assert rule_of(write(patched(model_bytes, at, u64(bad)))) == "offset"
    # Declared order must be the data order: swapping two offsets is refused too.
    third = found.tensors[2]
    swapped = patched(model_bytes, at, u64(third.offset))
    swapped = patched(swapped, layout.offset_at(third.name), u64(second.offset))
    assert rule_of(write(swapped)) == "offset"


def test_metadata_cap() -> None:
    found = read_gguf(BERT)
    raw = BERT.read_bytes()
    cap = found.file_size - 1000  # inside the token list
    assert rule_of(BERT, max_metadata_bytes=cap) == "array-length"
    # 20 pairs need at least 24 + 20 * 14 bytes; past that, a value type crosses the cap.
    type_at = raw.index(b"tokenizer.ggml.model") + len("tokenizer.ggml.model")
    assert type_at > 24 + 20 * 14
    _, errors = check_gguf(BERT, max_metadata_bytes=type_at + 2)
    assert errors[0]["rule"] == "metadata-cap" and errors[0]["where"] == f"offset {type_at}"
    assert rule_of(BERT, max_metadata_bytes=24 + 20 * 14 - 1) == "count"
    assert read_gguf(BERT, max_metadata_bytes=found.file_size).vocab_size == 30522


def test_unreadable(tmp_path: Path) -> None:
    assert rule_of(tmp_path) == "unreadable"
    assert rule_of(tmp_path / "missing.gguf") == "unreadable"
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    assert rule_of(fifo) == "unreadable"
    assert rule_of(Path("bad\0name.gguf")) == "unreadable"


def test_every_rule_has_a_test() -> None:
    source = Path(__file__).read_text()
    for rule in RULES:
        assert f'== "{rule}"' in source, rule


def test_error_is_an_input_error_and_pickles(
    model_bytes: bytes, write: Callable[[bytes], Path]
) -> None:
    path = write(patched(model_bytes, 4, u32(1)))
    with pytest.raises(GGUFInputError) as caught:
        read_gguf(path)
    error = caught.value
    assert isinstance(error, InputError)
    assert (error.rule_id, error.where) == ("version", "offset 4")
    assert str(error).startswith(f"{path}:offset 4: version: ")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.rule_id, copy.message, copy.where, str(copy)) == (
        error.rule_id,
        error.message,
        error.where,
        str(error),
    )
    found, errors = check_gguf(path)
    assert found is None and errors == [
        {"file": str(path), "rule": "version", "message": error.message, "where": "offset 4"}
    ]


# ---------------------------------------------------------------------------------------------
# Untrusted counts never drive an allocation


@pytest.mark.parametrize(
    ("target", "rule"),
    [
        ("tensors", "count"),
        ("kv", "count"),
        ("key", "string-length"),
        ("array", "array-length"),
        ("string-array", "array-length"),
        ("dims", "dims"),
    ],
)
def test_huge_counts_are_refused_before_allocating(
    model_bytes: bytes, layout: Layout, write: Callable[[bytes], Path], target: str, rule: str
) -> None:
    at, new = {
        "tensors": (8, u64(2**60)),
        "kv": (16, u64(2**60)),
        "key": (layout.key_at("test.u8"), u64(2**60)),
        "array": (layout.value_at("test.arr_u8") + 4, u64(2**60)),
        "string-array": (layout.value_at("test.arr_str") + 4, u64(2**60)),
        "dims": (layout.ndims_at("token_embd.weight"), u32(2**31)),
    }[target]
    path = write(patched(model_bytes, at, new))
    with peak_memory() as peak:
        assert rule_of(path) == rule
    assert peak[0] < 256 * 1024, f"{peak[0]} bytes traced"


def test_huge_array_in_a_real_vocab_file(write: Callable[[bytes], Path]) -> None:
    raw = BERT.read_bytes()
    at = raw.index(b"tokenizer.ggml.tokens") + len("tokenizer.ggml.tokens") + 4 + 4
    assert struct.unpack_from("<Q", raw, at)[0] == 30522
    path = write(patched(raw, at, u64(2**60)))
    with peak_memory() as peak:
        assert rule_of(path) == "array-length"
    assert peak[0] < 256 * 1024


# ---------------------------------------------------------------------------------------------
# Split models


def test_split_parts_from_the_real_writer(tmp_path: Path) -> None:
    tensors = sample_tensors()[:3]
    write_model(tmp_path / "tiny.gguf", alignment=None, tensors=tensors, split_max_tensors=1)
    parts = sorted(tmp_path.glob("*.gguf"))
    assert [p.name for p in parts] == [f"tiny-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert split_parts(parts[1]) == parts
    found = [read_gguf(p) for p in parts]
    assert [f.metadata["split.no"] for f in found] == [0, 1, 2]
    assert {f.metadata["split.count"] for f in found} == {3}
    assert sum(len(f.tensors) for f in found) == found[0].metadata["split.tensors.count"] == 3
    parts[2].unlink()
    with pytest.raises(GGUFInputError) as caught:
        split_parts(parts[0])
    assert caught.value.rule_id == "split"
    assert "tiny-00003-of-00003.gguf" in caught.value.message


def test_split_parts_names(tmp_path: Path) -> None:
    single = tmp_path / "model-Q4_K_M.gguf"
    assert split_parts(single) == [single]  # not a split name: one part, as given
    for bad in ("m-00000-of-00002.gguf", "m-00003-of-00002.gguf", "m-00001-of-00000.gguf"):
        with pytest.raises(GGUFInputError) as caught:
            split_parts(tmp_path / bad)
        assert caught.value.rule_id == "split"
    (tmp_path / "model-00001-of-00002.gguf").write_bytes(b"")
    with pytest.raises(GGUFInputError) as caught:
        split_parts(tmp_path / "model-00001-of-00002.gguf")
    assert caught.value.message.endswith("model-00002-of-00002.gguf")
    with pytest.raises(GGUFInputError) as caught:  # a huge part count stops probing early
        split_parts(tmp_path / "model-00001-of-99999.gguf")
    assert caught.value.message.endswith(", ...")


# ---------------------------------------------------------------------------------------------
# Fuzzing: mutated and truncated real bytes


Field = tuple[int, int]  # (file offset, size in bytes) of an integer field


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, dict[str, list[Field]]]:
    """A small writer-made file, and where its integer fields are, by section."""
    path = tmp_path_factory.mktemp("seed") / "seed.gguf"
    ones = np.ones((1, 32), dtype=np.float32)
    tensors = [
        ("a", np.arange(6, dtype=np.float32).reshape(2, 3), None),
        ("b", quantize(ones, GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0),
        ("c", np.arange(4, dtype=np.float16), None),
    ]
    write_model(path, alignment=32, tensors=tensors)
    layout = Layout(path)
    kv: list[Field] = []
    for key in layout.kv:
        kv += [(layout.key_at(key), 8), (layout.type_at(key), 4)]
    for key in ("test.arr_u8", "test.arr_str", "test.arr_i64", "test.arr_bool"):
        kv += [(layout.value_at(key), 4), (layout.value_at(key) + 4, 8)]
    kv += [(layout.value_at("test.text"), 8), (layout.value_at("general.alignment"), 4)]
    infos: list[Field] = []
    for name, (at, n_dims) in layout.tensors.items():
        infos += [(at, 8), (layout.ndims_at(name), 4), (layout.ttype_at(name), 4)]
        infos += [(layout.offset_at(name), 8)]
        infos += [(layout.dim_at(name, axis), 8) for axis in range(n_dims)]
    fields = {"header": [(4, 4), (8, 8), (16, 8)], "kv": kv, "tensor": infos}
    return path.read_bytes(), fields


@pytest.fixture(scope="module")
def fuzz_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "fuzz.gguf"


FUZZ = settings(
    max_examples=800,
    deadline=2000,  # a hang or a quadratic blow-up shows up as a deadline failure
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
INTERESTING = [0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 31, 32, 63, 64, 2**31, 2**32 - 1, 2**32, 2**63]


def draw_field_value(data: st.DataObject, raw: bytearray, field: Field) -> int:
    at, size = field
    limit = 2 ** (8 * size) - 1
    original = int.from_bytes(raw[at : at + size], "little")
    nudged = st.integers(-70, 70).map(lambda delta: min(max(original + delta, 0), limit))
    choices = st.sampled_from([v for v in INTERESTING if v <= limit]) | st.integers(0, limit)
    return data.draw(nudged | choices, label="value")


@FUZZ
@given(data=st.data())
def test_fuzz_mutated_real_file(
    seed: tuple[bytes, dict[str, list[Field]]], fuzz_path: Path, data: st.DataObject
) -> None:
    raw_seed, fields = seed
    raw = bytearray(raw_seed)
    for _ in range(data.draw(st.integers(0, 3), label="mutations")):
        kind = data.draw(st.sampled_from(["byte", "header", "kv", "tensor"]), label="kind")
        if kind == "byte":  # anywhere, data included
            at = data.draw(st.integers(0, len(raw) - 1), label="at")
            raw[at] = data.draw(st.integers(0, 255), label="byte")
            continue
        field = data.draw(st.sampled_from(fields[kind]), label="field")
        value = draw_field_value(data, raw, field)
        raw[field[0] : field[0] + field[1]] = value.to_bytes(field[1], "little")
    if data.draw(st.integers(0, 3), label="truncate") == 3:
        raw = raw[: data.draw(st.integers(0, len(raw)), label="cut")]
    fuzz_path.write_bytes(bytes(raw))
    with peak_memory() as peak:
        found, errors = check_gguf(fuzz_path)
    event(str(errors[0]["rule"]) if errors else "pass")
    assert (found is None) == bool(errors)
    assert all(error["rule"] in RULES for error in errors)
    assert peak[0] < 2 * 2**20, f"{peak[0]} bytes traced"
    if found is not None:  # anything we pass, the reference reader reads the same way
        assert_matches_reference(found, fuzz_path)
