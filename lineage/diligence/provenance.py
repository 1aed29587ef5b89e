"""How open is this model's provenance? Tiers of openness, decided from evidence.

closed            no weights in the folder (a tokenizer-only folder, a vocabulary-only GGUF):
                  nothing here to be open about, whatever the model's weights are elsewhere
open weights      weights (at least one float or quantized tensor), nothing about their data
open source       weights whose digest matches a checkpoint of a recorded run, whose stream
                  orders a registered corpus manifest (data and recipe are named)
fully auditable   the same, and the run's step hash chain verifies (its links and its
                  declared skip rule) and that checkpoint is evidence for it: its weights
                  match the chain's record for its step, its optimizer state does not
                  differ from it, and its risk checks passed

The tier names what is missing to reach the next one.

Training datasets a model card declares (`datasets:`) are claims: each is looked up in the
store's corpora by name (the dataset id, or with its `/` written `--` as corpus names have
no `/`), and listed in `datasets` as recorded (with the corpus's manifest hash) or only
named. A declared dataset only named is missing: it keeps the folder from being fully
auditable. A declaration never raises a tier.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lineage.errors import InputError, LineageError
from lineage.store.base import BaseStore


def provenance(folder: Path, *, has_weights: bool, store: BaseStore | None,
               absent_reason: str | None = None,
               declared: list[str] | None = None) -> dict[str, Any]:
    """The tier; `declared`: the training datasets the folder's model card names."""
    datasets = declared_datasets(declared or [], store)
    found = _tier(folder, has_weights=has_weights, store=store, absent_reason=absent_reason,
                  datasets=datasets)
    if datasets:
        found["datasets"] = datasets
    return found


def _tier(folder: Path, *, has_weights: bool, store: BaseStore | None,
          absent_reason: str | None, datasets: list[dict[str, Any]]) -> dict[str, Any]:
    if not has_weights:
        why = f"no weights in this folder: {absent_reason}" if absent_reason else \
            "no weights in this folder"
        return {"tier": "closed", "missing": ["weights"], "evidence": [why]}
    missing = []
    evidence, card_gaps = _dataset_lines(datasets)
    checkpoint = _matching_checkpoint(folder, store) if store else None
    if store is None:
        missing.append("a lineage store to look the weights up in (--store)")
    elif checkpoint is None:
        missing.append("a recorded checkpoint with these weights (lineage ingest checkpoint)")
    if checkpoint is None:
        return {"tier": "open weights", "missing": missing + _rest() + card_gaps,
                "evidence": evidence}
    run, step, corpus, manifest = checkpoint
    evidence = [f"weights match checkpoint {run}@{step}",
                f"run {run} read a stream over corpus {corpus} ({manifest})", *evidence]
    from lineage.runs.chain_verify import verify_chain

    report = verify_chain(store, run)  # type: ignore[arg-type]
    missing += _checkpoint_gaps(store, run, step) + card_gaps  # type: ignore[arg-type]
    if report["ok"] and not missing:
        evidence.append(f"chain of run {run} verifies ({report['steps_checked']} steps)")
        return {"tier": "fully auditable", "missing": [], "evidence": evidence}
    if not report["ok"]:
        where = f" at step {report['first_broken_step']}" \
            if report["first_broken_step"] is not None else ""
        missing.insert(0, f"a verifying step hash chain ({report['verdict']}{where}: "
                          f"{report['reason']})")
    return {"tier": "open source", "missing": missing, "evidence": evidence}


def declared_datasets(names: list[str], store: BaseStore | None) -> list[dict[str, Any]]:
    """Each declared dataset: recorded (True, with its corpus and manifest hash), only
    named (False), or not looked up (None: no store)."""
    corpora = _corpora(store) if store is not None else None
    out = []
    for name in names:
        entry: dict[str, Any] = {"name": name, "recorded": None, "corpus": None,
                                 "manifest_hash": None}
        if corpora is not None:
            corpus = next((c for c in _corpus_names(name) if c in corpora), None)
            entry.update(recorded=corpus is not None, corpus=corpus,
                         manifest_hash=corpora.get(corpus) if corpus else None)
        out.append(entry)
    return out


def _corpus_names(dataset: str) -> tuple[str, ...]:
    """The corpus names a dataset id is recorded under: itself, or `owner--name`."""
    return (dataset, dataset.replace("/", "--")) if "/" in dataset else (dataset,)


def _corpora(store: BaseStore) -> dict[str, str] | None:
    try:
        with store.reader(views=False) as con:
            rows = con.execute("SELECT name, manifest_hash FROM corpora").fetchall()
    except LineageError:
        return None
    return {name: manifest for name, manifest in rows}


def _dataset_lines(datasets: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Evidence (declared datasets the store records) and gaps (those only named)."""
    recorded = [f"{d['name']} = corpus {d['corpus']} ({d['manifest_hash']})"
                for d in datasets if d["recorded"]]
    named = [d["name"] for d in datasets if d["recorded"] is False]
    unchecked = [d["name"] for d in datasets if d["recorded"] is None]
    evidence = [f"README.md declares training datasets recorded in the store: "
                f"{', '.join(recorded)}"] if recorded else []
    if unchecked:
        evidence.append(f"README.md declares training datasets (not looked up, no store): "
                        f"{', '.join(unchecked)}")
    gaps = [f"a recorded corpus for each training dataset README.md only names: "
            f"{', '.join(named)}"] if named else []
    return evidence, gaps


def _rest() -> list[str]:
    return ["a registered corpus manifest and stream for the run", "a verifying step hash chain"]


def _matching_checkpoint(folder: Path, store: BaseStore) -> tuple[str, int, str, str] | None:
    from lineage.diligence.verify import safetensors_weights_digest

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
    return tuple(row) if row else None


def _checkpoint_gaps(store: BaseStore, run: str, step: int) -> list[str]:
    """What keeps checkpoint run@step from being evidence for the chain (empty: nothing)."""
    import json

    with store.reader(views=False) as con:
        row = con.execute("SELECT matches_chain, matches_state, risks FROM checkpoints "
                          "WHERE run = ? AND step = ?", [run, step]).fetchone()
    weights, state, risks = row if row else (None, None, None)
    gaps = []
    if not weights:
        gaps.append(f"checkpoint {run}@{step} matching the chain's weights digest")
    if state is False:
        gaps.append(f"checkpoint {run}@{step} whose optimizer state matches the chain")
    if risks and not json.loads(risks).get("ok"):
        gaps.append(f"checkpoint {run}@{step} passing its risk checks")
    return gaps
