"""`lineage verify DIR`: four verdicts on a model or checkpoint folder, never merged.

structure  one verdict for the whole folder from the folder model (lineage.formats.folder):
           safetensors (every header rule, dtype x shape = byte length, the index), GGUF
           (single or split), ONNX (with its external data), torch pickles (the opcode
           stream decodes), and downloads that are not what they claim (a download in
           progress, a git-LFS pointer, an error page, an incomplete set); warnings (no
           config, no tokenizer) never fail it
risks      is it safe to open: no dangerous or unknown finding (lineage.report.risks), except
           the kinds allowed by name (`allow_risks`)
checksums  the folder against a trusted SHA256SUMS list (null when none was given)
load       "not-tested": lineage reads files, it never loads or runs a model

Passing one verdict says nothing of the others. A path that is not a folder is bad input
(InputError, exit 2), not a failed verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from lineage.chain import TensorDigest
from lineage.errors import InputError, UsageError
from lineage.formats import safetensors as st
from lineage.formats.folder import read_folder
from lineage.formats.sha256sums import read_sums, verify_sums
from lineage.report.risks import folder_risks, risk_verdict

LOAD_NOT_TESTED = "not-tested"
_CHUNK = 1 << 20


def verify_folder(
    folder: str | Path, *, sums: str | Path | None = None, max_header_mib: float = 16,
    workers: int | None = None, allow_risks: Iterable[str] = (),
) -> dict[str, Any]:
    folder = Path(folder)
    if max_header_mib <= 0:
        raise UsageError("--max-header-mib must be positive")
    if not folder.is_dir():
        problem = "not a folder (verify takes a model folder)" if folder.exists() \
            else "no such folder"
        raise InputError(folder, problem)
    model = read_folder(folder, max_header_bytes=int(max_header_mib * 2**20))
    risks = risk_verdict(folder_risks(model), allow=allow_risks)
    checksums = checksums_verdict(folder, sums, workers=workers)
    ran = [model.structure["ok"], risks["ok"]]
    ran += [checksums["ok"]] if checksums["ok"] is not None else []
    return {"folder": str(folder), "ok": all(ran), "structure": model.structure,
            "risks": risks, "checksums": checksums, "load": LOAD_NOT_TESTED}


def checksums_verdict(
    folder: Path, sums: str | Path | None, *, workers: int | None = None
) -> dict[str, Any]:
    """The folder against a trusted SHA256SUMS list; `ok` is None when none was given."""
    if sums is None:
        return {"ok": None, "files": [], "problems": [], "list": None}
    entries = read_sums(Path(sums))  # an unreadable or malformed list is an error (exit 2)
    report = verify_sums(folder, entries, workers=workers)
    return {"ok": report.ok, "files": report.files, "list": str(sums),
            "problems": [p.__dict__ for p in report.problems],
            "bytes_hashed": report.bytes_hashed}


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
