"""in-toto Statements (v1) of what the store records (docs/attestations.md).

Each kind names its subjects by digest and says the rest in its predicate:

- `corpus`: the manifest's Parquet parts (sha256) and the manifest hash (blake3);
  predicate: the manifest's spec and hash, its counts, tokenizer and sources;
- `stream`: the occurrence parts (sha256); predicate: spec, spec hash, parameters, the
  corpus and its manifest hash, the occurrences digest;
- `run`: each checkpoint's files (sha256, blake3); predicate: the chain's spec, genesis,
  head, skip rule and interval, its stream, and each checkpoint's verdict;
- `audit`: the state a step started from and the state it ended in (blake3); predicate:
  the lineage-audit/1 record and its leaf in the store's signed log;
- `exp`: the experiment's weights files (sha256), or the record's digest when it names
  none; predicate: the lineage-experiment record and its digest;
- `checkpoint` (`RUN@STEP`): the checkpoint as OpenSSF model signing names it (the
  folder, by the SHA-256 of its files' SHA-256 digests in path order) and each file
  (sha256); predicate: the chain's state at that step and the checkpoint's verdicts, which
  bind the model signature of the same files to the run.

A Statement is built from the catalog alone, so the same store gives the same bytes, and
`attest verify` rebuilds it to compare.
"""

from __future__ import annotations

import json
from typing import Any

from lineage.errors import UnknownObjectError, UsageError
from lineage.store.base import BaseStore
from lineage.version import __version__

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATE_BASE = "https://github.com/lineage-dev/lineage/attestation/"
KINDS = ("corpus", "stream", "run", "audit", "exp", "checkpoint")
MODEL_SIGNING_TYPE = "https://model_signing/signature/v1.0"


def predicate_type(kind: str) -> str:
    return f"{PREDICATE_BASE}{kind}/v1"


def kind_of(predicate_type_: str) -> str | None:
    """The kind whose predicate type this is; None for any other."""
    for kind in KINDS:
        if predicate_type_ == predicate_type(kind):
            return kind
    return None


def statement(store: BaseStore, kind: str, name: str) -> dict[str, Any]:
    """The Statement of `kind` about `name` (a corpus, stream or run name, a ledger record
    id, an experiment id), as a JSON object."""
    builders = {"corpus": _corpus, "stream": _stream, "run": _run, "audit": _audit,
                "exp": _exp, "checkpoint": _checkpoint}
    if kind not in builders:
        raise UsageError(f"no attestation of kind {kind!r} (kinds: {', '.join(KINDS)})")
    if kind == "exp":  # an id, a unique prefix, a name or NAME#N, as `exp show` takes it
        from lineage.exp.records import stored_record

        name = stored_record(store, name)["id"]
    with store.reader(views=False) as con:
        subjects, predicate = builders[kind](con, name)
    return {"_type": STATEMENT_TYPE, "subject": subjects,
            "predicateType": predicate_type(kind), "predicate": predicate}


def _parts(con: Any, table: str, owner: str) -> list[dict[str, Any]]:
    return [{"name": path, "digest": {"sha256": sha256}} for path, sha256 in con.execute(
        "SELECT path, sha256 FROM parquet_files WHERE table_name = ? AND owner = ? "
        "ORDER BY path", [table, owner]).fetchall()]


def _blake3(value: str) -> dict[str, str]:
    """A 'blake3:<hex>' digest as an in-toto DigestSet."""
    algorithm, _, hex_ = value.partition(":")
    return {algorithm: hex_}


def _one(con: Any, sql: str, params: list[Any], what: str, table: str,
         column: str = "name") -> tuple[Any, ...]:
    row = con.execute(sql, params).fetchone()
    if row is None:
        known = [r[0] for r in con.execute(
            f"SELECT {column} FROM {table} ORDER BY {column} LIMIT 20").fetchall()]
        raise UnknownObjectError(f"no {what} {params[0]!r} (known: {', '.join(known) or 'none'})")
    return tuple(row)


