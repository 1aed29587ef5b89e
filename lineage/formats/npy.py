"""The header of a NumPy `.npy` array, read without numpy: plain data, or a pickle?

Layout (numpy/lib/format.py, format versions 1.0, 2.0 and 3.0): the magic `\\x93NUMPY`, a major
and a minor version byte, the header length (uint16 little-endian in 1.0, uint32 in 2.0 and
3.0), then the header: a Python dict literal `{'descr': ..., 'fortran_order': ...,
'shape': ...}` (latin-1 text, UTF-8 in 3.0), padded with spaces and ended by a newline. The
array follows. When the dtype holds Python objects, the array is a pickle (`numpy.load` with
`allow_pickle=True` unpickles it); otherwise it is raw bytes.

The header is parsed with `ast.literal_eval`, which builds literals only and runs no code.
A `descr` this module does not recognise as plain data is never called plain: the caller
treats what follows as a possible pickle.
"""

from __future__ import annotations

import ast
import re
import struct
from dataclasses import dataclass

__all__ = ["MAGIC", "MAX_HEADER_BYTES", "NpyHeader", "parse_npy_header", "npy_prefix_size"]

MAGIC = b"\x93NUMPY"
MAX_HEADER_BYTES = 1 << 20  # numpy.load refuses headers over 10,000 bytes unless told otherwise
_KEYS = {"descr", "fortran_order", "shape"}
_PY2_LONG = re.compile(r"\b(\d+)[lL]\b")
# What `dtype.str` writes for plain dtypes: bool, integers, floats, complex, bytes, text, void,
# datetimes and timedeltas, with an optional byte-order character.
_PLAIN_TYPE = re.compile(
    r"[<>|=]?(?:[?bBhHiIlLqQefdgFDG]|[biufc]\d+|[SUVa]\d*|[mM]8(?:\[\d*\w+\])?)"
)
_OBJECT_TYPE = re.compile(r"[<>|=]?(?:O\d*|object_?)")


@dataclass(frozen=True)
class NpyHeader:
    version: tuple[int, int]
    descr: object
    shape: object
    fortran_order: object
    data_offset: int  # where the array (raw bytes or a pickle) starts
    content: str  # "data" (plain dtype), "pickle" (object dtype) or "unknown" (not recognised)


def npy_prefix_size(prefix: bytes) -> int:
    """Bytes of magic, version and length field, from the first 8 bytes; ValueError if bad."""
    if not prefix.startswith(MAGIC) or len(prefix) < 8:
        raise ValueError("no .npy magic \\x93NUMPY and version")
    major = prefix[6]
    if major == 1:
        return 10
    if major in (2, 3):
        return 12
    raise ValueError(f"unknown .npy format version {major}.{prefix[7]}")


def parse_npy_header(data: bytes) -> NpyHeader:
    """Parse magic, version, length and header dict from `data` (at least the whole header)."""
    start = npy_prefix_size(data[:8])
    fmt = "<H" if start == 10 else "<I"
    if len(data) < start:
        raise ValueError("the file ends inside the .npy preamble")
    (length,) = struct.unpack(fmt, data[8:start])
    if length > MAX_HEADER_BYTES:
        raise ValueError(f"header of {length} bytes, above the {MAX_HEADER_BYTES}-byte cap")
    raw = data[start : start + length]
    if len(raw) < length:
        raise ValueError(f"the file ends inside the {length}-byte .npy header")
    fields = _header_dict(raw, data[6])
    return NpyHeader(
        version=(data[6], data[7]),
        descr=fields["descr"],
        shape=fields["shape"],
        fortran_order=fields["fortran_order"],
        data_offset=start + length,
        content=_content(fields["descr"]),
    )


def _header_dict(raw: bytes, major: int) -> dict[str, object]:
    try:
        text = raw.decode("utf-8" if major >= 3 else "latin-1")
        try:
            fields = ast.literal_eval(text)
        except SyntaxError:  # Python 2 wrote shapes as (2L, 2L), which numpy still reads
            fields = ast.literal_eval(_PY2_LONG.sub(r"\1", text))
    except (UnicodeDecodeError, ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"the header is not a Python literal ({type(exc).__name__})") from None
    if not isinstance(fields, dict) or set(fields) != _KEYS:
        raise ValueError(f"the header must be a dict with exactly the keys {sorted(_KEYS)}")
    return fields


def _content(descr: object) -> str:
    """ "pickle" if any field holds objects, "data" if every field is plain, else "unknown"."""
    kinds = set(_field_kinds(descr, depth=0))
    if "pickle" in kinds:
        return "pickle"
    return "unknown" if "unknown" in kinds else "data"


def _field_kinds(descr: object, *, depth: int) -> list[str]:
    if depth > 32:
        return ["unknown"]
    if isinstance(descr, str):
        if _OBJECT_TYPE.fullmatch(descr):
            return ["pickle"]
        return ["data"] if _PLAIN_TYPE.fullmatch(descr) else ["unknown"]
    if isinstance(descr, tuple) and len(descr) == 2:  # (descr, subarray shape)
        return _field_kinds(descr[0], depth=depth + 1)
    if isinstance(descr, list) and descr:  # structured: [(name, descr[, shape]), ...]
        kinds: list[str] = []
        for field in descr:
            if not isinstance(field, tuple) or len(field) not in (2, 3):
                return ["unknown"]
            kinds += _field_kinds(field[1], depth=depth + 1)
        return kinds
    return ["unknown"]
