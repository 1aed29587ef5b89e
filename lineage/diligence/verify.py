"""`lineage verify DIR`: five verdicts on a model or checkpoint folder, never merged.

structure  one verdict for the whole folder (or one model file and its split parts) from the
           folder model (lineage.formats.folder): safetensors (every header rule, dtype x
           shape = byte length, the index), GGUF (single or split), ONNX (with its external
           data), torch pickles (the opcode stream decodes), and downloads that are not
           what they claim (a download in progress, a git-LFS pointer, an error page, an
           incomplete set), and special files (FIFOs, devices: never opened); warnings (no
           config, no tokenizer) never fail it
risks      is it safe to open: no dangerous or unknown finding (lineage.diligence.risks), except
           the kinds allowed by name (`allow_risks`)
checksums  the folder against a trusted source of hashes: a SHA256SUMS list when one is
           given (`source` "sums-list"); else, for a Hugging Face cache snapshot, the names
           of the cache's blobs ("hf-cache-blobs"); else not checked (`ok` and `source` null)
authenticity  who wrote that list: its signature file checked against a key the caller
           trusts (`sums_key`; lineage.diligence.authenticity); not checked (`ok` null)
           without a key
load       "not-tested": lineage reads files, it never loads or runs a model

Passing one verdict says nothing of the others. A path that is neither a folder nor a
regular file is bad input (InputError, exit 2), not a failed verdict; so is a hub cache or
one of its repository folders (the error names a snapshot to verify instead). A model file
(one GGUF, safetensors, ONNX or pickle file) is checked with its split parts: against a
list, only the list's entries for those files count, and the list must name each.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from lineage.diligence.authenticity import authenticity_verdict, not_checked
from lineage.diligence.risks import folder_risks, risk_verdict
from lineage.errors import InputError, UsageError
from lineage.formats import hf_cache
from lineage.formats.folder import FolderModel, check_model_path, read_folder, sibling_names
from lineage.formats.sha256sums import SumsReport, read_sums, verify_sums, write_sums

LOAD_NOT_TESTED = "not-tested"


def verify_folder(
    folder: str | Path, *, sums: str | Path | None = None, max_header_mib: float = 16,
    workers: int | None = None, strict: bool = False, allow_risks: Iterable[str] = (),
    require_weights: bool = False, sums_key: str | Path | None = None,
) -> dict[str, Any]:
    """The verdicts on a folder, or on one model file (with its split parts).
    `strict`: files the list does not name fail it. A folder with no weights file at all
    fails the structure verdict, unless a list or a snapshot checks it and weights are not
    `require_weights` (a checkpoint's are): then its checksums are the verdict.
    `sums_key`: the key the list's signature (LIST.sig, .minisig or .asc) is checked
    against, a separate `authenticity` verdict."""
    folder = Path(folder)
    if max_header_mib <= 0:
        raise UsageError("--max-header-mib must be positive")
    if sums_key is not None and sums is None:
        raise UsageError("--sums-key checks the signature of a --sums list: give the list")
    require_model_path(folder)
    # Before any hashing: a key file of no known format is an error at once.
    authenticity = (not_checked() if sums_key is None or sums is None
                    else authenticity_verdict(sums, sums_key))
    model = read_folder(folder, max_header_bytes=int(max_header_mib * 2**20))
    snapshot = model.snapshot
    risks = risk_verdict(folder_risks(model), allow=allow_risks)
    checksums = checksums_verdict(model.root, sums, workers=workers, strict=strict,
                                  snapshot=snapshot, only=chosen_files(model),
                                  contents=model.contents)
    structure = model.structure
    if not require_weights and checksums["ok"] is not None and _only_no_weights(structure):
        structure = _not_applicable(structure)
    ran = [structure["ok"], risks["ok"], checksums["ok"], authenticity["ok"]]
    return {"folder": str(folder), "ok": all(v for v in ran if v is not None),
            "structure": structure, "risks": risks, "checksums": checksums,
            "authenticity": authenticity, "load": LOAD_NOT_TESTED,
            "snapshot": snapshot.describe() if snapshot else None}


def _only_no_weights(structure: dict[str, Any]) -> bool:
    """A folder with no weights file at all and nothing else wrong with it (a wheel, a
    dataset): checked against a list, its checksums are the whole verdict."""
    return [e["rule"] for e in structure["errors"]] == ["no-weights"]


def _not_applicable(structure: dict[str, Any]) -> dict[str, Any]:
    """The structure verdict as not run (`ok` None); "no weights" kept as a warning."""
    return {**structure, "ok": None, "errors": [],
            "warnings": [*structure["errors"], *structure["warnings"]]}


def checksums_verdict(
    folder: Path, sums: str | Path | None, *, workers: int | None = None, strict: bool = False,
    snapshot: hf_cache.Snapshot | None = None, only: Collection[str] | None = None,
    contents: Mapping[str, bytes] | None = None,
) -> dict[str, Any]:
    """The folder against a trusted source: a SHA256SUMS list, else a snapshot's blob names.

    `ok` is None when there is neither. `only`: the files of one model file's set (its
    paths in the folder); the list's other entries are not checked, and it must name these.
    `contents`: small files the folder model read whole (verify_sums does not read them
    again).
    """
    vetted = snapshot.blobs if snapshot else None
    if sums is not None:
        entries = read_sums(Path(sums))  # a missing or malformed list is an error (exit 2)
        report = verify_sums(folder, entries, workers=workers, list_path=Path(sums),
                             strict=strict, vetted_links=vetted, only=only, contents=contents)
        return _checksums(report, listed=str(sums))
    if snapshot is not None:
        return _checksums(hf_cache.verify_snapshot(snapshot, workers=workers, only=only))
    return {"ok": None, "source": None, "files": [], "problems": [], "list": None,
            "unlisted": []}


def chosen_files(model: FolderModel) -> list[str] | None:
    """The paths a model file was read with (None: the whole folder was)."""
    return None if model.whole else [f["path"] for f in model.files]


def folder_sums(folder: str | Path, *, sums_name: str = "SHA256SUMS",
                workers: int | None = None) -> str:
    """SHA256SUMS lines for a folder, or for one model file and its split parts (named as
    in their folder); a cache snapshot is listed through its vetted blobs."""
    folder = Path(folder)
    require_model_path(folder)
    whole = check_model_path(folder)
    root = folder if whole else folder.parent
    names = None if whole else sibling_names(folder)
    snapshot = hf_cache.find_snapshot(root)
    if snapshot is not None:
        chosen = snapshot if names is None else snapshot.restricted(names)
        return hf_cache.write_snapshot_sums(chosen, workers=workers)
    files = None if names is None else [Path(name) for name in sorted(names)]
    return write_sums(root, files, sums_name=sums_name, workers=workers)


def require_folder(folder: Path) -> None:
    if not folder.is_dir():
        problem = "not a directory" if os.path.lexists(folder) else "no such directory"
        raise InputError(folder, f"no-folder: {problem}")


def require_model_path(path: Path) -> None:
    """A folder or a regular file that is no hub cache or cache repository folder (those
    are pointed at their snapshots); InputError (exit 2) otherwise, before any work."""
    if not os.path.lexists(path):
        raise InputError(path, "no-folder: no such file or folder")
    check_model_path(path)  # refuses a device, FIFO or socket unopened
    problem = hf_cache.not_a_model_folder(path) if path.is_dir() else None
    if problem is not None:
        raise InputError(path, problem)


def _checksums(report: SumsReport, *, listed: str | None = None) -> dict[str, Any]:
    return {"ok": report.ok, "source": report.source, "list": listed, "files": report.files,
            "problems": [p.__dict__ for p in report.problems], "unlisted": report.unlisted,
            "bytes_hashed": report.bytes_hashed}


def safetensors_weights_digest(folder: str | Path) -> str:
    """The lineage-tensors/1 digest of every tensor in a folder's safetensors files.

    Read straight from the files, tensor by tensor in name order, without loading a model:
    comparable with a chain record's `weights_digest`.
    """
    from lineage.runs.checkpoint_evidence import weights_digest

    return weights_digest(folder)
