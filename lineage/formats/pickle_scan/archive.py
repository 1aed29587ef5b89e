"""Zip archives and NumPy arrays in the pickle scan.

A torch-zip checkpoint, an npz file or any other archive is walked member by member (nested
archives to max_depth): each member is sniffed by its content and scanned as a pickle, an
array or an archive, or skipped (torch's storage blobs). A .npy header says whether the data
that follows is a pickle (object dtype) or plain data, never read.
"""

from __future__ import annotations

import copy
import io
import re
import struct
import zipfile
from collections import Counter
from typing import IO, BinaryIO

from lineage.formats.messages import show as _show
from lineage.formats.messages import show_value
from lineage.formats.npy import MAGIC as NPY_MAGIC
from lineage.formats.npy import MAX_HEADER_BYTES as NPY_MAX_HEADER
from lineage.formats.npy import npy_prefix_size, parse_npy_header
from lineage.formats.pickle_scan.decoder import is_pickle_after_all, scan_pickles
from lineage.formats.pickle_scan.findings import Scan, describe
from lineage.formats.pickle_scan.opcodes import HIGHEST_PROTOCOL, SNIFF_BYTES
from lineage.formats.pickle_scan.source import Source

MAX_ZIP_MEMBERS = 100_000
MAX_ZIP_DIRECTORY_BYTES = 64 * 2**20
MAX_COMPRESSION_RATIO = 100
COMPRESSION_RATIO_FLOOR = 2**20  # smaller members may compress this well without harm

NPY_SNIFF = NPY_MAGIC[:SNIFF_BYTES]
_STORAGE_BLOB = re.compile(r"(^|/)data/\d+$")  # torch's tensor storages inside the zip


# ---------------------------------------------------------------------------------------------
# NumPy arrays


def scan_npy(source: Source, member: str | None, scan: Scan, depth: int) -> None:
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
    scan_pickles(source, member, scan, depth)


# ---------------------------------------------------------------------------------------------
# Zip archives


def scan_zip(fp: BinaryIO, size: int, label: str | None, scan: Scan, depth: int) -> str:
    """Scan an archive's members; return "torch-zip", "npz" or "zip"."""
    if directory_too_large(fp, size, label, scan):
        return "zip"
    try:
        archive = zipfile.ZipFile(fp)
    except Exception as exc:  # BadZipFile, or struct / value errors from a mangled directory
        scan.add(label, "bad-zip", "unverifiable", f"not a readable zip archive ({describe(exc)})")
        return "zip"
    with archive:
        infos = archive.infolist()
        _report_duplicates(infos, label, scan)
        for info in infos:
            try:
                _scan_member(archive, info, label, scan, depth)
            except Exception as exc:  # any damage in one member (header, zlib, ...) is a finding
                detail = f"member cannot be read ({describe(exc)})"
                scan.add(_member_label(label, info.filename), "bad-zip", "unverifiable", detail)
    if any(i.filename == "data.pkl" or i.filename.endswith("/data.pkl") for i in infos):
        return "torch-zip"
    return "npz" if any(i.filename.endswith(".npy") for i in infos) else "zip"


_EOCD = struct.Struct("<4s4H2LH")  # signature, disk numbers, entry counts, size, offset, comment


def directory_too_large(fp: BinaryIO, size: int, label: str | None, scan: Scan) -> bool:
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


def _report_duplicates(infos: list[zipfile.ZipInfo], label: str | None, scan: Scan) -> None:
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
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, label: str | None, scan: Scan, depth: int
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
    with _open_member(archive, info, name, scan) as stream:  # errors: reported by the caller
        head = stream.read(SNIFF_BYTES)
        kind = _member_kind(info.filename, head)
        if kind == "zip":
            _scan_nested_archive(stream, head, info, name, scan, depth)
        elif kind == "npy":
            source = _member_source(stream, head, info, scan)
            scan.members_scanned.append(name)
            scan_npy(source, name, scan, depth)
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


