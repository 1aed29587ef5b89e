"""Structure checks for GGUF files (llama.cpp's one-file model format): header only, no tensor is
loaded and nothing is run.

Layout, little-endian, versions 2 and 3 (v3 only added big-endian files, which are refused
here): magic `GGUF`, u32 version, u64 tensor count, u64 key-value count; the key-value pairs;
the tensor infos; zero padding up to `general.alignment` (32 by default); the tensor data.
A key-value pair is a string key, a u32 value type and the value. A string is a u64 byte
length and that many UTF-8 bytes. An array is a u32 element type, a u64 element count and the
elements. A tensor info is a string name, a u32 dimension count, that many u64 dims (innermost
first: NumPy shape (4, 64) is stored as [64, 4]), a u32 ggml type and a u64 offset counted
from the start of the data section, not from the start of the file.

Reads are bounded: the file is read front to back with seek/read, never mapped, and only up to
the end of the tensor infos. Every count read from the file (key-value pairs, tensors, array
elements, string bytes, dimensions) is checked against the bytes left before it drives a
loop or an allocation. The header (everything before the data section) is capped at
`max_metadata_bytes` (64 MiB by default), arrays at `max_array_len` elements and the tensor
count at `max_tensors`: local policies, not format limits. The checks follow llama.cpp's
reader (ggml/src/gguf.cpp) and are stricter where noted. A pass says the structure is sound;
it says nothing about whether the bytes match the source (checksums) or the model runs.

Every failure names one rule id:

    unreadable        cannot open or read the file, or it is not a regular file
    magic             the file does not start with `GGUF`, or it is a big-endian GGUF file
                      (byte-swapped magic, or a version whose low 16 bits are zero)
    version           version 0, 1 (no longer read by llama.cpp) or above 3
    truncated         a read would pass the end of the file (an interrupted download?)
    metadata-cap      a read would pass `max_metadata_bytes` (raise it for a trusted file)
    count             the tensor count or key-value count cannot fit in the bytes left
                      (each pair takes at least 14 bytes, each tensor info 24), or the
                      tensor count exceeds `max_tensors`
    string-length     a string's length runs past the end of the file or the cap
    array-length      an array's element count cannot fit in the bytes left, or exceeds
                      `max_array_len`
    empty-key         a metadata key is the empty string
    duplicate-key     a metadata key appears twice
    value-type        a value or array element type id is not a GGUF value type (0..12)
    nested-array      an array of arrays (llama.cpp refuses them too)
    bool              a bool byte other than 0 or 1 (llama.cpp reads any non-zero as true;
                      stricter here so one file cannot mean two things)
    utf8              a key, string value or tensor name is not valid UTF-8 (stricter than
                      llama.cpp, which keeps raw bytes)
    alignment         `general.alignment` is not a single u32, or is 0 or not a power of two
    tensor-name       a tensor name of 64 bytes or more (llama.cpp's GGML_MAX_NAME)
    duplicate-tensor  two tensor infos share one name
    dims              more than 4 dimensions, or a dim of 2**63 or more (negative in the
                      int64 llama.cpp reads it as). A dim of 0 is valid, as in llama.cpp
    overflow          the element count or the byte size passes 2**63 - 1
    tensor-type       a ggml type id not in GGML_TYPES (unknown, or removed from the format)
    block-size        the innermost dim is not a multiple of the type's block size (what
                      llama.cpp checks; it implies the element count is a multiple too)
    offset            a tensor's offset is not the running sum of the padded sizes before it
                      (as llama.cpp requires), or its data runs past the end of the file
    split             a `-0000i-of-0000N.gguf` name with a bad number or a missing part

`read_gguf` raises `GGUFInputError` (an `InputError`) for the first violated rule;
`check_gguf` reports instead of raising; `split_parts` lists and checks the parts of a split
model by their names.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, NoReturn

from lineage.errors import InputError, RuleError
from lineage.formats.messages import show as _show
from lineage.userfiles import open_regular

__all__ = [
    "DEFAULT_ALIGNMENT",
    "DEFAULT_MAX_ARRAY_LEN",
    "DEFAULT_MAX_METADATA_BYTES",
    "DEFAULT_MAX_TENSORS",
    "FILE_TYPES",
    "GGML_TYPES",
    "RULES",
    "VALUE_TYPES",
    "GGUFFile",
    "GGUFInputError",
    "GGUFTensor",
    "check_gguf",
    "read_gguf",
    "split_parts",
]

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
DEFAULT_MAX_METADATA_BYTES = 64 * 2**20
# Real files stay far below these: the largest vocabularies hold ~262k tokens, and models
# with merged expert tensors have a few thousand tensors.
DEFAULT_MAX_ARRAY_LEN = 2**22
DEFAULT_MAX_TENSORS = 2**18
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NAME_BYTES = 63  # GGML_MAX_NAME is 64 including the terminating NUL
INT64_MAX = 2**63 - 1
HEADER_BYTES = 4 + 4 + 8 + 8
# The smallest possible entries, used to refuse counts the file cannot back before looping:
# a key-value pair is a key length (8), a key of at least 1 byte, a type (4) and a value of
# at least 1 byte (u8, i8, bool); a tensor info is a name length (8), an empty name, a dim
# count (4), no dims, a type (4) and an offset (8).
MIN_KV_BYTES = 8 + 1 + 4 + 1
MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8
MAX_LISTED = 5

STRING = 8
ARRAY = 9
BOOL = 7
UINT32 = 4

# GGUF value type id -> (name, struct format); strings and arrays have no fixed format.
VALUE_TYPES: dict[int, tuple[str, str]] = {
    0: ("uint8", "B"),
    1: ("int8", "b"),
    2: ("uint16", "H"),
    3: ("int16", "h"),
    4: ("uint32", "I"),
    5: ("int32", "i"),
    6: ("float32", "f"),
    7: ("bool", "B"),  # read as bytes so that values other than 0 and 1 can be refused
    8: ("string", ""),
    9: ("array", ""),
    10: ("uint64", "Q"),
    11: ("int64", "q"),
    12: ("float64", "d"),
}

# ggml type id -> (name, elements per block, bytes per block), copied from the gguf package
# 0.19.0 (gguf/constants.py: GGMLQuantizationType, GGML_QUANT_SIZES with QK_K = 256). Ids 4, 5,
# 31-33 and 36-38 were removed from the format. llama.cpp itself already has 42 (Q2_0, blocks
# of 64 in 18 bytes), which the gguf package does not know yet; it is left out until it does.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}

# general.file_type values (llama_ftype in llama.h; LlamaFileType in the gguf package 0.19.0).
FILE_TYPES: dict[int, str] = {
    0: "ALL_F32",
    1: "MOSTLY_F16",
    2: "MOSTLY_Q4_0",
    3: "MOSTLY_Q4_1",
    7: "MOSTLY_Q8_0",
    8: "MOSTLY_Q5_0",
    9: "MOSTLY_Q5_1",
    10: "MOSTLY_Q2_K",
    11: "MOSTLY_Q3_K_S",
    12: "MOSTLY_Q3_K_M",
    13: "MOSTLY_Q3_K_L",
    14: "MOSTLY_Q4_K_S",
    15: "MOSTLY_Q4_K_M",
    16: "MOSTLY_Q5_K_S",
    17: "MOSTLY_Q5_K_M",
    18: "MOSTLY_Q6_K",
    19: "MOSTLY_IQ2_XXS",
    20: "MOSTLY_IQ2_XS",
    21: "MOSTLY_Q2_K_S",
    22: "MOSTLY_IQ3_XS",
    23: "MOSTLY_IQ3_XXS",
    24: "MOSTLY_IQ1_S",
    25: "MOSTLY_IQ4_NL",
    26: "MOSTLY_IQ3_S",
    27: "MOSTLY_IQ3_M",
    28: "MOSTLY_IQ2_S",
    29: "MOSTLY_IQ2_M",
    30: "MOSTLY_IQ4_XS",
    31: "MOSTLY_IQ1_M",
    32: "MOSTLY_BF16",
    36: "MOSTLY_TQ1_0",
    37: "MOSTLY_TQ2_0",
    38: "MOSTLY_MXFP4_MOE",
    39: "MOSTLY_NVFP4",
    40: "MOSTLY_Q1_0",
    1024: "GUESSED",
}

RULES = (
    "unreadable",
    "magic",
    "version",
    "truncated",
    "metadata-cap",
    "count",
    "string-length",
    "array-length",
    "empty-key",
    "duplicate-key",
    "value-type",
    "nested-array",
    "bool",
    "utf8",
    "alignment",
    "tensor-name",
    "duplicate-tensor",
    "dims",
    "overflow",
    "tensor-type",
    "block-size",
    "offset",
    "split",
)

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_SPLIT_NAME = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    dims: tuple[int, ...]  # GGUF order, innermost first (NumPy's shape reversed)
    type_id: int
    type_name: str
    offset: int  # relative to the data section
    nbytes: int
    elements: int

    @property
    def shape(self) -> tuple[int, ...]:
        """The dims in NumPy / PyTorch order, outermost first."""
        return tuple(reversed(self.dims))


@dataclass
class GGUFFile:
    path: str
    version: int
    alignment: int
    metadata: dict[str, object]
    tensors: list[GGUFTensor]
    data_offset: int  # file offset of the data section (the end of the header if no tensors)
    file_size: int
    # key -> GGUF value type name as stored, e.g. "uint32" or "array[string]"
    value_types: dict[str, str] = field(default_factory=dict)

    @property
    def parameters(self) -> int:
        return sum(t.elements for t in self.tensors)

    @property
    def architecture(self) -> str | None:
        return _str_or_none(self.metadata.get("general.architecture"))

    @property
    def name(self) -> str | None:
        return _str_or_none(self.metadata.get("general.name"))

    def arch_value(self, key: str) -> object | None:
        """The value of `<architecture>.<key>`, e.g. arch_value("context_length")."""
        arch = self.architecture
        return None if arch is None else self.metadata.get(f"{arch}.{key}")

    @property
    def file_type_id(self) -> int | None:
        return _int_or_none(self.metadata.get("general.file_type"))

    @property
    def file_type(self) -> str | None:
        """general.file_type as a name such as MOSTLY_Q4_K_M; UNKNOWN_<n> for a newer id."""
        value = self.file_type_id
        if value is None:
            return None
        return FILE_TYPES.get(value, f"UNKNOWN_{value}")

    @property
    def chat_template(self) -> str | None:
        return _str_or_none(self.metadata.get("tokenizer.chat_template"))

    @property
    def tokenizer_model(self) -> str | None:
        return _str_or_none(self.metadata.get("tokenizer.ggml.model"))

    @property
    def vocab_size(self) -> int | None:
        tokens = self.metadata.get("tokenizer.ggml.tokens")
        return len(tokens) if isinstance(tokens, list) else None

    @property
    def context_length(self) -> int | None:
        return _int_or_none(self.arch_value("context_length"))

    @property
    def block_count(self) -> int | None:
        return _int_or_none(self.arch_value("block_count"))

    @property
    def embedding_length(self) -> int | None:
        return _int_or_none(self.arch_value("embedding_length"))

    @property
    def head_count(self) -> int | list[int] | None:
        """Attention heads; some architectures store one count per layer (a list)."""
        return _int_or_int_list(self.arch_value("attention.head_count"))

    @property
    def head_count_kv(self) -> int | list[int] | None:
        return _int_or_int_list(self.arch_value("attention.head_count_kv"))

    @property
    def data_size(self) -> int:
        return self.file_size - self.data_offset


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _int_or_int_list(value: object) -> int | list[int] | None:
    if isinstance(value, list) and all(_int_or_none(v) is not None for v in value):
        return value
    return _int_or_none(value)


class GGUFInputError(RuleError):
    """A rule broken by a GGUF file."""


# ---------------------------------------------------------------------------------------------
# Bounded reading


class _Reader:
    """Front-to-back reads, each checked against the file end and the header cap first."""

    def __init__(self, path: Path, stream: BinaryIO, file_size: int, cap: int) -> None:
        self.path = path
        self.stream = stream
        self.file_size = file_size
        self.cap = cap
        self.pos = 0

    def left(self) -> int:
        """Bytes that may still be read: up to the file end or the header cap, if nearer."""
        return max(0, min(self.file_size, self.cap) - self.pos)

    def limit_name(self) -> str:
        if self.file_size <= self.cap:
            return f"the end of the file at byte {self.file_size}"
        return f"the metadata cap of {self.cap} bytes (max_metadata_bytes)"

    def fail(self, rule_id: str, message: str, at: int | None = None) -> NoReturn:
        where = f"offset {self.pos if at is None else at}"
        raise GGUFInputError(self.path, rule_id, message, where=where)

    def take(self, count: int, what: str) -> bytes:
        if count > self.left():
            if self.pos + count > self.file_size:
                self.fail(
                    "truncated",
                    f"{what} needs {count} bytes but the file ends at byte {self.file_size} "
                    "(an interrupted download?)",
                )
            self.fail(
                "metadata-cap",
                f"{what} runs past the metadata cap of {self.cap} bytes (max_metadata_bytes)",
            )
        try:
            data = self.stream.read(count)
        except OSError as exc:
            self.fail("unreadable", f"read failed ({exc.strerror or exc})")
        if len(data) != count:  # the file shrank under us, e.g. a download still being written
            self.fail("truncated", f"the file ended while reading {what}")
        self.pos += count
        return data

    def u32(self, what: str) -> int:
        return int(_U32.unpack(self.take(4, what))[0])

    def u64(self, what: str) -> int:
        return int(_U64.unpack(self.take(8, what))[0])

    def string(self, what: str) -> str:
        at = self.pos
        length = self.u64(f"{what} length")
        if length > self.left():
            self.fail(
                "string-length",
                f"{what} declares {length} bytes, past {self.limit_name()}",
                at,
            )
        return self.decode(self.take(length, what), what, at)

    def decode(self, raw: bytes, what: str, at: int) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.fail("utf8", f"{what} is not valid UTF-8 (byte {exc.start} of {len(raw)})", at)


# ---------------------------------------------------------------------------------------------
# One file


def read_gguf(
    path: Path | str,
    *,
    max_metadata_bytes: int = DEFAULT_MAX_METADATA_BYTES,
    max_array_len: int = DEFAULT_MAX_ARRAY_LEN,
    max_tensors: int = DEFAULT_MAX_TENSORS,
) -> GGUFFile:
    """Read and check one file's header and tensor infos; raise on the first violated rule."""
    path = Path(path)
    with _open(path) as stream:
        file_size = os.fstat(stream.fileno()).st_size
        reader = _Reader(path, stream, file_size, max_metadata_bytes)
        return _read(reader, max_array_len, max_tensors)


def check_gguf(
    path: Path | str,
    *,
    max_metadata_bytes: int = DEFAULT_MAX_METADATA_BYTES,
    max_array_len: int = DEFAULT_MAX_ARRAY_LEN,
    max_tensors: int = DEFAULT_MAX_TENSORS,
) -> tuple[GGUFFile | None, list[dict[str, str | None]]]:
    """Like read_gguf, but reports the violated rule instead of raising."""
    try:
        found = read_gguf(
            path,
            max_metadata_bytes=max_metadata_bytes,
            max_array_len=max_array_len,
            max_tensors=max_tensors,
        )
    except GGUFInputError as exc:
        return None, [_error_dict(exc)]
    return found, []


def _error_dict(exc: GGUFInputError) -> dict[str, str | None]:
    return {"file": exc.path, "rule": exc.rule_id, "message": exc.message, "where": exc.where}


def _open(path: Path) -> BinaryIO:
    """Opened without waiting on a FIFO; anything but a regular file is `unreadable`."""
    try:
        return open_regular(path, what="GGUF file")
    except InputError as exc:
        raise GGUFInputError(path, "unreadable", exc.rule) from None
    except ValueError as exc:  # a NUL byte in the path
        raise GGUFInputError(path, "unreadable", f"cannot open ({exc})") from None


