"""Read an ONNX model's structure without running it, and without the onnx package.

An .onnx file is one protobuf `ModelProto` (field numbers from onnx/onnx.proto, IR version 14).
This module decodes the protobuf wire format itself, bounded: the file is read on demand in
blocks, so tensor bytes that are skipped (raw_data, external files) are never read into memory;
varints longer than 10 bytes or above 2**64, lengths that run past their enclosing message,
group wire types, field number 0 and nesting deeper than `max_depth` are refused. Fields this
reader does not use (node attributes, doc strings, training info, functions) are skipped by
their length without being parsed: a structure reader, not a validator. Nodes inside
control-flow subgraphs (an If's branches, a Loop's body) are attributes, so they are not read.

With `nodes=True` the reader also keeps each node's op type, inputs and outputs in file order
(`OnnxModel.nodes`), the edges a graph partition is counted from; without it only the op
type counts are kept.

Decoding follows protobuf's own rules where they matter for agreement with `onnx.load`: a
singular message field that appears twice is merged, a scalar that appears twice keeps the
last value, repeated scalars are read packed or unpacked, a known field carrying the wrong
wire type is treated as an unknown field, and an unknown enum value leaves the field unset.
It is stricter in two places: a string field must be UTF-8 (upb hands back raw bytes), and a
10-byte varint must fit in 64 bits (upb drops the excess bits).

Every failure names one rule id:

    unreadable        the model file cannot be opened or is not a regular file
    too-large         the model file is larger than `max_bytes` (protobuf's own limit is 2 GiB),
                      or, read with `nodes=True`, its nodes name more than MAX_NODE_NAMES
                      inputs and outputs (each kept in memory)
    protobuf          malformed wire data: a truncated field, a varint longer than 10 bytes or
                      above 2**64, a length past the end of its message, a group or invalid
                      wire type, field number 0, nesting deeper than `max_depth`, a packed
                      field that does not divide into whole values, or a string that is not
                      UTF-8 or longer than MAX_TEXT_BYTES
    not-onnx          the message holds no graph
    data-type         a TensorProto data type id this reader does not know (an initializer
                      may not be UNDEFINED either)
    dims              an initializer dim is negative, a shape has more than MAX_RANK dims, or
                      an element count passes 2**64
    external-path     external data whose location is empty, absolute, contains `..`, or
                      leaves the model's folder through a symbolic link
    external-missing  a referenced external data file does not exist or is not a regular file
    external-range    an external offset/length that is not a decimal integer, or that ends
                      beyond the end of the external file

`read_onnx` raises `OnnxInputError` (an `InputError` carrying `rule_id`) for the first
violated rule.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import BinaryIO, NoReturn

from lineage.errors import InputError, RuleError
from lineage.formats.messages import show as _show
from lineage.userfiles import TOO_LARGE, open_regular

__all__ = [
    "DATA_TYPES",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "RULES",
    "ExternalData",
    "Initializer",
    "Node",
    "OnnxInputError",
    "OnnxModel",
    "ValueInfo",
    "read_onnx",
]

DEFAULT_MAX_BYTES = 2**31  # protobuf refuses messages of 2 GiB and more
DEFAULT_MAX_DEPTH = 32  # real models nest about 7 deep; upb's own limit is 100
MAX_TEXT_BYTES = 2**20  # names, op types and dim params are short; a huge one is an attack
MAX_RANK = 1024
MAX_NODE_NAMES = 2**24  # a 16.7M-edge graph is far past any real one; each name costs memory
MAX_VARINT_BYTES = 10
MAX_FIELD_NUMBER = 2**29 - 1
U64_MAX = 2**64 - 1
BLOCK_BYTES = 2**16
CHUNK_BYTES = 2**20

RULES = (
    "unreadable",
    "too-large",
    "protobuf",
    "not-onnx",
    "data-type",
    "dims",
    "external-path",
    "external-missing",
    "external-range",
)

# Wire types (the protobuf encoding guide). 3 and 4 are the deprecated groups.
VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5

# TensorProto.DataType id -> (name, bits per element); None bits: variable size (STRING).
DATA_TYPES: dict[int, tuple[str, int | None]] = {
    0: ("UNDEFINED", None),
    1: ("FLOAT", 32),
    2: ("UINT8", 8),
    3: ("INT8", 8),
    4: ("UINT16", 16),
    5: ("INT16", 16),
    6: ("INT32", 32),
    7: ("INT64", 64),
    8: ("STRING", None),
    9: ("BOOL", 8),
    10: ("FLOAT16", 16),
    11: ("DOUBLE", 64),
    12: ("UINT32", 32),
    13: ("UINT64", 64),
    14: ("COMPLEX64", 64),
    15: ("COMPLEX128", 128),
    16: ("BFLOAT16", 16),
    17: ("FLOAT8E4M3FN", 8),
    18: ("FLOAT8E4M3FNUZ", 8),
    19: ("FLOAT8E5M2", 8),
    20: ("FLOAT8E5M2FNUZ", 8),
    21: ("UINT4", 4),
    22: ("INT4", 4),
    23: ("FLOAT4E2M1", 4),
    24: ("FLOAT8E8M0", 8),
    25: ("UINT2", 2),
    26: ("INT2", 2),
    27: ("FLOAT6E2M3", 6),
    28: ("FLOAT6E3M2", 6),
}
UNDEFINED = 0
EXTERNAL = 1  # TensorProto.DataLocation

# Bytes below 0x80 end a varint; the other half continue it.
_HIGH_BYTES = bytes(range(0x80, 0x100))
_LONG_VARINT = re.compile(rb"[\x80-\xff]{%d}" % MAX_VARINT_BYTES)


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class ExternalData:
    location: str  # as written in the model, relative to the model's folder
    offset: int
    length: int | None  # None: to the end of the file
    file_size: int


@dataclass(frozen=True)
class Initializer:
    name: str
    data_type: str
    dims: tuple[int, ...]
    elements: int  # product of dims (1 for a scalar)
    nbytes: int  # raw_data length, external length, or the typed repeated fields' data size
    storage: str  # "raw", "typed", "external" or "none"
    external: ExternalData | None = None

    @property
    def expected_nbytes(self) -> int | None:
        """What dims x data type call for (packed sub-byte types round up); None for STRING."""
        bits = DATA_TYPE_BITS[self.data_type]
        return None if bits is None else -(-self.elements * bits // 8)


@dataclass(frozen=True)
class ValueInfo:
    name: str
    kind: str  # "tensor", "sparse_tensor", "sequence<tensor>", "map<INT64,tensor>", ... or ""
    elem_type: str | None  # of the innermost tensor; None when there is none
    shape: tuple[int | str | None, ...] | None  # None: rank unknown; a None dim: unknown size


@dataclass(frozen=True)
class Node:
    op_type: str  # "Relu", or "domain:op" outside the default domain
    name: str
    inputs: tuple[str, ...]  # "" marks an omitted optional input, as in ONNX
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class OnnxModel:
    path: str
    file_size: int
    ir_version: int
    opset_import: tuple[tuple[str, int], ...]
    producer_name: str
    producer_version: str
    metadata: dict[str, str]
    graph_name: str
    node_count: int
    op_types: dict[str, int]  # "Relu", or "domain:op" outside the default domain
    inputs: tuple[ValueInfo, ...]
    outputs: tuple[ValueInfo, ...]
    initializers: tuple[Initializer, ...]
    sparse_initializers: int  # counted only: their parameters are not in `parameters`
    nodes: tuple[Node, ...] = ()  # read only with read_onnx(..., nodes=True)

    @property
    def parameters(self) -> int:
        return sum(t.elements for t in self.initializers)

    @property
    def dtype_shares(self) -> dict[str, float]:
        """Share of parameters per data type, largest first."""
        total = self.parameters
        counts: Counter[str] = Counter()
        for tensor in self.initializers:
            counts[tensor.data_type] += tensor.elements
        return {dtype: n / total for dtype, n in counts.most_common() if total}

    @property
    def external_files(self) -> tuple[str, ...]:
        return tuple(sorted({t.external.location for t in self.initializers if t.external}))


DATA_TYPE_BITS: dict[str, int | None] = dict(DATA_TYPES.values())


class OnnxInputError(RuleError):
    """A rule broken by an ONNX model."""


# ---------------------------------------------------------------------------------------------
# Reading the file in blocks


class _Source:
    """The model file, read on demand: skipped fields (tensor bytes) are never read."""

    def __init__(self, path: Path, fd: int, size: int, max_depth: int) -> None:
        self.path = path
        self.fd = fd
        self.size = size
        self.max_depth = max_depth
        self._block_start = 0
        self._block = b""

    def fail(self, message: str, at: int | None = None) -> NoReturn:
        raise OnnxInputError(
            self.path, "protobuf", message, where=None if at is None else f"byte {at}"
        )

    def read(self, offset: int, count: int) -> bytes:
        """Exactly `count` bytes at `offset` (callers check bounds against their message)."""
        start = offset - self._block_start
        if 0 <= start and start + count <= len(self._block):
            return self._block[start : start + count]
        if count > BLOCK_BYTES:  # a long string: read it once, do not cache it
            return self._pread(offset, count)
        self._block = self._pread(offset, min(BLOCK_BYTES, self.size - offset))
        self._block_start = offset
        return self._block[:count]

    def chunks(self, start: int, stop: int) -> Iterator[bytes]:
        for offset in range(start, stop, CHUNK_BYTES):
            yield self._pread(offset, min(CHUNK_BYTES, stop - offset))

    def _pread(self, offset: int, count: int) -> bytes:
        parts: list[bytes] = []
        while count > 0:
            try:
                part = os.pread(self.fd, count, offset)
            except OSError as exc:
                raise OnnxInputError(
                    self.path, "unreadable", f"read failed ({exc.strerror or exc})"
                ) from None
            if not part:  # the file shrank under us: a download or export still running?
                self.fail("the file ended while it was being read (still being written?)", offset)
            parts.append(part)
            offset += len(part)
            count -= len(part)
        return b"".join(parts)

    def varint(self, pos: int, end: int) -> tuple[int, int]:
        """Decode a varint inside [pos, end); return (value, position after it)."""
        chunk = self.read(pos, min(MAX_VARINT_BYTES, end - pos))
        value = 0
        for index, byte in enumerate(chunk):
            value |= (byte & 0x7F) << (7 * index)
            if byte < 0x80:
                if value > U64_MAX:
                    self.fail("varint value does not fit in 64 bits", pos)
                return value, pos + index + 1
        if len(chunk) == MAX_VARINT_BYTES:
            self.fail("varint longer than 10 bytes", pos)
        self.fail("varint runs past the end of its message", pos)

    def text(self, item: _Field) -> str:
        size = item.stop - item.start
        if size > MAX_TEXT_BYTES:
            self.fail(f"string field of {size} bytes exceeds {MAX_TEXT_BYTES} bytes", item.start)
        try:
            return self.read(item.start, size).decode("utf-8")
        except UnicodeDecodeError as exc:
            self.fail(f"string field is not UTF-8 (byte {exc.start} of it)", item.start)


# ---------------------------------------------------------------------------------------------
# The wire format


@dataclass(frozen=True)
class _Field:
    number: int
    wire: int
    start: int  # payload position: the value's bytes, or a length-delimited field's content
    stop: int
    value: int = 0  # the decoded varint (wire type 0 only)


def _fields(src: _Source, start: int, stop: int, depth: int, what: str) -> Iterator[_Field]:
    """The fields of one message occupying [start, stop), in file order."""
    if depth > src.max_depth:
        src.fail(f"{what} nested deeper than {src.max_depth} messages", start)
    pos = start
    while pos < stop:
        tag_at = pos
        tag, pos = src.varint(pos, stop)
        number, wire = tag >> 3, tag & 7
        if number == 0 or number > MAX_FIELD_NUMBER:
            src.fail(f"{what} has a field with number {number}", tag_at)
        if wire == VARINT:
            value, after = src.varint(pos, stop)
            yield _Field(number, wire, pos, after, value)
            pos = after
            continue
        if wire == LEN:
            size, pos = src.varint(pos, stop)
        elif wire in (I64, I32):
            size = 8 if wire == I64 else 4
        elif wire in (SGROUP, EGROUP):
            src.fail(f"{what} field {number} uses the group wire type (not used by ONNX)", tag_at)
        else:
            src.fail(f"{what} field {number} has invalid wire type {wire}", tag_at)
        if size > stop - pos:
            src.fail(f"{what} field {number} runs {size} bytes past the end of its message", pos)
        yield _Field(number, wire, pos, pos + size)
        pos += size


def _int64(value: int) -> int:
    return value - 2**64 if value >= 2**63 else value


def _int32(value: int) -> int:
    # protobuf truncates a 64-bit varint to the low 32 bits for int32 fields
    value &= 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


def _packed_varints(src: _Source, item: _Field) -> Iterator[int]:
    pos = item.start
    while pos < item.stop:
        value, pos = src.varint(pos, item.stop)
        yield value


def _count_packed_varints(src: _Source, item: _Field) -> int:
    """Count a packed field's varints in C-speed chunks, without decoding them."""
    count = 0
    carry = 0  # continuation bytes at the end of the previous chunk: one varint spans both
    for chunk in src.chunks(item.start, item.stop):
        lead = len(chunk) - len(chunk.lstrip(_HIGH_BYTES))
        if carry + lead >= MAX_VARINT_BYTES or _LONG_VARINT.search(chunk):
            src.fail("packed field holds a varint longer than 10 bytes", item.start)
        ends = len(chunk.translate(None, _HIGH_BYTES))  # bytes below 0x80 end a varint
        count += ends
        carry = len(chunk) - len(chunk.rstrip(_HIGH_BYTES)) if ends else carry + len(chunk)
    if carry:
        src.fail("packed field ends inside a varint", item.start)
    return count


def _packed_fixed(src: _Source, item: _Field, width: int) -> int:
    size = item.stop - item.start
    if size % width:
        src.fail(
            f"packed field of {size} bytes is not a whole number of {width}-byte values", item.start
        )
    return size // width


# ---------------------------------------------------------------------------------------------
# ONNX messages


@dataclass
class _Graph:
    name: str = ""
    nodes: int = 0
    keep_nodes: bool = False
    node_list: list[Node] = field(default_factory=list)
    node_names: int = 0  # inputs and outputs kept in node_list
    op_types: Counter[str] = field(default_factory=Counter)
    inputs: list[ValueInfo] = field(default_factory=list)
    outputs: list[ValueInfo] = field(default_factory=list)
    initializers: list[_Tensor] = field(default_factory=list)
    sparse_initializers: int = 0


@dataclass
class _Model:
    ir_version: int = 0
    opsets: list[tuple[str, int]] = field(default_factory=list)
    producer_name: str = ""
    producer_version: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    graph: _Graph | None = None


# The parsers below match (field number, wire type) pairs from onnx.proto; a known number with
# another wire type falls through to "unknown field, skipped", as in protobuf.


def _parse_model(src: _Source, *, keep_nodes: bool) -> _Model:
    model = _Model()
    for item in _fields(src, 0, src.size, 0, "ModelProto"):
        match item.number, item.wire:
            case 1, 0:
                model.ir_version = _int64(item.value)
            case 2, 2:
                model.producer_name = src.text(item)
            case 3, 2:
                model.producer_version = src.text(item)
            case 7, 2:
                # a repeated singular message merges
                model.graph = model.graph or _Graph(keep_nodes=keep_nodes)
                _parse_graph(src, item, 1, model.graph)
            case 8, 2:
                model.opsets.append(_parse_opset(src, item, 1))
            case 14, 2:
                key, value = _parse_string_entry(src, item, 1, "StringStringEntryProto")
                model.metadata[key] = value
    return model


