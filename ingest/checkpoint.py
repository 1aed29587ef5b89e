"""`lineage ingest checkpoint DIR --run RUN --step N`: a checkpoint folder, with evidence.

Records every file (size, SHA-256, BLAKE3, format), the verdicts of `lineage verify`, the
risk checks (a dangerous pickle fails unless its kind is allowed by name), and whether the
checkpoint's weights digest (and, with optimizer/state.safetensors, its state digest) equals
what the run's chain recorded for that step. A checkpoint that fails is still recorded,
with its verdicts: that is the evidence; `ok` says whether it passed them all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lineage.api import Store
from lineage.diligence.verify import verify_folder
from lineage.errors import ConflictError, InputError, UnknownObjectError
from lineage.formats.sha256sums import sha256_files
from lineage.runs.checkpoint_evidence import checkpoint_digests
from lineage.store.durable import blake3_file, guarded_write

FORMATS = {".safetensors": "safetensors", ".json": "json", ".gguf": "gguf", ".onnx": "onnx",
           ".bin": "pickle", ".pt": "pickle", ".pth": "pickle", ".ckpt": "pickle"}


@guarded_write
def ingest_checkpoint(
    store: Store, folder: str | Path, *, run: str, step: int, sums: str | Path | None = None,
    allow_risks: tuple[str, ...] = (), sums_key: str | Path | None = None,
) -> dict[str, Any]:
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(folder, "not a checkpoint folder")
    verdicts = verify_folder(folder, sums=sums, allow_risks=allow_risks,  # as `lineage verify`
                             require_weights=True, sums_key=sums_key)
    files = _describe(folder)
    risks = verdicts["risks"]
    digests: dict[str, Any] = {"weights_digest": None, "state_digest": None,
                               "optimizer_errors": []}
    if verdicts["structure"]["ok"]:
        digests = checkpoint_digests(folder)
    recorded = _chain_digests(store, run, step)
    matches = _same(digests["weights_digest"], recorded["weights_digest"])
    state = _same(digests["state_digest"], recorded["state_digest"])
    ok = verdicts["structure"]["ok"] and verdicts["checksums"]["ok"] is not False and \
        verdicts["authenticity"]["ok"] is not False and \
        matches is not False and state is not False and risks["ok"] and \
        not digests["optimizer_errors"]
    result = {"run": run, "step": step, "path": str(folder.resolve()), "files": files,
              "verdicts": verdicts, "risks": risks, "ok": bool(ok),
              "weights_digest": digests["weights_digest"],
              "chain_weights_digest": recorded["weights_digest"], "matches_chain": matches,
              "state_digest": digests["state_digest"],
              "chain_state_digest": recorded["state_digest"], "matches_state": state,
              "optimizer_errors": digests["optimizer_errors"]}
    with store.writer() as con:
        existing = con.execute("SELECT files FROM checkpoints WHERE run = ? AND step = ?",
                               [run, step]).fetchone()
        if existing is not None:
            if json.loads(existing[0]) != files:
                raise ConflictError(f"run {run!r} already has another checkpoint for step {step}")
            return {**result, "status": "unchanged"}
        con.execute(
            "INSERT INTO checkpoints (run, step, path, files, structure_ok, checksums_ok, "
            "weights_digest, chain_weights_digest, matches_chain, verdicts, created_at, "
            "state_digest, chain_state_digest, matches_state, risks) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now()::TIMESTAMP, ?, ?, ?, ?)",
            [run, step, result["path"], json.dumps(files, sort_keys=True),
             verdicts["structure"]["ok"], verdicts["checksums"]["ok"], digests["weights_digest"],
             recorded["weights_digest"], matches, json.dumps(verdicts, sort_keys=True, default=str),
             digests["state_digest"], recorded["state_digest"], state,
             json.dumps(risks, sort_keys=True)])
    return {**result, "status": "added"}


def _chain_digests(store: Store, run: str, step: int) -> dict[str, Any]:
    """The weights and state digests the run's chain recorded for the step (None: none)."""
    with store.reader(views=False) as con:
        if con.execute("SELECT 1 FROM runs WHERE name = ?", [run]).fetchone() is None:
            raise UnknownObjectError(f"no run named {run!r}")
        row = con.execute("SELECT weights_digest, record FROM steps WHERE run = ? AND step = ?",
                          [run, step]).fetchone()
    if row is None:
        return {"weights_digest": None, "state_digest": None}
    state = json.loads(row[1]).get("state_digest")
    return {"weights_digest": row[0], "state_digest": state if isinstance(state, str) else None}


def _same(mine: str | None, recorded: str | None) -> bool | None:
    return None if mine is None or recorded is None else mine == recorded


def _describe(folder: Path) -> list[dict[str, Any]]:
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    sha = sha256_files(paths)
    files = []
    for path in paths:
        files.append({"path": path.relative_to(folder).as_posix(), "size": path.stat().st_size,
                      "sha256": sha[path], "blake3": blake3_file(path),
                      "format": FORMATS.get(path.suffix.lower(), "other")})
    return files