def _read(reader: _Reader, max_array_len: int, max_tensors: int) -> GGUFFile:
    version = _read_preamble(reader)
    n_tensors, n_kv = _read_counts(reader, max_tensors)
    metadata, value_types, alignment = _read_metadata(reader, n_kv, max_array_len)
    infos = _read_tensor_infos(reader, n_tensors)
    data_offset = _data_offset(reader, alignment, bool(infos))
    tensors = _check_offsets(reader, infos, alignment, data_offset)
    return GGUFFile(
        path=str(reader.path),
        version=version,
        alignment=alignment,
        metadata=metadata,
        tensors=tensors,
        data_offset=data_offset,
        file_size=reader.file_size,
        value_types=value_types,
    )


def _read_preamble(reader: _Reader) -> int:
    magic = reader.take(4, "the magic")
    if magic != MAGIC:
        hint = " (byte-swapped: a big-endian file?)" if magic == MAGIC[::-1] else ""
        reader.fail("magic", f"starts with {magic!r}, not {MAGIC!r}{hint}", 0)
    version = reader.u32("the version")
    if version == 0:
        reader.fail("version", "version 0 is not a GGUF version", 4)
    if version & 0xFFFF == 0:  # what llama.cpp tests: a small version read with swapped bytes
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        reader.fail(
            "magic",
            f"version reads as {version:#010x}: a big-endian GGUF file (version {swapped}); "
            "only little-endian files are read, as llama.cpp does on common hosts",
            4,
        )
    if version not in SUPPORTED_VERSIONS:
        why = "no longer read by llama.cpp" if version == 1 else "newer than this reader"
        reader.fail("version", f"GGUF version {version} is {why} (reads 2 and 3)", 4)
    return version


def _read_counts(reader: _Reader, max_tensors: int) -> tuple[int, int]:
    n_tensors = reader.u64("the tensor count")
    n_kv = reader.u64("the key-value count")
    if n_tensors > max_tensors:
        reader.fail(
            "count",
            f"{n_tensors} tensors exceeds the local cap of {max_tensors} (max_tensors)",
            8,
        )
    # Checked before any loop: a count the remaining bytes cannot back is a lie.
    need = n_kv * MIN_KV_BYTES + n_tensors * MIN_TENSOR_INFO_BYTES
    if need > reader.left():
        reader.fail(
            "count",
            f"{n_tensors} tensors and {n_kv} key-value pairs need at least {need} bytes, "
            f"past {reader.limit_name()}",
            8,
        )
    return n_tensors, n_kv


# ---------------------------------------------------------------------------------------------
# Metadata


def _read_metadata(
    reader: _Reader, n_kv: int, max_array_len: int
) -> tuple[dict[str, object], dict[str, str], int]:
    metadata: dict[str, object] = {}
    value_types: dict[str, str] = {}
    alignment_at: int | None = None
    for _ in range(n_kv):  # bounded: _read_counts checked n_kv against the bytes left
        at = reader.pos
        key = reader.string("a metadata key")
        if not key:
            reader.fail("empty-key", "a metadata key is the empty string", at)
        if key in metadata:
            reader.fail("duplicate-key", f"metadata key {_show(key)} appears twice", at)
        metadata[key], value_types[key] = _read_value(reader, key, max_array_len)
        if key == "general.alignment":
            alignment_at = at
    alignment = _alignment(reader, metadata, value_types, alignment_at)
    return metadata, value_types, alignment