def _parse_opset(src: _Source, item: _Field, depth: int) -> tuple[str, int]:
    domain, version = "", 0
    for sub in _fields(src, item.start, item.stop, depth, "OperatorSetIdProto"):
        match sub.number, sub.wire:
            case 1, 2:
                domain = src.text(sub)
            case 2, 0:
                version = _int64(sub.value)
    return domain, version


def _parse_string_entry(src: _Source, item: _Field, depth: int, what: str) -> tuple[str, str]:
    key, value = "", ""
    for sub in _fields(src, item.start, item.stop, depth, what):
        match sub.number, sub.wire:
            case 1, 2:
                key = src.text(sub)
            case 2, 2:
                value = src.text(sub)
    return key, value


def _parse_graph(src: _Source, item: _Field, depth: int, graph: _Graph) -> None:
    for sub in _fields(src, item.start, item.stop, depth, "GraphProto"):
        match sub.number, sub.wire:
            case 1, 2:
                graph.nodes += 1
                node = _parse_node(src, sub, depth + 1, keep=graph.keep_nodes)
                graph.op_types[node.op_type] += 1
                if graph.keep_nodes:
                    graph.node_list.append(node)
                    graph.node_names += len(node.inputs) + len(node.outputs)
                    if graph.node_names > MAX_NODE_NAMES:
                        raise OnnxInputError(
                            src.path, "too-large",
                            f"the nodes name more than {MAX_NODE_NAMES:,} inputs and outputs",
                            where=f"byte {sub.start}")
            case 2, 2:
                graph.name = src.text(sub)
            case 5, 2:
                graph.initializers.append(_parse_tensor(src, sub, depth + 1))
            case 11, 2:
                graph.inputs.append(_parse_value_info(src, sub, depth + 1))
            case 12, 2:
                graph.outputs.append(_parse_value_info(src, sub, depth + 1))
            case 15, 2:
                graph.sparse_initializers += 1


