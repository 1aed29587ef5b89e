"""`lineage ingest openlineage FILE`: read OpenLineage RunEvents back (docs/exports.md,
"Reading events back").

The file holds one JSON event per line (what `lineage export openlineage -o` and the
client's file transport write; blank lines are skipped) or one JSON array of events.
Every event is checked first (lineage.exports.openlineage_check): one that breaks a rule
stops the ingest with the file, the line and the rule, and nothing is recorded. Then
every lineage_ facet is compared with this store's records (match, differs, unknown),
and the events are recorded in `openlineage_events`, each once: reading the same file
again records nothing new.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from blake3 import blake3

from lineage.errors import InputError
from lineage.exports.openlineage_check import (
    check_event,
    compare_with_store,
    lineage_facets,
    object_of,
)
from lineage.runs.chain import canonical_json
from lineage.store.base import BaseStore
from lineage.store.durable import guarded_write

MAX_BYTES = 256 * 1024 * 1024  # a larger events file is refused, not read into memory


def read_events(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, event) for every event of the file, each checked; InputError names the
    first line that is not JSON or not a RunEvent."""
    from lineage.userfiles import read_regular

    data = read_regular(path, what="events file (split it)", max_bytes=MAX_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text (byte {exc.start})") from exc
    found = _parsed(path, text)
    for where, event in found:
        check_event(event, str(path), where)
    return found


def _parsed(path: Path, text: str) -> list[tuple[str, Any]]:
    if text.lstrip().startswith("["):
        try:
            events = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(path, f"not JSON: {exc.msg}", where=f"line {exc.lineno}") from exc
        return [(f"event {i}", event) for i, event in enumerate(events, start=1)]
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            found.append((f"line {number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InputError(path, f"not JSON: {exc.msg}", where=f"line {number}") from exc
    return found


@guarded_write
def ingest_openlineage(store: BaseStore, path: Path) -> dict[str, Any]:
    """Check, compare and record the events of `path`; the `OpenLineageIngest` answer's
    JSON object. The objects are listed by kind and name, each once."""
    events = [event for _, event in read_events(path)]
    objects = _compare(store, events)
    rows = [_row(event, str(path)) for event in events]
    with store.writer() as con:
        ids = [row[0] for row in rows]
        held = {r[0] for r in con.execute(
            "SELECT id FROM openlineage_events WHERE id IN (SELECT unnest(?))",
            [ids]).fetchall()} if ids else set()
        fresh = {row[0]: row for row in rows if row[0] not in held}
        for row in fresh.values():
            con.execute("INSERT INTO openlineage_events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, "
                        "now()::TIMESTAMP)", list(row))
    counts = {status: sum(o["status"] == status for o in objects)
              for status in ("match", "differs", "unknown")}
    return {"file": str(path), "events": len(events), "new": len(fresh),
            "matched": counts["match"], "differs": counts["differs"],
            "unknown": counts["unknown"], "objects": objects}


def _compare(store: BaseStore, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each object the events' lineage facets name, checked once per distinct facet; an
    object described two ways differs if either way differs."""
    results: dict[tuple[str, str], dict[str, Any]] = {}
    seen: set[str] = set()
    for event in events:
        for key, facet in lineage_facets(event):
            text = canonical_json(facet)
            if text in seen:
                continue
            seen.add(text)
            kind, name = object_of(key, facet)
            status, differences = compare_with_store(store, key, facet)
            found = results.setdefault((kind, name), {"kind": kind, "name": name,
                                                      "status": status, "differences": []})
            if status == "differs" or found["status"] == "differs":
                found["status"] = "differs"
            found["differences"] += [d for d in differences if d not in found["differences"]]
    return [results[k] for k in sorted(results)]


def _row(event: dict[str, Any], source: str) -> tuple[Any, ...]:
    text = canonical_json(event)
    return ("blake3:" + blake3(text.encode()).hexdigest(), event.get("eventType"),
            event["eventTime"], event["run"]["runId"], event["job"]["namespace"],
            event["job"]["name"], event["producer"], source, text)