def _check_compression(info: zipfile.ZipInfo, name: str, scan: Scan) -> None:
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
    # which would hide the end of a damaged pickle; Source computes the CRC itself instead.
    clone = copy.copy(info)
    del clone.CRC
    return clone


_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # signature ... name length, extra length
_UTF8_NAME = 0x800


def _open_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str,
                 scan: Scan) -> IO[bytes]:
    """The bytes the member's central directory entry points at, whatever name its local
    header gives. torch (miniz) finds members by the central directory and reads the local
    header only for where the data starts; zipfile refuses a name that differs, which would
    leave the bytes torch loads unscanned. A differing name is reported and read past."""
    clone = _without_crc(info)
    try:
        return archive.open(clone)
    except zipfile.BadZipFile:
        local = _local_name(archive, info)
        if local is None or local == info.orig_filename:
            raise  # another damage: the caller reports it
    scan.add(name, "local-name-mismatch", "unknown",
             f"the local header names it {_show(local)}: tools that read local headers "
             "(unzip, streaming extractors) see another member than torch loads; the bytes "
             "the central directory points at are the ones scanned")
    clone.orig_filename = local
    return archive.open(clone)


def _local_name(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> str | None:
    """The name in the member's local header, decoded as zipfile decodes it (None: no
    readable header there; zipfile then reports what is wrong)."""
    fp = archive.fp
    if fp is None:
        return None
    fp.seek(info.header_offset)
    header = fp.read(_LOCAL_HEADER.size)
    if len(header) < _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        return None
    fields = _LOCAL_HEADER.unpack(header)
    raw = fp.read(fields[9])
    encoding = "utf-8" if fields[2] & _UTF8_NAME else \
        (getattr(archive, "metadata_encoding", None) or "cp437")  # as zipfile decodes it
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError:
        return None


def _member_kind(filename: str, head: bytes) -> str | None:
    """ "zip", "pickle", "blob" (a storage blob that starts like a pickle) or None (skip)."""
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    if head.startswith(NPY_SNIFF) or filename.endswith(".npy"):
        return "npy"
    looks_like_pickle = len(head) >= 2 and head[0] == 0x80 and head[1] <= HIGHEST_PROTOCOL
    if looks_like_pickle and _STORAGE_BLOB.search(filename):
        return "blob"
    if looks_like_pickle or filename.endswith((".pkl", ".pickle")):
        return "pickle"
    return None


def _member_source(stream: IO[bytes], head: bytes, info: zipfile.ZipInfo, scan: Scan) -> Source:
    return Source(
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
    scan: Scan,
    depth: int,
    *,
    tolerant: bool,
) -> None:
    target = scan.child() if tolerant else scan
    source = _member_source(stream, head, info, scan)
    target.members_scanned.append(name)
    scan_pickles(source, name, target, depth)
    _check_source(source, info, name, target)
    if not tolerant:
        return
    if is_pickle_after_all(target):
        scan.merge(target)
    else:
        detail = "starts like a pickle but does not parse and names no global: tensor data"
        scan.add(name, "pickle-like-data", "info", detail)


def _check_source(source: Source, info: zipfile.ZipInfo, name: str, scan: Scan) -> None:
    if source.error is not None:
        detail = f"member data cannot be read ({describe(source.error)})"
        scan.add(name, "bad-zip", "unverifiable", detail)
    elif source.eof and source.crc is not None and source.crc != info.CRC:
        detail = f"CRC-32 {source.crc:08x} of the content differs from the recorded {info.CRC:08x}"
        scan.add(name, "crc-mismatch", "unverifiable", detail)


def _scan_nested_archive(
    stream: IO[bytes], head: bytes, info: zipfile.ZipInfo, name: str, scan: Scan, depth: int
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
    fmt = scan_zip(io.BytesIO(data), len(data), name, scan, depth + 1)
    scan.add(name, "nested-archive", "info", f"member is a {fmt} archive, scanned as {name}!…")