def _parse_node(src: _Source, item: _Field, depth: int, *, keep: bool) -> Node:
    """The node's op type; its name, inputs and outputs too when `keep` (each a string field
    under the same MAX_TEXT_BYTES check as every other)."""
    op_type, domain, name = "", "", ""
    inputs: list[str] = []
    outputs: list[str] = []
    for sub in _fields(src, item.start, item.stop, depth, "NodeProto"):
        match sub.number, sub.wire:
            case 1, 2 if keep:
                inputs.append(src.text(sub))
            case 2, 2 if keep:
                outputs.append(src.text(sub))
            case 3, 2 if keep:
                name = src.text(sub)
            case 4, 2:
                op_type = src.text(sub)
            case 7, 2:
                domain = src.text(sub)
    shown = op_type if domain in ("", "ai.onnx") else f"{domain}:{op_type}"
    return Node(shown, name, tuple(inputs), tuple(outputs))


# --- tensors


@dataclass
class _Tensor:
    """A TensorProto as decoded; turned into an Initializer once the model is known good."""

    at: int  # file position, for messages
    name: str = ""
    data_type: int = UNDEFINED
    dims: list[int] = field(default_factory=list)
    raw_bytes: int | None = None
    typed: Counter[int] = field(default_factory=Counter)  # field number -> stored values
    string_bytes: int = 0
    external: dict[str, str] = field(default_factory=dict)
    data_location: int = 0


