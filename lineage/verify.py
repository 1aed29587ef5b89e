"""`lineage verify DIR`: three verdicts on a model or checkpoint folder, never merged.

structure  every safetensors rule of DOMAIN.md §1 plus dtype x shape = byte length
checksums  the folder against a trusted SHA256SUMS list (null when none was given)
load       "not-tested": lineage reads files, it never loads or runs a model

Passing one verdict says nothing of the others (DESIGN.md, principle 4).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lineage.chain import TensorDigest
from lineage.errors import UsageError
from lineage.formats import safetensors as st
from lineage.formats.sha256sums import read_sums, verify_sums

LOAD_NOT_TESTED = "not-tested"
_CHUNK = 1 << 20


def verify_folder(
    folder: str | Path, *, sums: str | Path | None = None, max_header_mib: float = 16,
    workers: int | None = None,
) -> dict[str, Any]:
    folder = Path(folder)
    if max_header_mib <= 0:
        raise UsageError("--max-header-mib must be positive")
    structure = st.check_folder(folder, max_header_bytes=int(max_header_mib * 2**20))
    checksums: dict[str, Any] = {"ok": None, "files": [], "problems": [], "list": None}
    if sums is not None:
        entries = read_sums(Path(sums))  # an unreadable or malformed list is an error (exit 2)
        report = verify_sums(folder, entries, workers=workers)
        checksums = {"ok": report.ok, "files": report.files, "list": str(sums),
                     "problems": [p.__dict__ for p in report.problems],
                     "bytes_hashed": report.bytes_hashed}
    ran = [structure["ok"]] + ([checksums["ok"]] if checksums["ok"] is not None else [])
    return {"folder": str(folder), "ok": all(ran), "structure": structure,
            "checksums": checksums, "load": LOAD_NOT_TESTED}


def safetensors_weights_digest(folder: str | Path) -> str:
    """The lineage-tensors/1 digest of every tensor in a folder's safetensors files.

    Read straight from the files, tensor by tensor in name order, without loading a model:
    comparable with a chain record's `weights_digest`.
    """
    folder = Path(folder)
    tensors: list[tuple[str, str, tuple[int, ...], Path, int, int]] = []
    for path in sorted(folder.glob("*.safetensors")):
        header = st.read_header(path)
        base = st.PREFIX_BYTES + header.header_len
        tensors += [(t.name, t.dtype, t.shape, path, base + t.start, t.end - t.start)
                    for t in header.tensors]
    digest = TensorDigest()
    for name, dtype, shape, path, offset, length in sorted(
            tensors, key=lambda t: t[0].encode("utf-8")):
        digest.add_chunks(name, dtype, shape, length, _read_range(path, offset, length))
    return digest.hexdigest()


def _read_range(path: Path, offset: int, length: int) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        handle.seek(offset)
        left = length
        while left:
            chunk = handle.read(min(_CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk
