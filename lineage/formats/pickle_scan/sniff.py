"""What in a file loading could unpickle, told from its first bytes without a scan.

`pickle_kind` names the format a scan would find (a zip archive by its member names, a .npy
array, a compressed stream whose first inflated bytes are a pickle, a legacy torch file, a
pickle of any protocol); `may_be_pickle` rules a file out from its first bytes alone, so a
folder's many text files cost no second read. Protocol 0 and 1 pickles have no header: their
first opcodes must decode strictly (`decodes_as_pickle`).
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path
from typing import BinaryIO

from lineage.errors import InputError
from lineage.formats.compressed import InflatingReader, compression_of
from lineage.formats.pickle_scan.archive import NPY_SNIFF, directory_too_large
from lineage.formats.pickle_scan.decoder import Decoder
from lineage.formats.pickle_scan.findings import Budget, Scan
from lineage.formats.pickle_scan.opcodes import OPCODES, SNIFF_BYTES, has_pickle_header
from lineage.formats.pickle_scan.source import Source
from lineage.userfiles import open_regular

LEGACY_MAGIC = b"\x80\x02\x8a\x0a"  # torch's legacy format: the magic-number pickle
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")


def pickle_kind(path: Path | str) -> str | None:
    """What in a file loading could unpickle, from its bytes alone (the name is never read).

    "torch-zip", "npz" or "zip" for a zip archive (its member names decide), "npy" for a NumPy
    array (object dtype or not: the scan tells), "compressed-pickle" for a compressed stream
    whose first inflated bytes are a pickle, "torch-legacy", "pickle" for a pickle of any
    protocol (0 and 1 have no header: the first opcodes must decode, see decodes_as_pickle),
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
    SNIFF_BYTES, or all of a shorter file) is None for certain: no archive, array, legacy
    or compression magic, and a first byte no pickle starts with. A folder's many text
    files are told from their first bytes this way, without a second read or a decoder."""
    first = head[:1]
    if first in _START_BYTES:
        return True
    head = head[:SNIFF_BYTES]
    return first in _MAGIC_FIRST_BYTES and (head.startswith((*ZIP_MAGICS, NPY_SNIFF))
                                            or compression_of(head) is not None)


def pickle_kind_of(raw: BinaryIO) -> str | None:
    """`pickle_kind` of a regular file opened for reading, at its start."""
    try:
        head = raw.read(SNIFF_BYTES)
        if head.startswith(ZIP_MAGICS):
            return _zip_kind(raw, os.fstat(raw.fileno()).st_size)
        if head.startswith(NPY_SNIFF):
            return "npy"
        if head.startswith(LEGACY_MAGIC):
            return "torch-legacy"
        if has_pickle_header(head) and head[2:3] and head[2] in OPCODES:
            return "pickle"  # PROTO and a first opcode (a safetensors length can be 80 02 00)
        method = compression_of(head)
        if method is not None:
            return "compressed-pickle" if _inflates_to_pickle(raw, head, method) else None
        if not head or head[0] not in START_OPCODES:
            return None
        window = head + raw.read(SNIFF_WINDOW - len(head) + 1)
    except OSError:
        return None
    return "pickle" if decodes_as_pickle(window) else None


def _inflates_to_pickle(raw: BinaryIO, head: bytes, method: str) -> bool:
    try:
        window = InflatingReader(raw, method, prefix=head).read(SNIFF_WINDOW + 1)
    except Exception:  # damaged data (zlib, lzma, EOF errors): the content cannot be told
        return False
    return has_pickle_header(window) or decodes_as_pickle(window)


SNIFF_WINDOW = 64 * 1024  # bytes decoded to recognise a pickle without a protocol header
_SNIFF_MIN_OPCODES = 8
# The opcodes a pickle can start with: those that need nothing on the stack (pickletools
# lists no stack input for the memo stores, but they store the object on top). Any other
# first opcode is a stack error before anything could be called, so decodes_as_pickle
# answers no without decoding, as it would after decoding (tests/test_pickle_evasions.py).
START_OPCODES = frozenset(code for code, op in OPCODES.items() if not op.stack_before
                          and op.name not in ("PUT", "BINPUT", "LONG_BINPUT"))
_START_BYTES = frozenset(bytes([code]) for code in START_OPCODES)  # 0x80 (PROTO) among them
# The first bytes of the zip, .npy and compressed-stream magics (compressed.compression_of):
# any other first byte outside _START_BYTES settles may_be_pickle at once.
_MAGIC_FIRST_BYTES = frozenset({b"P", b"\x93", b"\x1f", b"B", b"\xfd", b"]", b"x"})


def decodes_as_pickle(data: bytes) -> bool:
    """Would the unpickler take these bytes for a pickle and act on them?

    Yes if the first opcodes decode strictly (every argument as the unpickler parses it, no
    unknown opcode, no stack or memo error) and either call something before anything goes
    wrong (the call runs even if loading fails later), or end in STOP having imported
    something, or end in STOP with an empty stack after at least _SNIFF_MIN_OPCODES opcodes,
    or fill the window (the data being longer) with that many. Ordinary text and binary
    formats fail within a few bytes; a pickle that imports and calls nothing cannot run code.
    Data whose first opcode needs an object on the stack (not in START_OPCODES) fails
    unread: decoding it (decoder_accepts) reports a stack error at that first opcode,
    before anything could be called, and says no as well.
    """
    return bool(data) and data[0] in START_OPCODES and decoder_accepts(data)


def decoder_accepts(data: bytes) -> bool:
    """decodes_as_pickle's answer from decoding the data, whatever its first byte."""
    whole = len(data) <= SNIFF_WINDOW
    data = data[:SNIFF_WINDOW]
    scan = Scan(len(data), 0, Budget(len(data)))
    source = Source(io.BytesIO(data), limit=len(data), budget=scan.budget,
                    size=len(data) if whole else None)
    decoder = Decoder(source, None, scan, 0, strict=True)
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
    probe = Scan(0, 0, Budget(0))
    if directory_too_large(raw, size, None, probe):
        return "zip"
    try:
        with zipfile.ZipFile(raw) as archive:
            names = archive.namelist()
    except Exception:  # a damaged archive: the scan reports what is wrong
        return "zip"
    if any(name == "data.pkl" or name.endswith("/data.pkl") for name in names):
        return "torch-zip"
    return "npz" if any(name.endswith(".npy") for name in names) else "zip"