# Typed repeated fields: number -> (wire type of one unpacked value, packed value width or 0
# for varints). float_data 4, int32_data 5, int64_data 7, double_data 10, uint64_data 11.
_TYPED_FIELDS: dict[int, tuple[int, int]] = {
    4: (I32, 4),
    5: (VARINT, 0),
    7: (VARINT, 0),
    10: (I64, 8),
    11: (VARINT, 0),
}


def _parse_tensor(src: _Source, item: _Field, depth: int) -> _Tensor:
    tensor = _Tensor(at=item.start)
    for sub in _fields(src, item.start, item.stop, depth, "TensorProto"):
        match sub.number, sub.wire:
            case 1, 0:
                _add_dim(src, tensor, sub.value)
            case 1, 2:
                for value in _packed_varints(src, sub):
                    _add_dim(src, tensor, value)
            case 2, 0:
                tensor.data_type = _int32(sub.value)
            case 6, 2:
                tensor.typed[6] += 1
                tensor.string_bytes += sub.stop - sub.start
            case 8, 2:
                tensor.name = src.text(sub)
            case 9, 2:
                tensor.raw_bytes = sub.stop - sub.start  # never read: only its length counts
            case 13, 2:
                key, text = _parse_string_entry(src, sub, depth + 1, "external_data entry")
                tensor.external[key] = text  # onnx keeps the last of duplicate keys too
            case 14, 0 if _int32(sub.value) in (0, EXTERNAL):  # proto2 drops unknown enum values
                tensor.data_location = _int32(sub.value)
            case number, wire if number in _TYPED_FIELDS:
                count = _typed_count(src, sub, wire, *_TYPED_FIELDS[number])
                if count:  # an empty packed field holds no values, as in protobuf
                    tensor.typed[number] += count
    return tensor


def _add_dim(src: _Source, tensor: _Tensor, value: int) -> None:
    if len(tensor.dims) >= MAX_RANK:  # checked per dim: a huge packed field stops early
        _fail_dims(src, tensor, f"more than {MAX_RANK} dims")
    tensor.dims.append(_int64(value))


def _typed_count(src: _Source, item: _Field, wire: int, single_wire: int, width: int) -> int:
    if wire == single_wire:
        return 1
    if wire != LEN:
        return 0  # a wrong wire type makes it an unknown field, as protobuf does
    return _packed_fixed(src, item, width) if width else _count_packed_varints(src, item)


def _fail_dims(src: _Source, tensor: _Tensor, problem: str) -> NoReturn:
    raise OnnxInputError(
        src.path,
        "dims",
        f"initializer {_show(tensor.name)} has {problem}",
        where=f"byte {tensor.at}",
    )