def _read_value(reader: _Reader, key: str, max_array_len: int) -> tuple[object, str]:
    at = reader.pos
    type_id = reader.u32(f"the value type of {_show(key)}")
    if type_id == ARRAY:
        return _read_array(reader, key, max_array_len)
    _check_value_type(reader, key, type_id, at)
    return _read_scalar(reader, key, type_id), VALUE_TYPES[type_id][0]


def _check_value_type(reader: _Reader, key: str, type_id: int, at: int) -> None:
    if type_id not in VALUE_TYPES:
        reader.fail("value-type", f"{_show(key)} has value type {type_id}, not 0..12", at)


def _read_scalar(reader: _Reader, key: str, type_id: int) -> object:
    what = f"the value of {_show(key)}"
    if type_id == STRING:
        return reader.string(what)
    fmt = VALUE_TYPES[type_id][1]
    at = reader.pos
    (value,) = struct.unpack("<" + fmt, reader.take(struct.calcsize(fmt), what))
    if type_id == BOOL:
        if value > 1:
            reader.fail("bool", f"{what} is bool byte {value}, not 0 or 1", at)
        return value == 1
    return value


def _read_array(reader: _Reader, key: str, max_array_len: int) -> tuple[list[object], str]:
    at = reader.pos
    item_type = reader.u32(f"the array element type of {_show(key)}")
    if item_type == ARRAY:
        reader.fail("nested-array", f"{_show(key)} is an array of arrays", at)
    _check_value_type(reader, key, item_type, at)
    count = reader.u64(f"the array length of {_show(key)}")
    item_bytes = 8 if item_type == STRING else struct.calcsize(VALUE_TYPES[item_type][1])
    if count > max_array_len:
        reader.fail(
            "array-length",
            f"{_show(key)} declares {count} elements, over the local cap of {max_array_len} "
            "(max_array_len)",
            at,
        )
    if count * item_bytes > reader.left():  # before any loop or allocation
        reader.fail(
            "array-length",
            f"{_show(key)} declares {count} elements of at least {item_bytes} bytes, "
            f"past {reader.limit_name()}",
            at,
        )
    type_name = f"array[{VALUE_TYPES[item_type][0]}]"
    if item_type == STRING:
        what = f"an element of {_show(key)}"
        return [reader.string(what) for _ in range(count)], type_name
    return _read_number_array(reader, key, item_type, count), type_name


