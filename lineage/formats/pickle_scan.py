"""Static scan of pickle files and torch checkpoints: what would loading them import and call?

Nothing is ever unpickled and no model library is imported. A bounded decoder walks the
opcodes (argument layouts from `pickletools.opcodes`), keeps a symbolic stack and memo so that
STACK_GLOBAL operands pushed as strings, fetched from the memo or duplicated are resolved the
way the unpickler would resolve them, and classifies every imported name
(`classify_global`, lineage/formats/pickle_globals.py):

    dangerous  a known code-execution path (DANGEROUS_MODULES, DANGEROUS_NAMES, a name that
               runs code in any module, an attribute path reaching one such as
               `posixpath.os.system`, or a walk through a dunder such as `__globals__`)
    safe       exactly on SAFE_GLOBALS, a small allowlist modelled on torch's weights-only
               unpickler
    unknown    anything else: importing a module runs its code, so "not known bad" is not clean

The stack also remembers which imported name each value is, and what a call returned, so every
call is judged by what it calls: REDUCE, NEWOBJ, NEWOBJ_EX, OBJ and INST calling a name off the
allowlist are dangerous (loading runs it), and so is a call of anything that is not an imported
name (what another call returned, a memo slot never filled) and BUILD on an imported name
itself (it sets attributes on a class, function or module). A name off the allowlist that is
only referenced, never called, is unknown.

Formats (`PickleScan.format`) are sniffed from the content, never from the file name:

    pickle        a pickle stream; bytes after its STOP are reported and scanned as more pickles
    torch-legacy  torch.save(..., _use_new_zipfile_serialization=False): starts 80 02 8a 0a (the
                  magic-number pickle); five pickles follow each other, then raw storage bytes
    torch-zip     a zip archive holding `<folder>/data.pkl` (torch.save since torch 1.6)
    npy           a NumPy array (magic \x93NUMPY): an object dtype means the data is a pickle,
                  scanned; a plain dtype is raw data, not read (lineage/formats/npy.py)
    npz           a zip archive of .npy members (numpy.savez), each judged as above
    compressed-pickle  a zlib, gzip, bz2, xz or lzma stream (joblib's compress=): inflated as it
                  is decoded, never past max_member_bytes (lineage/formats/compressed.py)
    zip           any other zip archive

`pickle_kind(path)` answers the same question before any scan, for a folder's file list: it
also recognises protocol 0 and 1 pickles, which have no header, by decoding their first opcodes
strictly (see _decodes_as_pickle), and compressed pickles by inflating their first bytes.

Zip members are sniffed by content: a member starting with a PROTO header (80 00..05) or named
*.pkl / *.pickle is scanned as a pickle; a member starting PK\\x03\\x04 is scanned as a nested
archive, one starting \\x93NUMPY or named *.npy as an array; anything else (torch's `data/N`
storage blobs, `version`, `byteorder`) is skipped after reading its first bytes. A `data/N` blob
that starts like a pickle is scanned too, and dropped as tensor data only if it neither parses
nor names a global. Reads are bounded: at most `max_member_bytes` of any one stream (never more
decompressed output than that), `max_total_bytes` over the whole scan, nesting to `max_depth`.

Finding kinds (severity):

    dangerous-global    (dangerous)     GLOBAL / INST / STACK_GLOBAL names a code-execution path
    dangerous-call      (dangerous)     a call opcode calls a name off the allowlist, or BUILD sets
                                        state on an imported name itself
    unresolved-call     (dangerous)     a call opcode calls a value that is not an imported name
    unresolved-global   (dangerous)     STACK_GLOBAL operands that are not plain strings (built by
                                        a call, taken from a missing memo slot), or EXT1/2/4,
                                        which import through the copyreg extension registry
    zip-slip            (dangerous)     an archive member name is absolute, contains `..` or NUL
    unknown-global      (unknown)       a name that is neither allowlisted nor known dangerous
    data-after-stop     (unknown)       bytes follow the STOP of a pickle (another pickle.load
                                        would read them); they are scanned as further pickles
    duplicate-member    (unknown)       two archive entries share a name: readers disagree on which
    compression-bomb    (unknown)       a compressed member over 1 MiB declares a ratio above
                                        MAX_COMPRESSION_RATIO, or any size above max_member_bytes
    unknown-opcode      (unverifiable)  a byte that is no pickle opcode: decoding stops there
    broken-opcode       (unverifiable)  a truncated or invalid argument, or no STOP: decoding stops
    stack-error         (unverifiable)  an opcode pops below a MARK or from an empty stack
    memo-trick          (unverifiable)  GET of a memo index that was never PUT
    depth-limit         (unverifiable)  a nested pickle or archive beyond max_depth, not scanned
    scan-limit          (unverifiable)  a byte, pickle-count or directory cap stopped the scan
    encrypted-member    (unverifiable)  an encrypted archive member (never decrypted)
    unsupported-compression (unverifiable)  a compression method zipfile cannot read
    crc-mismatch        (unverifiable)  a member read in full does not match its CRC-32
    bad-zip             (unverifiable)  the archive or a member header cannot be read
    read-error          (unverifiable)  the operating system failed a read
    legacy-layout       (unverifiable)  a legacy torch file ends before its five pickles
    more-findings       (worst severity held back)  the per-scan finding cap was reached
    calls               (info)          counts of REDUCE / BUILD / NEWOBJ / OBJ / INST per pickle
    persistent-id       (info)          PERSID / BINPERSID: resolved by the loader (torch storages)
    nested-pickle       (info)          a bytes / str value (raw, latin-1, base64 or hex text)
                                        holds a pickle, scanned under member
                                        `<member>@<byte offset>`; what it imports is reported
                                        with its own severity
    nested-archive      (info)          an archive member is itself a zip; its members are
                                        scanned as `<outer>!<inner>`
    storage-data        (info)          raw tensor bytes after a legacy file's five pickles
    pickle-like-data    (info)          a `data/N` blob that starts like a pickle but is not one
    npy-array           (info)          a NumPy array's header: dtype, shape, pickle or plain data
    bad-npy             (unverifiable)  an unreadable .npy header, or a dtype not known as plain
                                        data (what follows is then scanned as a pickle)
    compressed          (info)          the file is zlib / gzip / bz2 / xz / lzma compressed (as
                                        joblib writes): the inflated stream is scanned

`PickleScan.verdict` is "dangerous" if any finding is dangerous, "unknown" if any is unknown or
unverifiable, else "ok": only when every global is on the allowlist and nothing else is called.
"unknown" is never "ok". `scan_pickle_file` raises InputError only when the file cannot be
opened; every problem in its content becomes a finding. CRC-32 is checked for the members read
in full (pickles, nested archives), not for skipped storage blobs.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import copy
import io
import os
import pickletools
import re
import stat
import struct
import warnings
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import IO, BinaryIO, cast

from lineage.errors import InputError
from lineage.formats.compressed import InflatingReader, compression_of
from lineage.formats.messages import show as _show
from lineage.formats.messages import show_value
from lineage.formats.npy import MAGIC as NPY_MAGIC
from lineage.formats.npy import MAX_HEADER_BYTES as NPY_MAX_HEADER
from lineage.formats.npy import npy_prefix_size, parse_npy_header
from lineage.formats.pickle_globals import (
    DANGEROUS_LAST_NAMES,
    DANGEROUS_MODULES,
    DANGEROUS_NAMES,
    SAFE_GLOBALS,
    classify_global,
)

__all__ = [
    "DANGEROUS_LAST_NAMES",
    "DANGEROUS_MODULES",
    "DANGEROUS_NAMES",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_MEMBER_BYTES",
    "DEFAULT_MAX_TOTAL_BYTES",
    "FINDING_KINDS",
    "GlobalRef",
    "PickleFinding",
    "PickleScan",
    "SAFE_GLOBALS",
    "SEVERITIES",
    "classify_global",
    "pickle_kind",
    "scan_pickle_bytes",
    "scan_pickle_file",
]

DEFAULT_MAX_MEMBER_BYTES = 64 * 2**20
DEFAULT_MAX_TOTAL_BYTES = 256 * 2**20
DEFAULT_MAX_DEPTH = 3
MAX_FINDINGS = 1000  # per scan; beyond it one `more-findings` per severity keeps the verdict
MAX_GLOBALS = 10_000  # GlobalRefs listed per scan (all are still classified)
MAX_PICKLES_PER_STREAM = 256  # consecutive pickles in one stream
MAX_STACK_ITEMS = 1_000_000  # symbolic stack + memo entries per pickle
MAX_ZIP_MEMBERS = 100_000
MAX_ZIP_DIRECTORY_BYTES = 64 * 2**20
MAX_COMPRESSION_RATIO = 100
COMPRESSION_RATIO_FLOOR = 2**20  # smaller members may compress this well without harm
LEGACY_PICKLES = 5  # magic number, protocol version, sys info, the object, storage keys
HIGHEST_PROTOCOL = 5

_CHUNK = 64 * 1024
_KEEP_VALUE_BYTES = 64 * 1024  # larger string/bytes values are skipped unless they may nest
_SNIFF_BYTES = 4
_LEGACY_MAGIC = b"\x80\x02\x8a\x0a"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_NPY_SNIFF = NPY_MAGIC[:_SNIFF_BYTES]
_STORAGE_BLOB = re.compile(r"(^|/)data/\d+$")  # torch's tensor storages inside the zip

SEVERITIES = ("dangerous", "unknown", "unverifiable", "info")

FINDING_KINDS = (
    "dangerous-global",
    "dangerous-call",
    "unresolved-global",
    "unresolved-call",
    "zip-slip",
    "unknown-global",
    "data-after-stop",
    "duplicate-member",
    "compression-bomb",
    "unknown-opcode",
    "broken-opcode",
    "stack-error",
    "memo-trick",
    "depth-limit",
    "scan-limit",
    "encrypted-member",
    "unsupported-compression",
    "crc-mismatch",
    "bad-zip",
    "read-error",
    "legacy-layout",
    "more-findings",
    "calls",
    "persistent-id",
    "nested-pickle",
    "nested-archive",
    "storage-data",
    "pickle-like-data",
    "npy-array",
    "bad-npy",
    "compressed",
)

# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class GlobalRef:
    module: str
    name: str
    opcode: str  # GLOBAL, INST or STACK_GLOBAL
    position: int  # byte offset of the opcode in its stream
    member: str | None  # zip member, `<member>@<offset>` for a nested pickle, None for the file


@dataclass
class PickleFinding:
    member: str | None
    kind: str
    severity: str  # "dangerous" | "unknown" | "unverifiable" | "info"
    detail: str


@dataclass
class PickleScan:
    path: str
    format: str  # "pickle", "torch-zip", "torch-legacy", "npy", "npz", "compressed-pickle", "zip"
    globals: list[GlobalRef]
    findings: list[PickleFinding]
    members_scanned: list[str]  # archive members decoded as pickles (empty for a plain file)
    bytes_read: int  # bytes read from the file on disk, archive directory included

    @property
    def verdict(self) -> str:
        return _verdict(self.findings)


def _verdict(findings: Iterable[PickleFinding]) -> str:
    severities = {finding.severity for finding in findings}
    if "dangerous" in severities:
        return "dangerous"
    if severities & {"unknown", "unverifiable"}:
        return "unknown"
    return "ok"


class _Collector:
    """Globals and findings of one scan, capped; repeated identical global findings are merged."""

    def __init__(self) -> None:
        self.globals: list[GlobalRef] = []
        self.findings: list[PickleFinding] = []
        self.structural = 0  # unknown/broken opcodes, stack errors, memo tricks
        self._held_back: Counter[str] = Counter()  # severity -> findings past MAX_FINDINGS
        self._seen: set[tuple[str | None, str, str]] = set()

    def add(self, member: str | None, kind: str, severity: str, detail: str) -> None:
        if kind in ("unknown-opcode", "broken-opcode", "stack-error", "memo-trick"):
            self.structural += 1
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(PickleFinding(member, kind, severity, detail))
        else:
            self._held_back[severity] += 1

    def add_once(
        self, key: tuple[str | None, str, str], kind: str, severity: str, detail: str
    ) -> None:
        if key not in self._seen:
            self._seen.add(key)
            self.add(key[0], kind, severity, detail)

    def add_global(self, ref: GlobalRef) -> None:
        if len(self.globals) < MAX_GLOBALS:
            self.globals.append(ref)

    def merge(self, other: _Collector) -> None:
        for ref in other.globals:
            self.add_global(ref)
        for finding in other.close():
            self.add(finding.member, finding.kind, finding.severity, finding.detail)

    def close(self) -> list[PickleFinding]:
        """The findings, with one `more-findings` line per severity that went past the cap."""
        for severity in SEVERITIES:
            count = self._held_back.pop(severity, 0)
            if count:
                detail = f"{count} more {severity} finding(s) not listed (cap {MAX_FINDINGS})"
                self.findings.append(PickleFinding(None, "more-findings", severity, detail))
        return self.findings


class _Budget:
    """Bytes the whole scan may still pull from its streams (max_total_bytes)."""

    def __init__(self, total: int) -> None:
        self.left = total


@dataclass
class _Scan:
    max_member_bytes: int
    max_depth: int
    budget: _Budget
    collector: _Collector = field(default_factory=_Collector)
    members_scanned: list[str] = field(default_factory=list)

    def add(self, member: str | None, kind: str, severity: str, detail: str) -> None:
        self.collector.add(member, kind, severity, detail)

    def child(self) -> _Scan:
        """A scan whose findings can be judged before they are merged (or dropped)."""
        return _Scan(self.max_member_bytes, self.max_depth, self.budget)

    def merge(self, other: _Scan) -> None:
        self.collector.merge(other.collector)
        self.members_scanned.extend(other.members_scanned)


# ---------------------------------------------------------------------------------------------
# Bounded byte streams


class _Source:
    """A forward-only stream with a per-stream cap and the scan's shared budget.

    Reads never raise: a stream error ends the data and is kept in `error`; a cap ends it and
    sets `limited`, so the decoder can tell a truncated pickle from a scan limit.
    """

    def __init__(
        self,
        stream: IO[bytes],
        *,
        limit: int,
        budget: _Budget,
        size: int | None = None,
        seekable: bool = False,
        crc: bool = False,
        prefix: bytes = b"",
    ) -> None:
        self._stream = stream
        self._limit = limit
        self._budget = budget
        self._size = size  # stream length when known
        self._seekable = seekable  # skip() may seek instead of reading (plain files only)
        self._buf = b""
        self._off = 0
        self._consumed = 0  # bytes taken from the stream (prefix included)
        self.pos = 0  # offset of the next unread byte
        self.eof = False
        self.limited = False
        self.error: Exception | None = None
        self.crc: int | None = 0 if crc else None
        if prefix:
            self._buf = self._account(prefix)

    def _account(self, data: bytes) -> bytes:
        self._consumed += len(data)
        self._limit -= len(data)
        self._budget.left -= len(data)
        if self.crc is not None:
            self.crc = zlib.crc32(data, self.crc)
        if self._size is not None and self._consumed >= self._size:
            self.eof = True
        return data

    def _read_raw(self, want: int) -> bytes:
        if self._size is not None and self._consumed >= self._size:
            self.eof = True  # the end of the data, even when it coincides with the cap
        if self.eof:
            return b""
        allowed = min(want, self._limit, self._budget.left)
        if allowed <= 0:
            return b""
        try:
            data = self._stream.read(allowed)
        except Exception as exc:  # a damaged member (zlib, headers) or an I/O error: data ends
            self.error = exc
            self.eof = True
            return b""
        if len(data) < allowed:
            self.eof = True
        return self._account(data)

    def _refill(self, need: int) -> bool:
        """Make `need` more bytes available; False if the stream or a cap ended first."""
        have = len(self._buf) - self._off
        # Reads grow with what is already buffered, so a long line costs linear time.
        data = self._read_raw(max(need, _CHUNK, have))
        if data:
            self._buf = self._buf[self._off :] + data
            self._off = 0
        if len(self._buf) - self._off >= have + need:
            return True
        if not self.eof:
            self.limited = True
        return False

    def read(self, n: int) -> bytes:
        """Up to n bytes; fewer only at the end of the data or a cap."""
        missing = n - (len(self._buf) - self._off)
        if missing > 0:
            self._refill(missing)
        data = self._buf[self._off : self._off + n]
        self._off += len(data)
        self.pos += len(data)
        return data

    def read_line(self) -> bytes | None:
        """The bytes up to and including the next newline, or None if the data ends first."""
        scanned = 0
        while True:
            end = self._buf.find(b"\n", self._off + scanned)
            if end >= 0:
                line = self._buf[self._off : end + 1]
                self._off = end + 1
                self.pos += len(line)
                return line
            scanned = len(self._buf) - self._off
            if not self._refill(1):
                return None

    def skip(self, n: int) -> bool:
        """Pass over n bytes without keeping them; False if the data ends first."""
        take = min(n, len(self._buf) - self._off)
        self._off += take
        self.pos += take
        n -= take
        if n > _CHUNK and self._seekable and self._size is not None:  # big values: no read
            return self._seek_forward(n)
        while n:
            data = self._read_raw(min(n, 16 * _CHUNK))
            if not data:
                if not self.eof:
                    self.limited = True
                return False
            n -= len(data)
            self.pos += len(data)
        return True

    def _seek_forward(self, n: int) -> bool:
        assert self._size is not None
        wanted = self._consumed + n  # the stream offset equals what was consumed: nothing buffered
        target = min(wanted, self._size)
        try:
            self._stream.seek(target)
        except OSError as exc:
            self.error = exc
            self.eof = True
            return False
        self.pos += target - self._consumed
        self._consumed = target
        self.eof = target >= self._size
        return target == wanted

    def at_end(self) -> bool:
        return len(self._buf) == self._off and not self._refill(1)

    def remaining(self) -> int | None:
        if self._size is None:
            return None
        return self._size - self.pos


class _CountingFile:
    """A binary file that counts the bytes read through it (zipfile reads through this too)."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self.count += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def seekable(self) -> bool:
        return True