# --- value infos and types


@dataclass
class _Type:
    kind: str = ""  # which member of TypeProto's oneof is set
    elem_type: int = UNDEFINED
    dims: list[int | str | None] | None = None  # None: no shape field
    key_type: int = UNDEFINED
    inner: _Type | None = None  # sequence / optional element, map value


def _parse_value_info(src: _Source, item: _Field, depth: int) -> ValueInfo:
    name, kind = "", _Type()  # a repeated `type` field merges into the same _Type
    for sub in _fields(src, item.start, item.stop, depth, "ValueInfoProto"):
        match sub.number, sub.wire:
            case 1, 2:
                name = src.text(sub)
            case 2, 2:
                _parse_type(src, sub, depth + 1, kind)
    innermost = _innermost(kind)
    elem = _type_name(src, innermost.elem_type, item.start) if innermost else None
    shape = tuple(innermost.dims) if innermost and innermost.dims is not None else None
    return ValueInfo(name, _describe(src, kind, item.start), elem, shape)


# TypeProto oneof members: field number -> kind. 7 (opaque) carries no tensor.
_TYPE_KINDS = {1: "tensor", 8: "sparse_tensor", 4: "sequence", 9: "optional", 5: "map", 7: "opaque"}


def _parse_type(src: _Source, item: _Field, depth: int, acc: _Type) -> None:
    for sub in _fields(src, item.start, item.stop, depth, "TypeProto"):
        kind = _TYPE_KINDS.get(sub.number) if sub.wire == LEN else None
        if kind is None:
            continue
        if acc.kind != kind:  # another oneof member replaces the previous one
            _reset(acc, kind)
        if kind in ("tensor", "sparse_tensor"):
            _parse_tensor_type(src, sub, depth + 1, acc)
        elif kind in ("sequence", "optional", "map"):
            _parse_wrapper_type(src, sub, depth + 1, acc)
        else:  # opaque: only a domain and a name; walk it so its wire format is checked
            for _ in _fields(src, sub.start, sub.stop, depth + 1, "TypeProto.Opaque"):
                pass


def _reset(acc: _Type, kind: str) -> None:
    fresh = _Type(kind=kind)
    acc.kind, acc.elem_type, acc.dims = fresh.kind, fresh.elem_type, fresh.dims
    acc.key_type, acc.inner = fresh.key_type, fresh.inner


def _parse_tensor_type(src: _Source, item: _Field, depth: int, acc: _Type) -> None:
    for sub in _fields(src, item.start, item.stop, depth, "TypeProto.Tensor"):
        match sub.number, sub.wire:
            case 1, 0:
                acc.elem_type = _int32(sub.value)
            case 2, 2:
                acc.dims = acc.dims if acc.dims is not None else []
                _parse_shape(src, sub, depth + 1, acc.dims)


def _parse_wrapper_type(src: _Source, item: _Field, depth: int, acc: _Type) -> None:
    # Sequence and Optional hold their element at field 1; Map its key type at 1 and value at 2.
    value_field = 2 if acc.kind == "map" else 1
    for sub in _fields(src, item.start, item.stop, depth, f"TypeProto.{acc.kind}"):
        if acc.kind == "map" and (sub.number, sub.wire) == (1, VARINT):
            acc.key_type = _int32(sub.value)
        elif (sub.number, sub.wire) == (value_field, LEN):
            acc.inner = acc.inner or _Type()
            _parse_type(src, sub, depth + 1, acc.inner)


def _parse_shape(src: _Source, item: _Field, depth: int, dims: list[int | str | None]) -> None:
    for sub in _fields(src, item.start, item.stop, depth, "TensorShapeProto"):
        if (sub.number, sub.wire) != (1, LEN):
            continue
        if len(dims) >= MAX_RANK:
            raise OnnxInputError(
                src.path,
                "dims",
                f"a shape has more than {MAX_RANK} dims",
                where=f"byte {sub.start}",
            )
        dims.append(_parse_dim(src, sub, depth + 1))


def _parse_dim(src: _Source, item: _Field, depth: int) -> int | str | None:
    dim: int | str | None = None  # neither member set: a dimension of unknown size
    for sub in _fields(src, item.start, item.stop, depth, "TensorShapeProto.Dimension"):
        match sub.number, sub.wire:
            case 1, 0:
                dim = _int64(sub.value)
            case 2, 2:
                dim = src.text(sub)
    return dim


