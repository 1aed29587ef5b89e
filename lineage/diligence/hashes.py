"""SHA-256 of each file of a folder, for the report's evidence.

Hashing reads every byte, so it is done only when it is cheap or asked for: by default when
the folder's files add up to at most `AUTO_LIMIT` (1 GiB: about 1.5 s on a loaded 2-core
machine, bench/model_report.py), always with `hash_files=True` (`--hash`), never with
`hash_files=False` (`--no-hash`). Files a `--sums` check already hashed are not read again.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lineage.errors import InputError

AUTO_LIMIT = 2**30


def file_hashes(folder: Path, files: list[dict[str, Any]], *, hash_files: bool | None,
                known: dict[str, str] | None = None,
                vetted: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """{computed, reason, how, files: {path: hex sha256}} for the listed files.

    `vetted` maps a hub cache snapshot's links to their blobs: those are read through it.
    """
    known = dict(known or {})
    total = sum(f["size"] for f in files)
    if hash_files is False:
        return _result(False, "not asked for (--no-hash)", known)
    if hash_files is None and total > AUTO_LIMIT:
        return _result(False, f"the files add up to {total:,} bytes, more than the "
                       f"{AUTO_LIMIT:,} hashed by default: pass --hash", known)
    vetted = dict(vetted or {})
    source = {f["path"]: vetted.get(f["path"], folder / f["path"]) for f in files
              if f["path"] not in known}
    todo = {rel: path for rel, path in source.items() if _regular(path)}
    from lineage.formats.sha256sums import sha256_files

    try:
        digests = sha256_files(list(todo.values()))
    except InputError as exc:
        return _result(False, f"a file could not be read: {exc}", known)
    known.update({rel: digests[path] for rel, path in todo.items()})
    how = "--hash" if hash_files else f"by default (files add up to {total:,} bytes)"
    return {**_result(True, None, known), "how": how}


def _result(computed: bool, reason: str | None, files: dict[str, str]) -> dict[str, Any]:
    return {"computed": computed, "reason": reason, "how": None, "algorithm": "sha256",
            "files": dict(sorted(files.items()))}


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def hashes_from_sums(integrity: dict[str, Any]) -> dict[str, str]:
    """Hashes a `--sums` check computed: {path: hex} of the files it read.

    Only a SHA256SUMS list's: a cache snapshot's git blobs are checked by SHA-1.
    """
    checksums = integrity.get("checksums", {})
    if checksums.get("source") != "sums-list":
        return {}
    rows = checksums.get("files", []) or []
    return {r["path"]: r["actual"] for r in rows if isinstance(r, dict) and r.get("actual")}