# ---------------------------------------------------------------------------------------------
# The opcode decoder


class _Token(Enum):
    MARK = "mark"
    OPAQUE = "opaque"  # a value the scanner does not track (numbers, containers, call results)


@dataclass(frozen=True)
class _Imported:
    """A name a GLOBAL / INST / STACK_GLOBAL put on the stack, with its classification."""

    module: str
    name: str
    verdict: str  # "safe" | "unknown" | "dangerous"


@dataclass(frozen=True)
class _Made:
    """What a call returned; `callee` is the allowlisted name that made it, if one did."""

    callee: _Imported | None


_Value = str | bytes | _Token | _Imported | _Made


class _Stop(Exception):
    """Decoding of this pickle ends here; the finding says why."""

    def __init__(self, kind: str, severity: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.severity = severity
        self.detail = detail


_OPCODES: dict[int, pickletools.OpcodeInfo] = {ord(op.code): op for op in pickletools.opcodes}

_FIXED_ARGS = {"uint1": "<B", "uint2": "<H", "int4": "<i", "uint4": "<I", "uint8": "<Q"}
_SIZED_ARGS = {  # length prefix of each length-prefixed argument
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
_LINE_ARGS = frozenset(
    {"decimalnl_short", "decimalnl_long", "floatnl", "stringnl", "stringnl_noescape"}
)
_VALUE_ARGS = frozenset(  # arguments whose content matters: strings (names) and bytes (nesting)
    {"string1", "bytes1", "unicodestring1", "string4", "bytes4", "unicodestring4", "bytes8",
     "bytearray8", "unicodestring8"}
)  # fmt: skip


def _stack_effect(op: pickletools.OpcodeInfo) -> tuple[int, bool, int]:
    """(objects popped below any MARK, whether it pops to a MARK, objects pushed)."""
    before = op.stack_before
    if pickletools.markobject in before:
        return before.index(pickletools.markobject), True, len(op.stack_after)
    return len(before), False, len(op.stack_after)


_EFFECTS = {op.name: _stack_effect(op) for op in pickletools.opcodes}

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


_STRICT_LINES: dict[str, Callable[[bytes], bool]] = {
    "decimalnl_short": _int_line,
    "decimalnl_long": _long_line,
    "floatnl": _float_line,
    "stringnl_noescape": lambda line: all(0x20 <= byte < 0x7F for byte in line),  # PERSID
    "stringnl_noescape_pair": lambda line: bool(_NAME_LINE.fullmatch(line)),
}


class _Decoder:
    """Decodes one pickle from a source, reporting into a scan; never executes anything."""

    def __init__(
        self, source: _Source, member: str | None, scan: _Scan, depth: int, *, strict: bool = False
    ) -> None:
        self.strict = strict
        self.source = source
        self.member = member
        self.scan = scan
        self.depth = depth
        self.stack: list[_Value] = []
        self.memo: dict[int, _Value] = {}
        self.calls: Counter[str] = Counter()
        self.persistent = 0
        self.opcodes = 0  # opcodes started, the last one possibly cut short
        self.clean_calls = 0  # calls decoded before any structural problem
        self.stack_error_reported = False

    def run(self) -> bool:
        """True if the pickle ended with STOP, False if decoding had to stop before."""
        try:
            while True:
                pos = self.source.pos
                self.opcodes += 1
                code = self.source.read(1)
                if not code:
                    self._truncated(pos, "the pickle ends without a STOP opcode")
                op = _OPCODES.get(code[0])
                if op is None:
                    raise _Stop(
                        "unknown-opcode",
                        "unverifiable",
                        f"byte 0x{code[0]:02x} at {pos} is not a pickle opcode",
                    )
                arg = self._read_arg(op, pos)
                if self._apply(op, arg, pos):
                    return True
                if len(self.stack) + len(self.memo) > MAX_STACK_ITEMS:
                    raise _Stop(
                        "scan-limit",
                        "unverifiable",
                        f"more than {MAX_STACK_ITEMS} stack and memo items at byte {pos}",
                    )
        except _Stop as stop:
            self.scan.add(self.member, stop.kind, stop.severity, stop.detail)
            return False
        finally:
            self._report_counts()

    def _finding(self, kind: str, severity: str, detail: str) -> None:
        self.scan.add(self.member, kind, severity, detail)

    def _truncated(self, pos: int, what: str) -> None:
        if self.source.limited:
            raise _Stop(
                "scan-limit",
                "unverifiable",
                f"stopped at byte {pos}: the byte cap of this scan was reached",
            )
        raise _Stop("broken-opcode", "unverifiable", f"at byte {pos}: {what} (truncated?)")

    # -- arguments -----------------------------------------------------------------------------

    def _read_arg(self, op: pickletools.OpcodeInfo, pos: int) -> object:
        if op.arg is None:
            return None
        kind = op.arg.name
        if kind in _FIXED_ARGS:
            fmt = _FIXED_ARGS[kind]
            return struct.unpack(fmt, self._exact(struct.calcsize(fmt), pos, op.name))[0]
        if kind == "float8":
            return self._exact(8, pos, op.name)
        if kind in _SIZED_ARGS:
            return self._read_sized(op.name, kind, pos)
        if kind in _LINE_ARGS or kind == "unicodestringnl":
            return self._checked(kind, self._line(pos, op.name), pos, op.name)
        if kind == "stringnl_noescape_pair":
            pair = self._line(pos, op.name), self._line(pos, op.name)
            return tuple(self._checked(kind, line, pos, op.name) for line in pair)
        raise _Stop(
            "broken-opcode",
            "unverifiable",
            f"{op.name} at byte {pos} has an argument this scanner cannot read",
        )

    def _checked(self, kind: str, line: bytes, pos: int, name: str) -> bytes:
        """In strict mode (sniffing), text arguments must be what the unpickler accepts."""
        accepts = _STRICT_LINES.get(kind) if self.strict else None
        if accepts is not None and not accepts(line):
            detail = f"{name} at byte {pos}: argument {line[:40]!r} is not of its form"
            raise _Stop("broken-opcode", "unverifiable", detail)
        return line

    def _exact(self, n: int, pos: int, name: str) -> bytes:
        data = self.source.read(n)
        if len(data) < n:
            self._truncated(pos, f"{name} needs {n} argument bytes, {len(data)} remain")
        return data

    def _line(self, pos: int, name: str) -> bytes:
        line = self.source.read_line()
        if line is None:
            self._truncated(pos, f"{name} argument has no end of line")
        assert line is not None
        return line[:-1]

    def _read_sized(self, name: str, kind: str, pos: int) -> bytes | None:
        """The value of a length-prefixed argument, or None when it was skipped unread."""
        fmt = _SIZED_ARGS[kind]
        (length,) = struct.unpack(fmt, self._exact(struct.calcsize(fmt), pos, name))
        if length < 0:
            detail = f"{name} at byte {pos} has a negative length {length}"
            raise _Stop("broken-opcode", "unverifiable", detail)
        keep = kind in _VALUE_ARGS  # numbers (LONG1/LONG4) are only passed over
        if keep and length <= _KEEP_VALUE_BYTES:
            return self._exact(length, pos, name)
        # A large value is read in full only if it may hold a nested pickle.
        head = self._exact(min(length, _SNIFF_BYTES), pos, name) if keep else b""
        if keep and _may_hold_pickle(head):
            return head + self._exact(length - len(head), pos, name)
        if not self.source.skip(length - len(head)):
            self._truncated(pos, f"{name} declares {length} bytes, more than remain")
        return None

    # -- stack effects ---------------------------------------------------------------------------

    def _apply(self, op: pickletools.OpcodeInfo, arg: object, pos: int) -> bool:
        handler = _HANDLERS.get(op.name)
        if handler is not None:
            return handler(self, arg, pos)
        self._generic(op.name, pos)
        return False

    def _generic(self, name: str, pos: int) -> None:
        below, to_mark, pushed = _EFFECTS[name]
        if to_mark:
            self._pop_to_mark(pos, name)
        for _ in range(below):
            self._pop(pos, name)
        self.stack.extend([_Token.OPAQUE] * pushed)

    def _stack_error(self, pos: int, what: str) -> None:
        # The unpickler would fail here; keep scanning so nothing after it goes unreported.
        if not self.stack_error_reported:
            self.stack_error_reported = True
            self._finding("stack-error", "unverifiable", f"at byte {pos}: {what}")

    def _pop(self, pos: int, name: str) -> _Value:
        if not self.stack or self.stack[-1] is _Token.MARK:
            self._stack_error(pos, f"{name} pops from an empty stack or below a MARK")
            return _Token.OPAQUE
        return self.stack.pop()

    def _top(self, pos: int, name: str) -> _Value:
        if not self.stack or self.stack[-1] is _Token.MARK:
            self._stack_error(pos, f"{name} needs an object on the stack")
            return _Token.OPAQUE
        return self.stack[-1]

    def _pop_to_mark(self, pos: int, name: str) -> list[_Value]:
        """The objects above the topmost MARK, which is removed with them."""
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index] is _Token.MARK:
                items = self.stack[index + 1 :]
                del self.stack[index:]
                return items
        self._stack_error(pos, f"{name} finds no MARK on the stack")
        items = self.stack[:]
        self.stack.clear()
        return items

    def _report_counts(self) -> None:
        if self.calls:
            shown = ", ".join(f"{count} {name}" for name, count in sorted(self.calls.items()))
            self._finding("calls", "info", f"{shown}: loading calls the objects named above")
        if self.persistent:
            self._finding(
                "persistent-id",
                "info",
                f"{self.persistent} persistent id(s): resolved by the loader's persistent_load "
                "(torch: tensor storages), not by pickle itself",
            )

    # -- globals ----------------------------------------------------------------------------------

    def _record_global(self, module: str, name: str, opcode: str, pos: int) -> None:
        self.scan.collector.add_global(GlobalRef(module, name, opcode, pos, self.member))
        verdict, reason = classify_global(module, name)
        if verdict == "safe":
            return
        kind = "dangerous-global" if verdict == "dangerous" else "unknown-global"
        key = (self.member, module, name)
        detail = f"{opcode} {_show(module)} {_show(name)} at byte {pos}: {reason}"
        self.scan.collector.add_once(key, kind, verdict, detail)

    def _unresolved(self, pos: int, what: str) -> None:
        self._finding("unresolved-global", "dangerous", f"at byte {pos}: {what}")

    def _imported(self, module: str, name: str, opcode: str, pos: int) -> _Imported:
        self._record_global(module, name, opcode, pos)
        return _Imported(module, name, classify_global(module, name)[0])

    # -- calls ------------------------------------------------------------------------------------

    def _call(self, callee: _Value, opcode: str, pos: int) -> _Made:
        """Judge what a REDUCE / NEWOBJ / NEWOBJ_EX / OBJ / INST runs; the result it pushes."""
        self.calls[opcode] += 1
        if not self.scan.collector.structural:  # the unpickler gets this far and runs it
            self.clean_calls += 1
        if isinstance(callee, _Imported):
            if callee.verdict == "unknown":  # dangerous names were reported when imported
                key = (self.member, f"{callee.module} {callee.name}", "call")
                detail = (
                    f"{opcode} at byte {pos} calls {_show(callee.module)} {_show(callee.name)}, "
                    "which is not on the allowlist: loading runs it"
                )
                self.scan.collector.add_once(key, "dangerous-call", "dangerous", detail)
            return _Made(callee if callee.verdict == "safe" else None)
        what = "the result of another call" if isinstance(callee, _Made) else "not an imported name"
        detail = (
            f"{opcode} at byte {pos} calls a value that is {what}: what runs cannot be told "
            "without running it"
        )
        self.scan.collector.add_once((self.member, "", f"unresolved-call {opcode}"),
                                     "unresolved-call", "dangerous", detail)
        return _Made(None)

    # -- nested pickles ---------------------------------------------------------------------------

    def _check_nested(self, value: bytes | str, pos: int) -> None:
        for how, payload in _nested_payloads(value):
            _scan_nested(
                payload, f"{self.member or ''}@{pos}", how, self.scan, self.depth, self.member
            )


def _h_proto(decoder: _Decoder, arg: object, pos: int) -> bool:
    assert isinstance(arg, int)
    if arg > HIGHEST_PROTOCOL:
        raise _Stop(
            "broken-opcode", "unverifiable", f"PROTO {arg} at byte {pos}: no such pickle protocol"
        )
    return False


def _h_nothing(decoder: _Decoder, arg: object, pos: int) -> bool:
    return False  # FRAME only groups opcodes; the stream is decoded the same way without it


def _h_stop(decoder: _Decoder, arg: object, pos: int) -> bool:
    decoder._pop(pos, "STOP")
    return True


def _h_mark(decoder: _Decoder, arg: object, pos: int) -> bool:
    decoder.stack.append(_Token.MARK)
    return False


def _h_pop(decoder: _Decoder, arg: object, pos: int) -> bool:
    if decoder.stack:  # POP removes a MARK as well as an object (the C unpickler's rule)
        decoder.stack.pop()
    else:
        decoder._stack_error(pos, "POP on an empty stack")
    return False


def _h_dup(decoder: _Decoder, arg: object, pos: int) -> bool:
    decoder.stack.append(decoder._top(pos, "DUP"))
    return False


def _h_memoize(decoder: _Decoder, arg: object, pos: int) -> bool:
    decoder.memo[len(decoder.memo)] = decoder._top(pos, "MEMOIZE")
    return False


def _h_put(decoder: _Decoder, arg: object, pos: int) -> bool:
    index = _memo_index(arg, pos, "PUT")
    decoder.memo[index] = decoder._top(pos, "PUT")
    return False


def _h_get(decoder: _Decoder, arg: object, pos: int) -> bool:
    index = _memo_index(arg, pos, "GET")
    if index not in decoder.memo:
        decoder._finding(
            "memo-trick", "unverifiable", f"GET of memo index {index} at byte {pos}, never PUT"
        )
    decoder.stack.append(decoder.memo.get(index, _Token.OPAQUE))
    return False


def _memo_index(arg: object, pos: int, name: str) -> int:
    if isinstance(arg, int):
        return arg
    assert isinstance(arg, bytes)  # the text forms carry a decimal line
    try:
        index = int(arg.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise _Stop(
            "broken-opcode", "unverifiable", f"{name} at byte {pos}: bad memo index {arg[:40]!r}"
        ) from None
    if index < 0:
        raise _Stop("broken-opcode", "unverifiable", f"{name} at byte {pos}: negative memo index")
    return index


def _h_global(decoder: _Decoder, arg: object, pos: int) -> bool:
    module, name = _global_names(arg, pos, "GLOBAL")
    decoder.stack.append(decoder._imported(module, name, "GLOBAL", pos))
    return False


def _h_inst(decoder: _Decoder, arg: object, pos: int) -> bool:
    module, name = _global_names(arg, pos, "INST")
    callee = decoder._imported(module, name, "INST", pos)
    decoder._pop_to_mark(pos, "INST")
    decoder.stack.append(decoder._call(callee, "INST", pos))
    return False


def _h_reduce(decoder: _Decoder, arg: object, pos: int) -> bool:
    decoder._pop(pos, "REDUCE")  # the argument tuple
    callee = decoder._pop(pos, "REDUCE")
    decoder.stack.append(decoder._call(callee, "REDUCE", pos))
    return False


def _h_newobj(decoder: _Decoder, arg: object, pos: int) -> bool:
    decoder._pop(pos, "NEWOBJ")
    callee = decoder._pop(pos, "NEWOBJ")  # cls.__new__(cls, *args)
    decoder.stack.append(decoder._call(callee, "NEWOBJ", pos))
    return False


def _h_newobj_ex(decoder: _Decoder, arg: object, pos: int) -> bool:
    decoder._pop(pos, "NEWOBJ_EX")
    decoder._pop(pos, "NEWOBJ_EX")
    callee = decoder._pop(pos, "NEWOBJ_EX")  # cls.__new__(cls, *args, **kwargs)
    decoder.stack.append(decoder._call(callee, "NEWOBJ_EX", pos))
    return False


def _h_obj(decoder: _Decoder, arg: object, pos: int) -> bool:
    items = decoder._pop_to_mark(pos, "OBJ")  # MARK cls args...: cls(*args)
    callee = items[0] if items else _Token.OPAQUE
    if not items:
        decoder._stack_error(pos, "OBJ finds no class after its MARK")
    decoder.stack.append(decoder._call(callee, "OBJ", pos))
    return False


def _h_build(decoder: _Decoder, arg: object, pos: int) -> bool:
    """BUILD calls obj.__setstate__(state), or sets attributes: judged by what obj is."""
    decoder.calls["BUILD"] += 1
    decoder._pop(pos, "BUILD")
    target = decoder._top(pos, "BUILD")
    if isinstance(target, _Imported):
        detail = (
            f"BUILD at byte {pos} sets state on {_show(target.module)} {_show(target.name)} "
            "itself (an imported class, function or module), which no saved object needs"
        )
        key = (decoder.member, f"{target.module} {target.name}", "build")
        decoder.scan.collector.add_once(key, "dangerous-call", "dangerous", detail)
    return False


def _global_names(arg: object, pos: int, opcode: str) -> tuple[str, str]:
    assert isinstance(arg, tuple)
    try:  # the unpickler decodes both lines as UTF-8
        return arg[0].decode("utf-8"), arg[1].decode("utf-8")
    except UnicodeDecodeError:
        raise _Stop(
            "broken-opcode", "unverifiable", f"{opcode} at byte {pos}: names are not UTF-8"
        ) from None


def _h_stack_global(decoder: _Decoder, arg: object, pos: int) -> bool:
    name = decoder._pop(pos, "STACK_GLOBAL")
    module = decoder._pop(pos, "STACK_GLOBAL")
    if isinstance(module, str) and isinstance(name, str):
        decoder.stack.append(decoder._imported(module, name, "STACK_GLOBAL", pos))
        return False
    decoder._unresolved(
        pos,
        "STACK_GLOBAL operands are not strings pushed by this pickle: what it imports "
        "cannot be told without running it",
    )
    decoder.stack.append(_Token.OPAQUE)
    return False


def _h_ext(decoder: _Decoder, arg: object, pos: int) -> bool:
    decoder._unresolved(
        pos, f"extension code {arg} imports through copyreg's registry, unknown here"
    )
    decoder.stack.append(_Token.OPAQUE)
    return False


def _h_persid(decoder: _Decoder, arg: object, pos: int) -> bool:
    decoder.persistent += 1
    if arg is None:  # BINPERSID takes the id from the stack
        decoder._pop(pos, "BINPERSID")
    decoder.stack.append(_Token.OPAQUE)
    return False


def _h_string(decoder: _Decoder, arg: object, pos: int) -> bool:
    """STRING / BINSTRING / SHORT_BINSTRING: byte strings read as text (ASCII by default)."""
    value: _Value = _Token.OPAQUE
    if isinstance(arg, bytes):
        decoder._check_nested(arg, pos)
        value = arg.decode("latin-1")
    decoder.stack.append(value)
    return False


def _h_quoted_string(decoder: _Decoder, arg: object, pos: int) -> bool:
    """STRING (protocol 0): a quoted, backslash-escaped line."""
    assert isinstance(arg, bytes)
    if len(arg) < 2 or arg[0] != arg[-1] or arg[:1] not in (b"'", b'"'):
        raise _Stop(
            "broken-opcode", "unverifiable", f"STRING at byte {pos}: argument is not quoted"
        )
    try:
        with warnings.catch_warnings(action="ignore"):  # "invalid escape" warnings: data, not code
            raw = codecs.escape_decode(arg[1:-1])[0]
    except ValueError:
        raise _Stop("broken-opcode", "unverifiable", f"STRING at byte {pos}: bad escape") from None
    return _h_string(decoder, raw, pos)


def _h_unicode_line(decoder: _Decoder, arg: object, pos: int) -> bool:
    """UNICODE (protocol 0): raw-unicode-escape, so `\\u006fs` is "os"."""
    assert isinstance(arg, bytes)
    try:
        value = arg.decode("raw-unicode-escape")
    except UnicodeDecodeError:
        raise _Stop("broken-opcode", "unverifiable", f"UNICODE at byte {pos}: bad escape") from None
    decoder._check_nested(value, pos)
    decoder.stack.append(value)
    return False


def _h_unicode(decoder: _Decoder, arg: object, pos: int) -> bool:
    value: _Value = _Token.OPAQUE
    if isinstance(arg, bytes):
        try:
            value = arg.decode("utf-8", "surrogatepass")  # what the unpickler accepts
        except UnicodeDecodeError:
            raise _Stop(
                "broken-opcode", "unverifiable", f"string at byte {pos} is not UTF-8"
            ) from None
        decoder._check_nested(value, pos)
    decoder.stack.append(value)
    return False


def _h_bytes(decoder: _Decoder, arg: object, pos: int) -> bool:
    if isinstance(arg, bytes):
        decoder._check_nested(arg, pos)
    decoder.stack.append(_Token.OPAQUE)  # STACK_GLOBAL needs str: bytes never name a global
    return False


_Handler = Callable[[_Decoder, object, int], bool]
_HANDLERS: dict[str, _Handler] = {
    "PROTO": _h_proto,
    "FRAME": _h_nothing,
    "STOP": _h_stop,
    "MARK": _h_mark,
    "POP": _h_pop,
    "DUP": _h_dup,
    "MEMOIZE": _h_memoize,
    "PUT": _h_put,
    "BINPUT": _h_put,
    "LONG_BINPUT": _h_put,
    "GET": _h_get,
    "BINGET": _h_get,
    "LONG_BINGET": _h_get,
    "GLOBAL": _h_global,
    "INST": _h_inst,
    "REDUCE": _h_reduce,
    "NEWOBJ": _h_newobj,
    "NEWOBJ_EX": _h_newobj_ex,
    "OBJ": _h_obj,
    "BUILD": _h_build,
    "STACK_GLOBAL": _h_stack_global,
    "EXT1": _h_ext,
    "EXT2": _h_ext,
    "EXT4": _h_ext,
    "PERSID": _h_persid,
    "BINPERSID": _h_persid,
    "STRING": _h_quoted_string,
    "BINSTRING": _h_string,
    "SHORT_BINSTRING": _h_string,
    "UNICODE": _h_unicode_line,
    "SHORT_BINUNICODE": _h_unicode,
    "BINUNICODE": _h_unicode,
    "BINUNICODE8": _h_unicode,
    "BINBYTES": _h_bytes,
    "SHORT_BINBYTES": _h_bytes,
    "BINBYTES8": _h_bytes,
    "BYTEARRAY8": _h_bytes,
}


# ---------------------------------------------------------------------------------------------
# Nested pickles


def _has_pickle_header(data: bytes) -> bool:
    return len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= HIGHEST_PROTOCOL


def _may_hold_pickle(head: bytes) -> bool:
    """Could a value starting with `head` be a pickle, raw, as latin-1 text, base64 or hex?"""
    return (
        _has_pickle_header(head)
        or (head[:2] == b"\xc2\x80" and head[2:3] in (b"\x02", b"\x03", b"\x04", b"\x05"))
        or head[:2] == b"gA"
        or head[:3] == b"800"
    )


def _nested_payloads(value: bytes | str) -> list[tuple[str, bytes]]:
    """(encoding, bytes) for each way the value decodes to something with a pickle header."""
    if isinstance(value, bytes):
        return [("raw bytes", value)] if _has_pickle_header(value) else []
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
    return [(how, data) for how, data in found if _has_pickle_header(data)]


def _scan_nested(
    payload: bytes, label: str, how: str, scan: _Scan, depth: int, parent: str | None
) -> None:
    if depth + 1 > scan.max_depth:
        scan.add(
            parent,
            "depth-limit",
            "unverifiable",
            f"a pickle nested in a value ({how}) at {label} is deeper than max_depth "
            f"{scan.max_depth}: not scanned",
        )
        return
    child = scan.child()
    source = _Source(
        io.BytesIO(payload), limit=scan.max_member_bytes, budget=scan.budget, size=len(payload)
    )
    _scan_pickles(source, label, child, depth + 1)
    if not _is_pickle_after_all(child):
        return  # bytes that merely start like a pickle: tensor data, not a payload
    scan.add(
        parent,
        "nested-pickle",
        "info",
        f"a value ({how}, {len(payload)} bytes) holds a pickle, scanned as member {label}",
    )
    scan.merge(child)


def _is_pickle_after_all(child: _Scan) -> bool:
    """Keep a sniffed pickle's findings unless it neither parses nor names any global."""
    return bool(child.collector.globals) or child.collector.structural == 0


# ---------------------------------------------------------------------------------------------
# Streams of pickles


def _scan_pickles(
    source: _Source, member: str | None, scan: _Scan, depth: int, *, legacy: bool = False
) -> None:
    """Decode consecutive pickles until the data ends, decoding fails or a cap is reached."""
    count = 0
    while True:
        if not _Decoder(source, member, scan, depth).run():
            return
        count += 1
        if legacy and count == LEGACY_PICKLES:
            _report_storage_data(source, member, scan)
            return
        if source.at_end():
            _report_end(source, member, scan, count, legacy)
            return
        if not legacy:
            scan.add(
                member,
                "data-after-stop",
                "unknown",
                f"bytes follow the STOP of pickle {count} (at byte {source.pos}): "
                "scanned as another pickle",
            )
        if count >= MAX_PICKLES_PER_STREAM:
            detail = f"more than {MAX_PICKLES_PER_STREAM} pickles in one stream: rest not scanned"
            scan.add(member, "scan-limit", "unverifiable", detail)
            return


def _report_end(source: _Source, member: str | None, scan: _Scan, count: int, legacy: bool) -> None:
    if source.limited:
        detail = f"stopped at byte {source.pos}: the byte cap of this scan was reached"
        scan.add(member, "scan-limit", "unverifiable", detail)
    elif legacy:
        detail = f"the legacy torch file ends after {count} of its {LEGACY_PICKLES} pickles"
        scan.add(member, "legacy-layout", "unverifiable", detail)


def _report_storage_data(source: _Source, member: str | None, scan: _Scan) -> None:
    remaining = source.remaining()
    if remaining:
        detail = f"{remaining} bytes of raw tensor storage follow the pickles (not decoded)"
        scan.add(member, "storage-data", "info", detail)


# ---------------------------------------------------------------------------------------------
# NumPy arrays


def _scan_npy(source: _Source, member: str | None, scan: _Scan, depth: int) -> None:
    """A .npy array: its header says whether the data is a pickle (object dtype) or plain."""
    try:
        preamble = source.read(8)
        preamble += source.read(npy_prefix_size(preamble) - len(preamble))
        length = int.from_bytes(preamble[8:], "little")
        header = parse_npy_header(preamble + source.read(min(length, NPY_MAX_HEADER)))
    except ValueError as exc:
        scan.add(member, "bad-npy", "unverifiable", f"not a readable .npy array: {exc}")
        return
    what = f"NumPy array, descr {show_value(header.descr)}, shape {show_value(header.shape)}"
    if header.content == "data":
        detail = f"{what}: plain data, never unpickled (not read)"
        scan.add(member, "npy-array", "info", detail)
        return
    if header.content == "unknown":
        detail = f"{what}: dtype not recognised as plain data, the rest is scanned as a pickle"
        scan.add(member, "bad-npy", "unverifiable", detail)
    else:
        detail = f"{what}: object dtype, numpy.load(allow_pickle=True) unpickles the data"
        scan.add(member, "npy-array", "info", detail)
    _scan_pickles(source, member, scan, depth)


# ---------------------------------------------------------------------------------------------
# Zip archives


def _scan_zip(fp: BinaryIO, size: int, label: str | None, scan: _Scan, depth: int) -> str:
    """Scan an archive's members; return "torch-zip", "npz" or "zip"."""
    if _directory_too_large(fp, size, label, scan):
        return "zip"
    try:
        archive = zipfile.ZipFile(fp)
    except Exception as exc:  # BadZipFile, or struct / value errors from a mangled directory
        scan.add(label, "bad-zip", "unverifiable", f"not a readable zip archive ({_describe(exc)})")
        return "zip"
    with archive:
        infos = archive.infolist()
        _report_duplicates(infos, label, scan)
        for info in infos:
            try:
                _scan_member(archive, info, label, scan, depth)
            except Exception as exc:  # any damage in one member (header, zlib, ...) is a finding
                detail = f"member cannot be read ({_describe(exc)})"
                scan.add(_member_label(label, info.filename), "bad-zip", "unverifiable", detail)
    if any(i.filename == "data.pkl" or i.filename.endswith("/data.pkl") for i in infos):
        return "torch-zip"
    return "npz" if any(i.filename.endswith(".npy") for i in infos) else "zip"


_EOCD = struct.Struct("<4s4H2LH")  # signature, disk numbers, entry counts, size, offset, comment


def _directory_too_large(fp: BinaryIO, size: int, label: str | None, scan: _Scan) -> bool:
    """zipfile holds the whole central directory in memory: check its declared size first."""
    try:
        declared = _directory_size(fp, size)
    except (OSError, ValueError, struct.error):
        return False  # zipfile will report what is wrong
    if declared is None:
        return False
    entries, nbytes = declared
    if entries <= MAX_ZIP_MEMBERS and nbytes <= MAX_ZIP_DIRECTORY_BYTES:
        return False
    scan.add(
        label,
        "scan-limit",
        "unverifiable",
        f"the central directory declares {entries} members in {nbytes} bytes, above the caps "
        f"({MAX_ZIP_MEMBERS} members, {MAX_ZIP_DIRECTORY_BYTES} bytes): not scanned",
    )
    return True


def _directory_size(fp: BinaryIO, size: int) -> tuple[int, int] | None:
    """(entries, central directory bytes) from the end record, zip64 included; None if absent."""
    if size < _EOCD.size:
        return None
    for tail_len in (_EOCD.size, min(size, _EOCD.size + 65535)):  # without / with a comment
        fp.seek(size - tail_len)
        tail = fp.read(tail_len)
        at = tail.rfind(b"PK\x05\x06")
        if at >= 0 and len(tail) - at >= _EOCD.size:
            break
    else:
        return None
    fields = _EOCD.unpack_from(tail, at)
    entries, nbytes = fields[4], fields[5]
    if entries != 0xFFFF and nbytes != 0xFFFFFFFF:
        return entries, nbytes
    locator_at = size - tail_len + at - 20
    if locator_at < 0:
        return None
    fp.seek(locator_at)
    locator = fp.read(20)
    if locator[:4] != b"PK\x06\x07":
        return None
    fp.seek(struct.unpack_from("<Q", locator, 8)[0])
    record = fp.read(56)
    if len(record) < 56 or record[:4] != b"PK\x06\x06":
        return None
    entries, nbytes = struct.unpack_from("<QQ", record, 32)
    return entries, nbytes


def _report_duplicates(infos: list[zipfile.ZipInfo], label: str | None, scan: _Scan) -> None:
    counts = Counter(info.filename for info in infos)
    for name, count in sorted(counts.items()):
        if count > 1:
            scan.add(
                _member_label(label, name),
                "duplicate-member",
                "unknown",
                f"{count} entries share this name: readers disagree on which one is loaded "
                "(each is scanned)",
            )


def _member_label(label: str | None, name: str) -> str:
    return f"{label}!{name}" if label else name


def _scan_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, label: str | None, scan: _Scan, depth: int
) -> None:
    name = _member_label(label, info.filename)
    unsafe = _unsafe_name(info.orig_filename)
    if unsafe:
        scan.add(
            name,
            "zip-slip",
            "dangerous",
            f"member name {unsafe}: extraction would escape the folder",
        )
    if info.filename.endswith("/"):  # a folder entry (ZipInfo.is_dir fails on an empty name)
        return
    if info.flag_bits & 0x1:
        scan.add(name, "encrypted-member", "unverifiable", "encrypted member: content not scanned")
        return
    if info.compress_type not in _READABLE_COMPRESSION:
        detail = f"compression method {info.compress_type} cannot be read: content not scanned"
        scan.add(name, "unsupported-compression", "unverifiable", detail)
        return
    _check_compression(info, name, scan)
    with archive.open(_without_crc(info)) as stream:  # errors: reported by the caller
        head = stream.read(_SNIFF_BYTES)
        kind = _member_kind(info.filename, head)
        if kind == "zip":
            _scan_nested_archive(stream, head, info, name, scan, depth)
        elif kind == "npy":
            source = _member_source(stream, head, info, scan)
            scan.members_scanned.append(name)
            _scan_npy(source, name, scan, depth)
            _check_source(source, info, name, scan)
        elif kind is not None:
            _scan_pickle_member(stream, head, info, name, scan, depth, tolerant=kind == "blob")


_READABLE_COMPRESSION = frozenset(
    {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
)


def _unsafe_name(name: str) -> str | None:
    if "\0" in name:
        return f"{_show(name)} contains a NUL byte"
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        return f"{_show(name)} is an absolute path"
    if ".." in re.split(r"[\\/]", name):
        return f"{_show(name)} contains a `..` component"
    return None


def _check_compression(info: zipfile.ZipInfo, name: str, scan: _Scan) -> None:
    if info.compress_type == zipfile.ZIP_STORED:
        return
    ratio = info.file_size / max(info.compress_size, 1)
    too_dense = ratio > MAX_COMPRESSION_RATIO and info.file_size > COMPRESSION_RATIO_FLOOR
    if too_dense or info.file_size > scan.max_member_bytes:
        scan.add(
            name,
            "compression-bomb",
            "unknown",
            f"declares {info.file_size} bytes from {info.compress_size} compressed "
            f"(ratio {ratio:.0f}); at most {scan.max_member_bytes} bytes are ever decompressed",
        )


def _without_crc(info: zipfile.ZipInfo) -> zipfile.ZipInfo:
    # zipfile checks the CRC on the read that reaches the end and then drops that read's data,
    # which would hide the end of a damaged pickle; _Source computes the CRC itself instead.
    clone = copy.copy(info)
    del clone.CRC
    return clone


def _member_kind(filename: str, head: bytes) -> str | None:
    """ "zip", "pickle", "blob" (a storage blob that starts like a pickle) or None (skip)."""
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    if head.startswith(_NPY_SNIFF) or filename.endswith(".npy"):
        return "npy"
    looks_like_pickle = len(head) >= 2 and head[0] == 0x80 and head[1] <= HIGHEST_PROTOCOL
    if looks_like_pickle and _STORAGE_BLOB.search(filename):
        return "blob"
    if looks_like_pickle or filename.endswith((".pkl", ".pickle")):
        return "pickle"
    return None


def _member_source(stream: IO[bytes], head: bytes, info: zipfile.ZipInfo, scan: _Scan) -> _Source:
    return _Source(
        stream,
        limit=scan.max_member_bytes,
        budget=scan.budget,
        size=info.file_size,
        crc=True,
        prefix=head,
    )


def _scan_pickle_member(
    stream: IO[bytes],
    head: bytes,
    info: zipfile.ZipInfo,
    name: str,
    scan: _Scan,
    depth: int,
    *,
    tolerant: bool,
) -> None:
    target = scan.child() if tolerant else scan
    source = _member_source(stream, head, info, scan)
    target.members_scanned.append(name)
    _scan_pickles(source, name, target, depth)
    _check_source(source, info, name, target)
    if not tolerant:
        return
    if _is_pickle_after_all(target):
        scan.merge(target)
    else:
        detail = "starts like a pickle but does not parse and names no global: tensor data"
        scan.add(name, "pickle-like-data", "info", detail)


def _check_source(source: _Source, info: zipfile.ZipInfo, name: str, scan: _Scan) -> None:
    if source.error is not None:
        detail = f"member data cannot be read ({_describe(source.error)})"
        scan.add(name, "bad-zip", "unverifiable", detail)
    elif source.eof and source.crc is not None and source.crc != info.CRC:
        detail = f"CRC-32 {source.crc:08x} of the content differs from the recorded {info.CRC:08x}"
        scan.add(name, "crc-mismatch", "unverifiable", detail)


def _scan_nested_archive(
    stream: IO[bytes], head: bytes, info: zipfile.ZipInfo, name: str, scan: _Scan, depth: int
) -> None:
    if depth + 1 > scan.max_depth:
        detail = f"nested archive deeper than max_depth {scan.max_depth}: not scanned"
        scan.add(name, "depth-limit", "unverifiable", detail)
        return
    source = _member_source(stream, head, info, scan)
    data = source.read(info.file_size)
    source.at_end()
    if source.limited:
        detail = f"nested archive larger than the byte cap ({scan.max_member_bytes}): not scanned"
        scan.add(name, "scan-limit", "unverifiable", detail)
        return
    _check_source(source, info, name, scan)
    fmt = _scan_zip(io.BytesIO(data), len(data), name, scan, depth + 1)
    scan.add(name, "nested-archive", "info", f"member is a {fmt} archive, scanned as {name}!…")


# ---------------------------------------------------------------------------------------------
# Entry points


def scan_pickle_file(
    path: Path | str,
    *,
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES,
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> PickleScan:
    """Scan a pickle, torch checkpoint or zip archive; raise only if it cannot be opened."""
    path = Path(path)
    raw = _open_regular(path)
    scan = _Scan(max_member_bytes, max_depth, _Budget(max_total_bytes))
    with raw:
        counting = _CountingFile(raw)
        size = os.fstat(raw.fileno()).st_size
        fmt = _scan_file(counting, size, scan)
    findings = scan.collector.close()
    globals_ = scan.collector.globals
    return PickleScan(str(path), fmt, globals_, findings, scan.members_scanned, counting.count)


def scan_pickle_bytes(
    data: bytes, *, member: str | None = None
) -> tuple[list[GlobalRef], list[PickleFinding]]:
    """Scan pickle bytes in memory: consecutive pickles, nested ones to the default depth."""
    # The data is in memory already: the caps only bound what nested values add to it.
    budget = _Budget(len(data) + DEFAULT_MAX_TOTAL_BYTES)
    scan = _Scan(max(len(data), DEFAULT_MAX_MEMBER_BYTES), DEFAULT_MAX_DEPTH, budget)
    source = _Source(io.BytesIO(data), limit=len(data), budget=scan.budget, size=len(data))
    _scan_pickles(source, member, scan, 0)
    return scan.collector.globals, scan.collector.close()


def pickle_kind(path: Path | str) -> str | None:
    """What in a file loading could unpickle, from its bytes alone (the name is never read).

    "torch-zip", "npz" or "zip" for a zip archive (its member names decide), "npy" for a NumPy
    array (object dtype or not: the scan tells), "compressed-pickle" for a compressed stream
    whose first inflated bytes are a pickle, "torch-legacy", "pickle" for a pickle of any
    protocol (0 and 1 have no header: the first opcodes must decode, see _decodes_as_pickle),
    None for anything else or a file that cannot be read.
    """
    try:
        raw = _open_regular(Path(path))
    except InputError:
        return None
    with raw:
        try:
            head = raw.read(_SNIFF_BYTES)
            if head.startswith(_ZIP_MAGICS):
                return _zip_kind(raw, os.fstat(raw.fileno()).st_size)
            if head.startswith(_NPY_SNIFF):
                return "npy"
            if head.startswith(_LEGACY_MAGIC):
                return "torch-legacy"
            if _has_pickle_header(head) and head[2:3] and head[2] in _OPCODES:
                return "pickle"  # PROTO and a first opcode (a safetensors length can be 80 02 00)
            method = compression_of(head)
            if method is not None:
                return "compressed-pickle" if _inflates_to_pickle(raw, head, method) else None
            if not head or head[0] not in _OPCODES:
                return None
            window = head + raw.read(SNIFF_WINDOW - len(head) + 1)
        except OSError:
            return None
    return "pickle" if _decodes_as_pickle(window) else None


def _inflates_to_pickle(raw: BinaryIO, head: bytes, method: str) -> bool:
    try:
        window = InflatingReader(raw, method, prefix=head).read(SNIFF_WINDOW + 1)
    except Exception:  # damaged data (zlib, lzma, EOF errors): the content cannot be told
        return False
    return _has_pickle_header(window) or _decodes_as_pickle(window)


SNIFF_WINDOW = 64 * 1024  # bytes decoded to recognise a pickle without a protocol header
_SNIFF_MIN_OPCODES = 8


def _decodes_as_pickle(data: bytes) -> bool:
    """Would the unpickler take these bytes for a pickle and act on them?

    Yes if the first opcodes decode strictly (every argument as the unpickler parses it, no
    unknown opcode, no stack or memo error) and either call something before anything goes
    wrong (the call runs even if loading fails later), or end in STOP having imported
    something, or end in STOP with an empty stack after at least _SNIFF_MIN_OPCODES opcodes,
    or fill the window (the data being longer) with that many. Ordinary text and binary
    formats fail within a few bytes; a pickle that imports and calls nothing cannot run code.
    """
    whole = len(data) <= SNIFF_WINDOW
    data = data[:SNIFF_WINDOW]
    scan = _Scan(len(data), 0, _Budget(len(data)))
    source = _Source(io.BytesIO(data), limit=len(data), budget=scan.budget,
                     size=len(data) if whole else None)
    decoder = _Decoder(source, None, scan, 0, strict=True)
    stopped = decoder.run()
    if decoder.clean_calls:
        return True
    if scan.collector.structural:
        return False
    if stopped:
        long_enough = not decoder.stack and decoder.opcodes >= _SNIFF_MIN_OPCODES
        return bool(scan.collector.globals) or long_enough
    return not whole and source.limited and decoder.opcodes >= _SNIFF_MIN_OPCODES


def _zip_kind(raw: BinaryIO, size: int) -> str:
    probe = _Scan(0, 0, _Budget(0))
    if _directory_too_large(raw, size, None, probe):
        return "zip"
    try:
        with zipfile.ZipFile(raw) as archive:
            names = archive.namelist()
    except Exception:  # a damaged archive: the scan reports what is wrong
        return "zip"
    if any(name == "data.pkl" or name.endswith("/data.pkl") for name in names):
        return "torch-zip"
    return "npz" if any(name.endswith(".npy") for name in names) else "zip"


def _open_regular(path: Path) -> BinaryIO:
    try:  # O_NONBLOCK: opening a FIFO must not hang
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise InputError(path, f"cannot open ({exc.strerror or exc})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(path, "not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _scan_file(counting: _CountingFile, size: int, scan: _Scan) -> str:
    fp = cast(BinaryIO, counting)  # it has the read / seek / tell that zipfile and _Source use
    try:
        head = counting.read(_SNIFF_BYTES)
    except OSError as exc:
        scan.add(None, "read-error", "unverifiable", f"cannot read ({exc.strerror or exc})")
        return "pickle"
    if head.startswith(_ZIP_MAGICS):
        return _scan_zip(fp, size, None, scan, 0)  # zipfile seeks where it needs
    if head.startswith(_NPY_SNIFF):
        source = _Source(fp, limit=scan.max_member_bytes, budget=scan.budget, size=size,
                         seekable=True, prefix=head)
        _scan_npy(source, None, scan, 0)
        _report_read_error(source, scan)
        return "npy"
    method = compression_of(head)
    if method is not None:
        return _scan_compressed(fp, head, method, scan)
    legacy = head.startswith(_LEGACY_MAGIC)
    source = _Source(
        fp,
        limit=scan.max_member_bytes,
        budget=scan.budget,
        size=size,
        seekable=True,
        prefix=head,  # the sniffed bytes start the stream: no second read of them
    )
    _scan_pickles(source, None, scan, 0, legacy=legacy)
    _report_read_error(source, scan)
    return "torch-legacy" if legacy else "pickle"


def _scan_compressed(fp: BinaryIO, head: bytes, method: str, scan: _Scan) -> str:
    """A joblib-style compressed pickle: scanned as it inflates, never past the byte caps."""
    inflated = cast(BinaryIO, InflatingReader(fp, method, prefix=head))
    source = _Source(inflated, limit=scan.max_member_bytes, budget=scan.budget)
    scan.add(None, "compressed", "info", f"{method}-compressed: the pickle inside is scanned")
    _scan_pickles(source, None, scan, 0)
    _report_read_error(source, scan)
    if source.eof and source.error is None:  # a short read hides what ended the data
        try:
            inflated.read(1)
        except Exception as exc:  # damaged or cut-off compressed data after the last pickle
            detail = f"the compressed data is damaged after byte {source.pos} ({_describe(exc)})"
            scan.add(None, "read-error", "unverifiable", detail)
    return "compressed-pickle"


def _report_read_error(source: _Source, scan: _Scan) -> None:
    if source.error is not None:
        scan.add(None, "read-error", "unverifiable", f"read failed ({_describe(source.error)})")


# ---------------------------------------------------------------------------------------------
# Message helpers


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."