def _innermost(kind: _Type) -> _Type | None:
    while kind.kind in ("sequence", "optional", "map"):
        if kind.inner is None:
            return None
        kind = kind.inner
    return kind if kind.kind in ("tensor", "sparse_tensor") else None


def _describe(src: _Source, kind: _Type, at: int) -> str:
    """`tensor`, `sequence<tensor>`, `map<INT64,tensor>`, ...: the nesting in one word."""
    inner = _describe(src, kind.inner, at) if kind.inner else ""
    if kind.kind in ("sequence", "optional"):
        return f"{kind.kind}<{inner}>"
    if kind.kind == "map":
        return f"map<{_type_name(src, kind.key_type, at)},{inner}>"
    return kind.kind


def _type_name(src: _Source, type_id: int, at: int) -> str:
    if type_id not in DATA_TYPES:
        raise OnnxInputError(
            src.path, "data-type", f"unknown TensorProto data type id {type_id}", where=f"byte {at}"
        )
    return DATA_TYPES[type_id][0]


# ---------------------------------------------------------------------------------------------
# Initializers: sizes and external data


def _initializer(src: _Source, tensor: _Tensor, folder: _Folder) -> Initializer:
    where = f"byte {tensor.at}"
    if tensor.data_type not in DATA_TYPES or tensor.data_type == UNDEFINED:
        shown = DATA_TYPES[UNDEFINED][0] if tensor.data_type == UNDEFINED else tensor.data_type
        raise OnnxInputError(
            src.path,
            "data-type",
            f"initializer {_show(tensor.name)} has data type {shown}, not a known tensor type",
            where=where,
        )
    name, bits = DATA_TYPES[tensor.data_type]
    elements = _element_count(src, tensor)
    if tensor.data_location == EXTERNAL:
        external = folder.check(tensor)
        nbytes = (
            external.length
            if external.length is not None
            else (external.file_size - external.offset)
        )
        return Initializer(
            tensor.name, name, tuple(tensor.dims), elements, nbytes, "external", external
        )
    if tensor.raw_bytes is not None:
        return Initializer(tensor.name, name, tuple(tensor.dims), elements, tensor.raw_bytes, "raw")
    if tensor.typed:
        nbytes = _typed_nbytes(tensor, bits)
        return Initializer(tensor.name, name, tuple(tensor.dims), elements, nbytes, "typed")
    return Initializer(tensor.name, name, tuple(tensor.dims), elements, 0, "none")


def _element_count(src: _Source, tensor: _Tensor) -> int:
    count = 1
    for dim in tensor.dims:
        if dim < 0:
            _fail_dims(src, tensor, f"negative dim {dim} in {tensor.dims[:8]}")
        count *= dim
        if count > U64_MAX:  # stop before multiplying big numbers any further
            _fail_dims(src, tensor, "an element count beyond 2**64")
    return count


