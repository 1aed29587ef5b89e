"""The scan's entry points: a file's format from its first bytes, then the scan it needs.

A zip archive, a .npy array, a compressed stream or a (legacy torch) pickle stream is handed to
the part of the package that reads it; every read is bounded and counted, and every problem in
the content becomes a finding (the package docstring lists them).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import BinaryIO, cast

from lineage.formats.compressed import InflatingReader, compression_of
from lineage.formats.pickle_scan.archive import NPY_SNIFF, scan_npy, scan_zip
from lineage.formats.pickle_scan.decoder import scan_pickles
from lineage.formats.pickle_scan.findings import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MEMBER_BYTES,
    DEFAULT_MAX_TOTAL_BYTES,
    Budget,
    GlobalRef,
    PickleFinding,
    PickleScan,
    Scan,
    describe,
)
from lineage.formats.pickle_scan.opcodes import SNIFF_BYTES
from lineage.formats.pickle_scan.sniff import LEGACY_MAGIC, ZIP_MAGICS
from lineage.formats.pickle_scan.source import CountingFile, Source
from lineage.userfiles import open_regular

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
    scan = Scan(max_member_bytes, max_depth, Budget(max_total_bytes))
    with raw:
        counting = CountingFile(raw)
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
    budget = Budget(len(data) + DEFAULT_MAX_TOTAL_BYTES)
    scan = Scan(max(len(data), DEFAULT_MAX_MEMBER_BYTES), DEFAULT_MAX_DEPTH, budget)
    source = Source(io.BytesIO(data), limit=len(data), budget=scan.budget, size=len(data))
    scan_pickles(source, member, scan, 0)
    return scan.collector.globals, scan.collector.close()


# ---------------------------------------------------------------------------------------------
# Formats


def _scan_file(counting: CountingFile, size: int, scan: Scan) -> str:
    fp = cast(BinaryIO, counting)  # it has the read / seek / tell that zipfile and Source use
    try:
        head = counting.read(SNIFF_BYTES)
    except OSError as exc:
        scan.add(None, "read-error", "unverifiable", f"cannot read ({exc.strerror or exc})")
        return "pickle"
    if head.startswith(ZIP_MAGICS):
        return scan_zip(fp, size, None, scan, 0)  # zipfile seeks where it needs
    if head.startswith(NPY_SNIFF):
        source = Source(fp, limit=scan.max_member_bytes, budget=scan.budget, size=size,
                        seekable=True, prefix=head)
        scan_npy(source, None, scan, 0)
        _report_read_error(source, scan)
        return "npy"
    method = compression_of(head)
    if method is not None:
        return _scan_compressed(fp, head, method, scan)
    legacy = head.startswith(LEGACY_MAGIC)
    source = Source(
        fp,
        limit=scan.max_member_bytes,
        budget=scan.budget,
        size=size,
        seekable=True,
        prefix=head,  # the sniffed bytes start the stream: no second read of them
    )
    scan_pickles(source, None, scan, 0, legacy=legacy)
    _report_read_error(source, scan)
    return "torch-legacy" if legacy else "pickle"


def _scan_compressed(fp: BinaryIO, head: bytes, method: str, scan: Scan) -> str:
    """A joblib-style compressed pickle: scanned as it inflates, never past the byte caps."""
    inflated = cast(BinaryIO, InflatingReader(fp, method, prefix=head))
    source = Source(inflated, limit=scan.max_member_bytes, budget=scan.budget)
    scan.add(None, "compressed", "info", f"{method}-compressed: the pickle inside is scanned")
    scan_pickles(source, None, scan, 0)
    _report_read_error(source, scan)
    if source.eof and source.error is None:  # a short read hides what ended the data
        try:
            inflated.read(1)
        except Exception as exc:  # damaged or cut-off compressed data after the last pickle
            detail = f"the compressed data is damaged after byte {source.pos} ({describe(exc)})"
            scan.add(None, "read-error", "unverifiable", detail)
    return "compressed-pickle"


def _report_read_error(source: Source, scan: Scan) -> None:
    if source.error is not None:
        scan.add(None, "read-error", "unverifiable", f"read failed ({describe(source.error)})")
