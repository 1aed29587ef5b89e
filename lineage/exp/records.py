"""Experiment records in the store: save, list, show, diff.

A record's id is derived from its content ('exp-' + 12 hex of the BLAKE3 of its
canonical JSON), so the same record imported twice is one record.
"""

from __future__ import annotations

import json
from typing import Any

from lineage.chain import blake3_hex, canonical_json
from lineage.errors import UnknownObjectError
from lineage.store import Store


def record_digest(record: dict[str, Any]) -> str:
    return blake3_hex(canonical_json(record).encode("utf-8"))


def record_id(record: dict[str, Any]) -> str:
    return "exp-" + record_digest(record).split(":", 1)[1][:12]


def save_record(store: Store, record: dict[str, Any]) -> tuple[str, bool]:
    """Store a record; returns (id, added). Saving the same record again adds nothing."""
    text = canonical_json(record)
    exp_id, digest = record_id(record), record_digest(record)
    sums = (record.get("sums") or {}).get("text")
    with store.writer() as con:
        if con.execute("SELECT 1 FROM experiments WHERE id = ?", [exp_id]).fetchone():
            return exp_id, False
        con.execute("INSERT INTO experiments VALUES (?, ?, ?, ?, ?::TIMESTAMPTZ, ?, ?, ?)",
                    [exp_id, record.get("name"), record.get("outcome", "unknown"),
                     record.get("revision"), record.get("created_at"), text, digest, sums])
    return exp_id, True


def list_records(store: Store) -> list[dict[str, Any]]:
    with store.reader(views=False) as con:
        rows = con.execute("SELECT id, name, outcome, revision, created_at, record FROM "
                           "experiments ORDER BY created_at, id").fetchall()
    result = []
    for exp_id, name, outcome, revision, created, text in rows:
        record = json.loads(text)
        result.append({"id": exp_id, "name": name, "outcome": outcome, "revision": revision,
                       "created_at": str(created), "host_cpu": record["host"].get("cpu"),
                       "exit_code": (record.get("command") or {}).get("exit_code")})
    return result


def get_record(store: Store, exp_id: str) -> dict[str, Any]:
    """A record by id, by a unique id prefix, or by name (the latest with that name)."""
    with store.reader(views=False) as con:
        rows = con.execute(
            "SELECT id, name, record FROM experiments WHERE id = ? OR id LIKE ? OR name = ? "
            "ORDER BY created_at DESC, id", [exp_id, f"{exp_id}%", exp_id]).fetchall()
    exact = [r for r in rows if r[0] == exp_id]
    named = [r for r in rows if r[1] == exp_id]
    prefixed = {r[0] for r in rows if r[0].startswith(exp_id)}
    if exact or named:
        chosen = (exact or named)[0]
    elif len(prefixed) == 1:
        chosen = rows[0]
    elif prefixed:
        raise UnknownObjectError(f"{exp_id!r} is ambiguous: {', '.join(sorted(prefixed))}")
    else:
        raise UnknownObjectError(f"no experiment {exp_id!r} (`lineage exp list` shows them)")
    return {"id": chosen[0], **json.loads(chosen[2])}


# What changed between two records, most consequential first.
_ORDER = ("files", "revision", "quantization", "source", "checks", "failure", "packages",
          "python", "providers", "output_digest", "first_load", "exit_code", "host")


def diff_records(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    changes: list[dict[str, Any]] = []
    changes += _file_changes(a, b)
    for field in ("revision", "quantization", "source"):
        if a.get(field) != b.get(field):
            changes.append({"field": field, "a": a.get(field), "b": b.get(field)})
    checks = lambda r: {c["name"]: c["exit_code"] for c in r.get("checks", [])}  # noqa: E731
    if checks(a) != checks(b):
        changes.append({"field": "checks", "a": checks(a), "b": checks(b)})
    if (a.get("failure") or {}).get("type") != (b.get("failure") or {}).get("type"):
        changes.append({"field": "failure", "a": (a.get("failure") or {}).get("type"),
                        "b": (b.get("failure") or {}).get("type")})
    changes += _package_changes(a, b)
    if a["runtime"].get("python") != b["runtime"].get("python"):
        changes.append({"field": "python", "a": a["runtime"]["python"],
                        "b": b["runtime"]["python"]})
    for field in ("providers", "output_digest", "first_load"):
        va, vb = a.get("report", {}).get(field), b.get("report", {}).get(field)
        if field == "providers":
            va, vb = (va or {}).get("obtained"), (vb or {}).get("obtained")
        if va != vb:
            changes.append({"field": field, "a": va, "b": vb})
    code = lambda r: (r.get("command") or {}).get("exit_code")  # noqa: E731
    if code(a) != code(b):
        changes.append({"field": "exit_code", "a": code(a), "b": code(b)})
    for key in ("os", "release", "machine", "cpu", "cores", "memory_bytes", "accelerators"):
        if a["host"].get(key) != b["host"].get(key):
            changes.append({"field": "host", "key": key, "a": a["host"].get(key),
                            "b": b["host"].get(key)})
    changes.sort(key=lambda c: _ORDER.index(c["field"]))
    return {"a": a.get("id"), "b": b.get("id"), "same": not changes, "changes": changes}


def _file_changes(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    fa = {f["path"]: f["sha256"] for f in a["weights"]["files"]}
    fb = {f["path"]: f["sha256"] for f in b["weights"]["files"]}
    changes = []
    for path in sorted(set(fa) | set(fb)):
        if fa.get(path) != fb.get(path):
            changes.append({"field": "files", "key": path, "a": fa.get(path), "b": fb.get(path)})
    return changes


def _package_changes(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    pa, pb = a["runtime"]["packages"], b["runtime"]["packages"]
    return [{"field": "packages", "key": name, "a": pa.get(name), "b": pb.get(name)}
            for name in sorted(set(pa) | set(pb)) if pa.get(name) != pb.get(name)]