def _typed_nbytes(tensor: _Tensor, bits: int | None) -> int:
    """Data size of the typed repeated fields: what their elements take packed in raw_data."""
    if bits is None:  # STRING: the strings' own lengths
        return tensor.string_bytes
    total = 0
    for number, count in tensor.typed.items():
        if number == 4:  # float_data: FLOAT, or COMPLEX64 as pairs of floats
            total += 4 * count
        elif number in (7, 10):  # int64_data, double_data
            total += 8 * count
        elif number == 11:  # uint64_data: UINT32 or UINT64
            total += (4 if bits == 32 else 8) * count
        elif number == 5:  # int32_data: one element per value, but 4- and 2-bit ones are packed
            per_value = 8 // bits if bits < 8 and 8 % bits == 0 else 1
            total += -(-count * per_value * bits // 8)
    return total


class _Folder:
    """The model's folder: where external data must stay."""

    def __init__(self, src: _Source) -> None:
        self.src = src
        self.root = src.path.parent
        self.real_root = self.root.resolve()
        self.sizes: dict[str, int] = {}

    def fail(self, rule: str, tensor: _Tensor, message: str) -> NoReturn:
        raise OnnxInputError(
            self.src.path,
            rule,
            f"initializer {_show(tensor.name)}: {message}",
            where=f"byte {tensor.at}",
        )

    def check(self, tensor: _Tensor) -> ExternalData:
        location = tensor.external.get("location", "")
        problem = self._path_problem(location)
        if problem:
            self.fail(
                "external-path", tensor, f"external data location {_show(location)}: {problem}"
            )
        size = self._size(tensor, location)
        offset = self._integer(tensor, "offset") or 0  # absent: from the start
        length = self._integer(tensor, "length")
        end = offset + (length or 0)
        if offset > size or end > size:
            self.fail(
                "external-range",
                tensor,
                f"external data {_show(location)} bytes "
                f"{offset}..{end if length is not None else size} run past the end of "
                f"the file ({size} bytes)",
            )
        return ExternalData(location, offset, length, size)

    def _path_problem(self, location: str) -> str | None:
        if not location:
            return "empty (no `location` entry)"
        if "\0" in location:
            return "contains a NUL byte"
        if PurePosixPath(location).is_absolute() or PureWindowsPath(location).is_absolute():
            return "absolute path"
        if PureWindowsPath(location).drive:  # "C:weights.bin" is relative to a drive
            return "names a drive"
        if ".." in PurePosixPath(location.replace("\\", "/")).parts:
            return "path contains `..`"
        try:
            real = (self.root / location).resolve()
        except (OSError, RuntimeError):  # a symlink loop
            return "cannot be resolved (symbolic link loop?)"
        if not real.is_relative_to(self.real_root):
            return "leaves the model's folder through a symbolic link"
        return None

    def _size(self, tensor: _Tensor, location: str) -> int:
        if location not in self.sizes:
            target = self.root / posixpath.normpath(location)
            try:
                info = os.stat(target)
            except OSError as exc:
                self.fail(
                    "external-missing",
                    tensor,
                    f"external data file {_show(location)}: {exc.strerror or exc}",
                )
            if not stat.S_ISREG(info.st_mode):
                self.fail(
                    "external-missing",
                    tensor,
                    f"external data file {_show(location)} is not a regular file",
                )
            self.sizes[location] = info.st_size
        return self.sizes[location]

    def _integer(self, tensor: _Tensor, key: str) -> int | None:
        """The entry `key` as an integer, None when the entry is absent."""
        text = tensor.external.get(key)
        if text is None:
            return None
        if not (text.isascii() and text.isdigit()) or len(text) > 20:
            self.fail(
                "external-range",
                tensor,
                f"external data {key} {_show(text)} is not a non-negative integer",
            )
        return int(text)


# ---------------------------------------------------------------------------------------------
# Entry point


def read_onnx(
    path: Path | str, *, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH,
    nodes: bool = False,
) -> OnnxModel:
    """Decode an .onnx file's structure; raise OnnxInputError on the first violated rule.
    `nodes`: also keep every node's inputs and outputs (`OnnxModel.nodes`)."""
    path = Path(path)
    with _open(path, max_bytes) as handle:
        fd = handle.fileno()
        size = os.fstat(fd).st_size
        src = _Source(path, fd, size, max_depth)
        model = _parse_model(src, keep_nodes=nodes)
        if model.graph is None:
            raise OnnxInputError(
                path, "not-onnx", "the message holds no graph (field 7): not an ONNX model"
            )
        folder = _Folder(src)
        initializers = tuple(_initializer(src, t, folder) for t in model.graph.initializers)
    graph = model.graph
    return OnnxModel(
        path=str(path),
        file_size=size,
        ir_version=model.ir_version,
        opset_import=tuple(model.opsets),
        producer_name=model.producer_name,
        producer_version=model.producer_version,
        metadata=model.metadata,
        graph_name=graph.name,
        node_count=graph.nodes,
        op_types=dict(graph.op_types),
        inputs=tuple(graph.inputs),
        outputs=tuple(graph.outputs),
        initializers=initializers,
        sparse_initializers=graph.sparse_initializers,
        nodes=tuple(graph.node_list),
    )


def _open(path: Path, max_bytes: int) -> BinaryIO:
    """Opened without waiting on a FIFO: anything but a regular file is `unreadable`, a
    file over `max_bytes` `too-large`."""
    try:
        return open_regular(path, what="ONNX file", max_bytes=max_bytes)
    except InputError as exc:
        rule = "too-large" if exc.rule.startswith(TOO_LARGE) else "unreadable"
        raise OnnxInputError(path, rule, exc.rule) from None
    except ValueError as exc:  # a NUL byte in the path
        raise OnnxInputError(path, "unreadable", f"cannot open ({exc})") from None