def _read_number_array(reader: _Reader, key: str, item_type: int, count: int) -> list[object]:
    fmt = VALUE_TYPES[item_type][1]
    at = reader.pos
    raw = reader.take(count * struct.calcsize(fmt), f"the elements of {_show(key)}")
    if item_type == BOOL:
        bad = raw.translate(None, b"\x00\x01")
        if bad:
            index = next(i for i, byte in enumerate(raw) if byte > 1)
            reader.fail(
                "bool",
                f"{_show(key)}[{index}] is bool byte {raw[index]}, not 0 or 1",
                at + index,
            )
        return [byte == 1 for byte in raw]
    return list(struct.unpack(f"<{count}{fmt}", raw))


def _alignment(
    reader: _Reader, metadata: dict[str, object], value_types: dict[str, str], at: int | None
) -> int:
    if at is None:
        return DEFAULT_ALIGNMENT
    value = metadata["general.alignment"]
    stored = value_types["general.alignment"]
    if stored != VALUE_TYPES[UINT32][0] or not isinstance(value, int):
        reader.fail("alignment", f"general.alignment is {stored}, not uint32", at)
    if value == 0 or value & (value - 1):
        reader.fail("alignment", f"general.alignment is {value}, not a power of two", at)
    return value


# ---------------------------------------------------------------------------------------------
# Tensor infos


@dataclass(frozen=True)
class _TensorInfo:
    tensor: GGUFTensor
    at: int  # file offset of the info, for messages


def _read_tensor_infos(reader: _Reader, n_tensors: int) -> list[_TensorInfo]:
    infos: list[_TensorInfo] = []
    seen: set[str] = set()
    for index in range(n_tensors):  # bounded: _read_counts checked n_tensors
        infos.append(_read_tensor_info(reader, index, seen))
    return infos


def _read_tensor_info(reader: _Reader, index: int, seen: set[str]) -> _TensorInfo:
    at = reader.pos
    name = _read_tensor_name(reader, index)
    if name in seen:
        reader.fail("duplicate-tensor", f"tensor name {_show(name)} appears twice", at)
    seen.add(name)
    dims = _read_dims(reader, name)
    elements = _element_count(reader, name, dims)
    type_at = reader.pos
    type_id = reader.u32(f"the type of tensor {_show(name)}")
    if type_id not in GGML_TYPES:
        reader.fail("tensor-type", f"tensor {_show(name)} has unknown ggml type {type_id}", type_at)
    type_name, block, block_bytes = GGML_TYPES[type_id]
    row = dims[0] if dims else 1
    if row % block:
        reader.fail(
            "block-size",
            f"tensor {_show(name)} is {type_name} with rows of {row} elements, "
            f"not a multiple of its block size {block}",
            type_at,
        )
    nbytes = elements // block * block_bytes
    if nbytes > INT64_MAX:
        reader.fail("overflow", f"tensor {_show(name)} would take {nbytes} bytes", type_at)
    offset = reader.u64(f"the offset of tensor {_show(name)}")
    tensor = GGUFTensor(name, dims, type_id, type_name, offset, nbytes, elements)
    return _TensorInfo(tensor, at)


