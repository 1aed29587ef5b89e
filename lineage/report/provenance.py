"""How open is this model's provenance? Tiers of DOMAIN.md §4, decided from evidence.

closed            no weights in the folder (a tokenizer-only folder, a vocabulary-only GGUF):
                  nothing here to be open about, whatever the model's weights are elsewhere
open weights      weights (at least one float or quantized tensor), nothing about their data
open source       weights whose digest matches a checkpoint of a recorded run, whose stream
                  orders a registered corpus manifest (data and recipe are named)
fully auditable   the same, and the run's step hash chain verifies and that checkpoint
                  matches the chain's record for its step

The tier names what is missing to reach the next one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lineage.errors import InputError, LineageError
from lineage.store import Store


def provenance(folder: Path, *, has_weights: bool, store: Store | None,
               absent_reason: str | None = None) -> dict[str, Any]:
    if not has_weights:
        why = f"no weights in this folder: {absent_reason}" if absent_reason else \
            "no weights in this folder"
        return {"tier": "closed", "missing": ["weights"], "evidence": [why]}
    missing = []
    evidence: list[str] = []
    checkpoint = _matching_checkpoint(folder, store) if store else None
    if store is None:
        missing.append("a lineage store to look the weights up in (--store)")
    elif checkpoint is None:
        missing.append("a recorded checkpoint with these weights (lineage ingest checkpoint)")
    if checkpoint is None:
        return {"tier": "open weights", "missing": missing + _rest(), "evidence": evidence}
    run, step, corpus, manifest = checkpoint
    evidence += [f"weights match checkpoint {run}@{step}",
                 f"run {run} read a stream over corpus {corpus} ({manifest})"]
    from lineage.chain_verify import verify_chain

    report = verify_chain(store, run)  # type: ignore[arg-type]
    matched = _matches_chain(store, run, step)  # type: ignore[arg-type]
    if report["ok"] and matched:
        evidence.append(f"chain of run {run} verifies ({report['steps_checked']} steps)")
        return {"tier": "fully auditable", "missing": [], "evidence": evidence}
    if not report["ok"]:
        missing.append(f"a verifying step hash chain (broken at step "
                       f"{report['first_broken_step']}: {report['reason']})")
    if not matched:
        missing.append(f"checkpoint {run}@{step} matching the chain's weights digest")
    return {"tier": "open source", "missing": missing, "evidence": evidence}


def _rest() -> list[str]:
    return ["a registered corpus manifest and stream for the run", "a verifying step hash chain"]


def _matching_checkpoint(folder: Path, store: Store) -> tuple[str, int, str, str] | None:
    from lineage.verify import safetensors_weights_digest

    try:
        digest = safetensors_weights_digest(folder)
    except (InputError, OSError):
        return None
    try:
        with store.reader(views=False) as con:
            row = con.execute(
                "SELECT c.run, c.step, s.corpus, s.manifest_hash FROM checkpoints c "
                "JOIN runs r ON r.name = c.run JOIN streams s ON s.name = r.stream "
                "WHERE c.weights_digest = ? ORDER BY c.run, c.step LIMIT 1", [digest]).fetchone()
    except LineageError:
        return None
    return tuple(row) if row else None  # type: ignore[return-value]


def _matches_chain(store: Store, run: str, step: int) -> bool:
    with store.reader(views=False) as con:
        row = con.execute("SELECT matches_chain FROM checkpoints WHERE run = ? AND step = ?",
                          [run, step]).fetchone()
    return bool(row and row[0])
