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
    local-name-mismatch (unknown)       a member's local header names it otherwise than the central
                                        directory does; the bytes the directory points at (what
                                        torch loads) are scanned
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

This module holds the entry points and the sniffing; the scanner's parts, each in
lineage/formats/: pickle_findings.py (results, caps, the scan's state), pickle_source.py
(bounded reads), pickle_opcodes.py (argument layouts, stack values), pickle_decoder.py (the
opcode-stream scanner, nested pickles), pickle_handlers.py (what each opcode does),
pickle_archive.py (zip members, .npy arrays) and pickle_globals.py (classify_global).
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path
from typing import BinaryIO, cast

from lineage.errors import InputError
from lineage.formats.compressed import InflatingReader, compression_of
from lineage.formats.pickle_scan.archive import (
    _NPY_SNIFF,
    _directory_too_large,
    _scan_npy,
    _scan_zip,
)
from lineage.formats.pickle_scan.classify import (
    DANGEROUS_LAST_NAMES,
    DANGEROUS_MODULES,
    DANGEROUS_NAMES,
    SAFE_GLOBALS,
    classify_global,
)
from lineage.formats.pickle_scan.decoder import _Decoder, _scan_pickles
from lineage.formats.pickle_scan.findings import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MEMBER_BYTES,
    DEFAULT_MAX_TOTAL_BYTES,
    FINDING_KINDS,
    SEVERITIES,
    GlobalRef,
    PickleFinding,
    PickleScan,
    _Budget,
    _describe,
    _Scan,
)
from lineage.formats.pickle_scan.opcodes import _OPCODES, _SNIFF_BYTES, _has_pickle_header
from lineage.formats.pickle_scan.source import _CountingFile, _Source
from lineage.userfiles import open_regular

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

_LEGACY_MAGIC = b"\x80\x02\x8a\x0a"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")


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
    raw = open_regular(path, what="pickle file")  # never waits on a FIFO
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
        raw = open_regular(path)
    except InputError:
        return None
    with raw:
        return pickle_kind_of(raw)


def may_be_pickle(head: bytes) -> bool:
    """False when `pickle_kind_of` of a file starting with `head` (at least its first
    _SNIFF_BYTES, or all of a shorter file) is None for certain: no archive, array, legacy
    or compression magic, and a first byte no pickle starts with. A folder's many text
    files are told from their first bytes this way, without a second read or a decoder."""
    first = head[:1]
    if first in _START_BYTES:
        return True
    head = head[:_SNIFF_BYTES]
    return first in _MAGIC_FIRST_BYTES and (head.startswith((*_ZIP_MAGICS, _NPY_SNIFF))
                                            or compression_of(head) is not None)


def pickle_kind_of(raw: BinaryIO) -> str | None:
    """`pickle_kind` of a regular file opened for reading, at its start."""
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
        if not head or head[0] not in _START_OPCODES:
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
# The opcodes a pickle can start with: those that need nothing on the stack (pickletools
# lists no stack input for the memo stores, but they store the object on top). Any other
# first opcode is a stack error before anything could be called, so _decodes_as_pickle
# answers no without decoding, as it would after decoding (tests/test_pickle_evasions.py).
_START_OPCODES = frozenset(code for code, op in _OPCODES.items() if not op.stack_before
                           and op.name not in ("PUT", "BINPUT", "LONG_BINPUT"))
_START_BYTES = frozenset(bytes([code]) for code in _START_OPCODES)  # 0x80 (PROTO) among them
# The first bytes of the zip, .npy and compressed-stream magics (compressed.compression_of):
# any other first byte outside _START_BYTES settles may_be_pickle at once.
_MAGIC_FIRST_BYTES = frozenset({b"P", b"\x93", b"\x1f", b"B", b"\xfd", b"]", b"x"})


def _decodes_as_pickle(data: bytes) -> bool:
    """Would the unpickler take these bytes for a pickle and act on them?

    Yes if the first opcodes decode strictly (every argument as the unpickler parses it, no
    unknown opcode, no stack or memo error) and either call something before anything goes
    wrong (the call runs even if loading fails later), or end in STOP having imported
    something, or end in STOP with an empty stack after at least _SNIFF_MIN_OPCODES opcodes,
    or fill the window (the data being longer) with that many. Ordinary text and binary
    formats fail within a few bytes; a pickle that imports and calls nothing cannot run code.
    Data whose first opcode needs an object on the stack (not in _START_OPCODES) fails
    unread: decoding it (_decoder_accepts) reports a stack error at that first opcode,
    before anything could be called, and says no as well.
    """
    return bool(data) and data[0] in _START_OPCODES and _decoder_accepts(data)


def _decoder_accepts(data: bytes) -> bool:
    """_decodes_as_pickle's answer from decoding the data, whatever its first byte."""
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