def _read_tensor_name(reader: _Reader, index: int) -> str:
    at = reader.pos
    what = f"the name of tensor {index}"
    length = reader.u64(f"{what} length")
    if length > reader.left():
        reader.fail(
            "string-length", f"{what} declares {length} bytes, past {reader.limit_name()}", at
        )
    if length > MAX_NAME_BYTES:  # llama.cpp refuses these (GGML_MAX_NAME)
        reader.fail("tensor-name", f"{what} is {length} bytes, over {MAX_NAME_BYTES}", at)
    return reader.decode(reader.take(length, what), what, at)


def _read_dims(reader: _Reader, name: str) -> tuple[int, ...]:
    at = reader.pos
    n_dims = reader.u32(f"the dimension count of tensor {_show(name)}")
    if n_dims > MAX_DIMS:
        reader.fail("dims", f"tensor {_show(name)} has {n_dims} dimensions, over 4", at)
    dims = tuple(reader.u64(f"a dimension of tensor {_show(name)}") for _ in range(n_dims))
    for axis, dim in enumerate(dims):
        if dim > INT64_MAX:  # llama.cpp reads dims as int64 and refuses negative ones
            reader.fail("dims", f"tensor {_show(name)} dim {axis} is {dim}, over 2**63 - 1", at)
    return dims


def _element_count(reader: _Reader, name: str, dims: tuple[int, ...]) -> int:
    # Running product in order, as llama.cpp checks it: a zero dim makes every later one safe.
    count = 1
    for dim in dims:
        count *= dim
        if count > INT64_MAX:
            reader.fail(
                "overflow",
                f"tensor {_show(name)} dims {list(dims)} overflow a 64-bit element count",
            )
    return count


def _data_offset(reader: _Reader, alignment: int, has_tensors: bool) -> int:
    # As llama.cpp: the data section starts at the next multiple of the alignment, but only
    # when there are tensors; tensor-less files (vocabularies) may end unpadded.
    if not has_tensors:
        return reader.pos
    start = _pad(reader.pos, alignment)
    if start > reader.file_size:
        reader.fail(
            "truncated",
            f"the data section starts at byte {start}, past the end of the file at "
            f"byte {reader.file_size}",
        )
    return start


def _check_offsets(
    reader: _Reader, infos: list[_TensorInfo], alignment: int, data_offset: int
) -> list[GGUFTensor]:
    # Offsets must be exactly the running sum of padded sizes in declared order (what
    # llama.cpp requires), which also rules out gaps and overlaps. The running sum cannot pass
    # 2**63 because each tensor is first checked to end inside the file.
    expected = 0
    for info in infos:
        tensor = info.tensor
        if tensor.offset != expected:
            reader.fail(
                "offset",
                f"tensor {_show(tensor.name)} has offset {tensor.offset}, expected {expected} "
                f"(the padded sizes of the tensors before it, alignment {alignment})",
                info.at,
            )
        end = data_offset + tensor.offset + tensor.nbytes
        if end > reader.file_size:
            reader.fail(
                "offset",
                f"tensor {_show(tensor.name)} ends at byte {end}, past the end of the file at "
                f"byte {reader.file_size} (an interrupted download?)",
                info.at,
            )
        expected += _pad(tensor.nbytes, alignment)
    return [info.tensor for info in infos]


def _pad(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


# ---------------------------------------------------------------------------------------------
# Split models


def split_parts(path: Path | str) -> list[Path]:
    """All parts of a split model named like `x-00001-of-00003.gguf`, each checked present.

    A name without the split pattern is one part by itself. Raises GGUFInputError (rule
    `split`) for a part number of 0 or above the part count, or for missing parts.
    """
    path = Path(path)
    match = _SPLIT_NAME.match(path.name)
    if match is None:
        return [path]
    number, total = int(match["no"]), int(match["count"])
    if not 1 <= number <= total:
        raise GGUFInputError(path, "split", f"part {number} of {total} is not a valid part")
    parts = [
        path.with_name(f"{match['stem']}-{i:05d}-of-{total:05d}.gguf") for i in range(1, total + 1)
    ]
    missing: list[str] = []
    for part in parts:
        if not part.is_file():
            missing.append(part.name)
            if len(missing) > MAX_LISTED:  # enough to act on; stop probing a huge count
                break
    if missing:
        shown = ", ".join(missing[:MAX_LISTED]) + (", ..." if len(missing) > MAX_LISTED else "")
        raise GGUFInputError(path, "split", f"missing part(s) of {total}: {shown}")
    return parts
