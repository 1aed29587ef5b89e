"""`lineage ingest checkpoint DIR --run RUN --step N`: a checkpoint folder, with evidence.

Records every file (size, SHA-256, BLAKE3, format), the three verdicts of `lineage
verify`, and whether the checkpoint's weights digest equals what the run's chain recorded
for that step. A checkpoint that fails a verdict is still recorded, with its verdicts:
that is the evidence.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lineage.durable import blake3_file
from lineage.errors import ConflictError, InputError, UnknownObjectError
from lineage.formats.sha256sums import sha256_files
from lineage.store import Store
from lineage.verify import safetensors_weights_digest, verify_folder

FORMATS = {".safetensors": "safetensors", ".json": "json", ".gguf": "gguf", ".onnx": "onnx",
           ".bin": "pickle", ".pt": "pickle", ".pth": "pickle", ".ckpt": "pickle"}


def ingest_checkpoint(
    store: Store, folder: str | Path, *, run: str, step: int, sums: str | Path | None = None,
) -> dict[str, Any]:
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(folder, "not a checkpoint folder")
    verdicts = verify_folder(folder, sums=sums)
    files = _describe(folder)
    digest = None
    if verdicts["structure"]["ok"]:
        digest = safetensors_weights_digest(folder)
    with store.reader(views=False) as con:
        if con.execute("SELECT 1 FROM runs WHERE name = ?", [run]).fetchone() is None:
            raise UnknownObjectError(f"no run named {run!r}")
        row = con.execute("SELECT weights_digest FROM steps WHERE run = ? AND step = ?",
                          [run, step]).fetchone()
    recorded = row[0] if row else None
    matches = None if recorded is None or digest is None else digest == recorded
    result = {"run": run, "step": step, "path": str(folder.resolve()), "files": files,
              "verdicts": verdicts, "weights_digest": digest,
              "chain_weights_digest": recorded, "matches_chain": matches}
    with store.writer() as con:
        existing = con.execute("SELECT files FROM checkpoints WHERE run = ? AND step = ?",
                               [run, step]).fetchone()
        if existing is not None:
            if json.loads(existing[0]) != files:
                raise ConflictError(f"run {run!r} already has another checkpoint for step {step}")
            return {**result, "status": "unchanged"}
        con.execute(
            "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now()::TIMESTAMP)",
            [run, step, result["path"], json.dumps(files, sort_keys=True),
             verdicts["structure"]["ok"], verdicts["checksums"]["ok"], digest, recorded,
             matches, json.dumps(verdicts, sort_keys=True, default=str)])
    return {**result, "status": "added"}


def _describe(folder: Path) -> list[dict[str, Any]]:
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    sha = sha256_files(paths)
    files = []
    for path in paths:
        files.append({"path": path.relative_to(folder).as_posix(), "size": path.stat().st_size,
                      "sha256": sha[path], "blake3": blake3_file(path),
                      "format": FORMATS.get(path.suffix.lower(), "other")})
    return files