def _corpus(con: Any, name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    row = _one(con, "SELECT name, manifest_hash, manifest_spec, documents, tokens, bytes, "
               "tokenizer FROM corpora WHERE name = ?", [name], "corpus", "corpora")
    sources = [{"source": s, "documents": d, "tokens": t, "bytes": b, "licenses": list(lic)}
               for s, d, t, b, lic in con.execute(
                   "SELECT source, documents, tokens, bytes, licenses FROM corpus_sources "
                   "WHERE corpus = ? ORDER BY source", [name]).fetchall()]
    subjects = [{"name": f"manifest:{name}", "digest": _blake3(row[1])},
                *_parts(con, "documents", name)]
    return subjects, {"corpus": name, "manifest": {"spec": row[2], "hash": row[1]},
                      "documents": row[3], "tokens": row[4], "bytes": row[5],
                      "tokenizer": row[6], "sources": sources, "lineage": __version__}


def _stream(con: Any, name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    row = _one(con, "SELECT name, spec, spec_hash, parameters, corpus, manifest_hash, "
               "occurrences, occurrences_digest, steps, tokens FROM streams WHERE name = ?",
               [name], "stream", "streams")
    return _parts(con, "occurrences", name), {
        "stream": name, "spec": row[1], "spec_hash": row[2],
        "parameters": json.loads(row[3]), "corpus": row[4], "manifest_hash": row[5],
        "occurrences": row[6], "occurrences_digest": row[7], "steps": row[8],
        "tokens": row[9], "lineage": __version__}


def _run(con: Any, name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    row = _one(con, "SELECT name, stream, chain, algorithm, genesis, skip_rule, "
               "checkpoint_every, end_record IS NOT NULL FROM runs WHERE name = ?", [name],
               "run", "runs")
    head = con.execute("SELECT step, state_hash FROM steps WHERE run = ? ORDER BY step DESC "
                       "LIMIT 1", [name]).fetchone()
    stream = con.execute("SELECT spec_hash, occurrences_digest FROM streams WHERE name = ?",
                         [row[1]]).fetchone() if row[1] else None
    subjects, checkpoints = [], []
    for step, files, weights, matches in con.execute(
            "SELECT step, files, weights_digest, matches_chain FROM checkpoints WHERE run = ? "
            "ORDER BY step", [name]).fetchall():
        for file in sorted(json.loads(files), key=lambda f: f["path"]):
            digest = {"sha256": file["sha256"]}
            if file.get("blake3"):
                digest["blake3"] = file["blake3"]
            subjects.append({"name": f"step-{step}/{file['path']}", "digest": digest})
        checkpoints.append({"step": step, "weights_digest": weights, "matches_chain": matches})
    return subjects, {
        "run": name, "chain": row[2], "algorithm": row[3], "genesis": row[4],
        "head": {"step": head[0], "state_hash": head[1]} if head else None,
        "closed": row[7], "skip_rule": json.loads(row[5]) if row[5] else None,
        "checkpoint_every": row[6],
        "stream": {"name": row[1], "spec_hash": stream[0], "occurrences_digest": stream[1]}
        if stream else None,
        "checkpoints": checkpoints, "lineage": __version__}


def _audit(con: Any, record_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from lineage.audit.log import inclusion_proofs

    row = _one(con, "SELECT id, record FROM audit_records WHERE id = ?", [record_id],
               "ledger record", "audit_records", "id")
    record = json.loads(row[1])
    subjects = []
    start = record.get("start") or {}
    for key in ("weights_digest", "state_digest"):
        if isinstance(start.get(key), str) and ":" in start[key]:
            subjects.append({"name": f"start:step-{start.get('step')}:{key}",
                             "digest": _blake3(start[key])})
    if isinstance(record.get("state_hash"), str):
        subjects.append({"name": f"state:step-{record.get('step')}",
                         "digest": _blake3(record["state_hash"])})
    if not subjects:  # a claim: no state; the record itself is the subject
        subjects.append({"name": f"record:{record_id}", "digest": _blake3(record_id)})
    proof = inclusion_proofs(con, [record_id]).get(record_id)
    log = None if proof is None else {
        "origin": proof.origin, "index": proof.index, "size": proof.size,
        "checkpoint": proof.checkpoint, "verifier_key": proof.verifier_key}
    return subjects, {"record_id": record_id, "record": record, "log": log,
                      "lineage": __version__}


def _exp(con: Any, exp_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    row = _one(con, "SELECT id, record, record_digest FROM experiments WHERE id = ?",
               [exp_id], "experiment", "experiments", "id")
    record = json.loads(row[1])
    files = (record.get("weights") or {}).get("files") or []
    subjects = [{"name": f["path"], "digest": {"sha256": f["sha256"]}}
                for f in sorted(files, key=lambda f: f.get("path", ""))
                if isinstance(f, dict) and f.get("sha256")]
    if not subjects:
        subjects = [{"name": f"experiment:{row[0]}", "digest": _blake3(row[2])}]
    return subjects, {"experiment": row[0], "record_digest": row[2], "record": record,
                      "lineage": __version__}


def model_signing_digest(files: list[tuple[str, str]]) -> str:
    """The subject digest OpenSSF model signing (v1.0, file serialization) gives a folder:
    SHA-256 over its files' SHA-256 digests, as bytes, in path order."""
    import hashlib

    return hashlib.sha256(b"".join(bytes.fromhex(sha) for _, sha in sorted(files))).hexdigest()


def _checkpoint(con: Any, name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    run, at, step_text = name.rpartition("@")
    if not at or not step_text.isdigit():
        raise UsageError(f"a checkpoint is named RUN@STEP, not {name!r}")
    step = int(step_text)
    row = con.execute("SELECT path, files, weights_digest, chain_weights_digest, "
                      "matches_chain, state_digest, matches_state FROM checkpoints "
                      "WHERE run = ? AND step = ?", [run, step]).fetchone()
    if row is None:
        held = [r[0] for r in con.execute("SELECT step FROM checkpoints WHERE run = ? "
                                          "ORDER BY step", [run]).fetchall()]
        raise UnknownObjectError(f"run {run!r} has no checkpoint at step {step} (checkpoints: "
                                 f"{', '.join(map(str, held)) or 'none'})")
    files = sorted((f["path"], f["sha256"]) for f in json.loads(row[1]))
    state = con.execute("SELECT state_hash FROM steps WHERE run = ? AND step = ?",
                        [run, step]).fetchone()
    genesis = con.execute("SELECT genesis, chain FROM runs WHERE name = ?", [run]).fetchone()
    folder = row[0].rstrip("/").rpartition("/")[2]
    subjects = [{"name": folder, "digest": {"sha256": model_signing_digest(files)}},
                *({"name": path, "digest": {"sha256": sha}} for path, sha in files)]
    return subjects, {
        "checkpoint": name, "run": run, "step": step, "chain": genesis[1],
        "genesis": genesis[0], "state_hash": state[0] if state else None,
        "weights_digest": row[2], "chain_weights_digest": row[3], "matches_chain": row[4],
        "state_digest": row[5], "matches_state": row[6],
        "model_signing": {"predicate_type": MODEL_SIGNING_TYPE, "serialization": "files",
                          "hash_type": "sha256"},
        "lineage": __version__}
