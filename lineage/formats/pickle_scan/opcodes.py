"""The pickle opcodes as the scanner reads them: argument layouts and stack effects (from
`pickletools.opcodes`), the values tracked on the symbolic stack, the strict forms of text
arguments checked when sniffing, and which values may hold a nested pickle.

Nothing here decodes a whole pickle: the decoder module does.
"""

from __future__ import annotations

import base64
import binascii
import pickletools
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

HIGHEST_PROTOCOL = 5
KEEP_VALUE_BYTES = 64 * 1024  # larger string/bytes values are skipped unless they may nest
SNIFF_BYTES = 4


class Token(Enum):
    MARK = "mark"
    OPAQUE = "opaque"  # a value the scanner does not track (numbers, containers, call results)


@dataclass(frozen=True)
class Imported:
    """A name a GLOBAL / INST / STACK_GLOBAL put on the stack, with its classification."""

    module: str
    name: str
    verdict: str  # "safe" | "unknown" | "dangerous"


@dataclass(frozen=True)
class Made:
    """What a call returned; `callee` is the allowlisted name that made it, if one did."""

    callee: Imported | None


Value = str | bytes | Token | Imported | Made


class Stop(Exception):
    """Decoding of this pickle ends here; the finding says why."""

    def __init__(self, kind: str, severity: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.severity = severity
        self.detail = detail


OPCODES: dict[int, pickletools.OpcodeInfo] = {ord(op.code): op for op in pickletools.opcodes}

FIXED_ARGS = {"uint1": "<B", "uint2": "<H", "int4": "<i", "uint4": "<I", "uint8": "<Q"}
SIZED_ARGS = {  # length prefix of each length-prefixed argument
    "string1": "<B",
    "bytes1": "<B",
    "unicodestring1": "<B",
    "long1": "<B",
    "string4": "<i",
    "long4": "<i",
    "bytes4": "<I",
    "unicodestring4": "<I",
    "bytes8": "<Q",
    "bytearray8": "<Q",
    "unicodestring8": "<Q",
}
LINE_ARGS = frozenset(
    {"decimalnl_short", "decimalnl_long", "floatnl", "stringnl", "stringnl_noescape"}
)
VALUE_ARGS = frozenset(  # arguments whose content matters: strings (names) and bytes (nesting)
    {"string1", "bytes1", "unicodestring1", "string4", "bytes4", "unicodestring4", "bytes8",
     "bytearray8", "unicodestring8"}
)  # fmt: skip


def _stack_effect(op: pickletools.OpcodeInfo) -> tuple[int, bool, int]:
    """(objects popped below any MARK, whether it pops to a MARK, objects pushed)."""
    before = op.stack_before
    if pickletools.markobject in before:
        return before.index(pickletools.markobject), True, len(op.stack_after)
    return len(before), False, len(op.stack_after)


EFFECTS = {op.name: _stack_effect(op) for op in pickletools.opcodes}

# Text arguments as the unpickler accepts them, checked only when sniffing (see pickle_kind):
# ordinary text often passes the scanner's own reading, which never converts numbers.
_NAME_LINE = re.compile(rb"[\w.]+")  # a module or attribute path that can be imported
_C_OCTAL = re.compile(r"\s*[+-]?0[0-7]*\s*")  # INT goes through C strtol(base 0) first


def _int_line(line: bytes) -> bool:
    text = line.decode("latin-1")
    return bool(_C_OCTAL.fullmatch(text)) or _parses(lambda: int(text, 0))


def _long_line(line: bytes) -> bool:
    text = line.decode("latin-1")
    return _parses(lambda: int(text[:-1] if text.endswith("L") else text, 0))


def _float_line(line: bytes) -> bool:
    text = line.decode("latin-1")  # PyOS_string_to_double: no blanks, no underscores
    return "_" not in text and text == text.strip() and _parses(lambda: float(text))


def _parses(convert: Callable[[], object]) -> bool:
    try:
        convert()
    except ValueError:
        return False
    return True


STRICT_LINES: dict[str, Callable[[bytes], bool]] = {
    "decimalnl_short": _int_line,
    "decimalnl_long": _long_line,
    "floatnl": _float_line,
    "stringnl_noescape": lambda line: all(0x20 <= byte < 0x7F for byte in line),  # PERSID
    "stringnl_noescape_pair": lambda line: bool(_NAME_LINE.fullmatch(line)),
}


# ---------------------------------------------------------------------------------------------
# Values that may hold a pickle


def has_pickle_header(data: bytes) -> bool:
    return len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= HIGHEST_PROTOCOL


def may_hold_pickle(head: bytes) -> bool:
    """Could a value starting with `head` be a pickle, raw, as latin-1 text, base64 or hex?"""
    return (
        has_pickle_header(head)
        or (head[:2] == b"\xc2\x80" and head[2:3] in (b"\x02", b"\x03", b"\x04", b"\x05"))
        or head[:2] == b"gA"
        or head[:3] == b"800"
    )


def nested_payloads(value: bytes | str) -> list[tuple[str, bytes]]:
    """(encoding, bytes) for each way the value decodes to something with a pickle header."""
    if isinstance(value, bytes):
        return [("raw bytes", value)] if has_pickle_header(value) else []
    found: list[tuple[str, bytes]] = []
    if value[:1] == "\x80":
        try:
            found.append(("latin-1 text", value.encode("latin-1")))
        except UnicodeEncodeError:
            pass
    elif value.startswith("gA") and len(value) >= 8:
        try:
            found.append(("base64 text", base64.b64decode(value, validate=True)))
        except (binascii.Error, ValueError):
            pass
    elif value.startswith("800") and len(value) % 2 == 0:
        try:
            found.append(("hex text", bytes.fromhex(value)))
        except ValueError:
            pass
    return [(how, data) for how, data in found if has_pickle_header(data)]
