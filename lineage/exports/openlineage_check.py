"""Reading OpenLineage events back (docs/exports.md, "Reading events back").

`check_event` holds an event to the rules of the OpenLineage core spec 2-0-2 for a
RunEvent (the required fields, their types, the event types, UUID run ids, times with a
zone, facets with `_producer` and `_schemaURL`) and every `lineage_` facet to the schema
lineage publishes for it (schemas/openlineage/facets/), read by a small interpreter of
the part of JSON Schema those files use (type, properties, required, items, pattern,
additionalProperties: false). The tests hold the same events to the full schemas with
`jsonschema`.

`compare_with_store` rebuilds each facet from this store's records, exactly as
`lineage export openlineage` makes it, and names the fields that differ.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

from lineage.errors import InputError, UnknownObjectError
from lineage.exports.openlineage_facets import FACET_SCHEMAS, schema_url
from lineage.store.base import BaseStore

EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER")
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,)}


def check_event(event: Any, path: str, where: str) -> None:
    """Raise InputError naming `path`, `where` (the line) and the first rule `event`
    breaks; return quietly for a valid RunEvent."""
    def fail(rule: str) -> None:
        raise InputError(path, f"not an OpenLineage RunEvent: {rule}", where=where)

    if not isinstance(event, dict):
        fail("the event is not a JSON object")
    for key in ("eventTime", "producer", "schemaURL"):
        if not isinstance(event.get(key), str):
            fail(f"{key} must be a string")
    if not _is_time(event["eventTime"]):
        fail(f"eventTime {event['eventTime']!r} is not a date and time with a zone")
    if not _is_uri(event["producer"]):
        fail(f"producer {event['producer']!r} is not a URI")
    if "eventType" in event and event["eventType"] not in EVENT_TYPES:
        fail(f"eventType {event['eventType']!r} is not one of {', '.join(EVENT_TYPES)}")
    run, job = event.get("run"), event.get("job")
    if not isinstance(run, dict) or not _is_uuid(run.get("runId")):
        fail("run.runId must be a UUID")
    if not isinstance(job, dict) or not all(isinstance(job.get(k), str)
                                            for k in ("namespace", "name")):
        fail("job.namespace and job.name must be strings")
    problem = _facets_problem(event)
    if problem:
        fail(problem)


def _facets_problem(event: dict[str, Any]) -> str | None:
    bags: list[tuple[str, Any]] = [("run.facets", event["run"].get("facets")),
                                   ("job.facets", event["job"].get("facets"))]
    for side in ("inputs", "outputs"):
        datasets = event.get(side, [])
        if not isinstance(datasets, list):
            return f"{side} must be an array"
        for i, dataset in enumerate(datasets):
            if not isinstance(dataset, dict) or not all(
                    isinstance(dataset.get(k), str) for k in ("namespace", "name")):
                return f"{side}[{i}] must have a string namespace and name"
            bags.append((f"{side}[{i}].facets", dataset.get("facets")))
            extra = "inputFacets" if side == "inputs" else "outputFacets"
            bags.append((f"{side}[{i}].{extra}", dataset.get(extra)))
    for where, bag in bags:
        problem = _bag_problem(where, bag)
        if problem:
            return problem
    return None


def _bag_problem(where: str, bag: Any) -> str | None:
    if bag is None:
        return None
    if not isinstance(bag, dict):
        return f"{where} must be an object"
    for key, facet in bag.items():
        if not isinstance(facet, dict) or not all(
                isinstance(facet.get(k), str) for k in ("_producer", "_schemaURL")):
            return f"{where}.{key} must be an object with _producer and _schemaURL"
        if key in FACET_SCHEMAS:
            problem = _lineage_facet_problem(key, facet)
            if problem:
                return f"{where}.{key}: {problem}"
    return None


def _lineage_facet_problem(key: str, facet: dict[str, Any]) -> str | None:
    name = FACET_SCHEMAS[key]
    if facet["_schemaURL"] != schema_url(name):
        return (f"_schemaURL {facet['_schemaURL']!r} is not the {name} schema this lineage "
                f"reads ({schema_url(name)})")
    return schema_problem(facet_schema(name), facet, "")


@cache
def facet_schema(name: str) -> dict[str, Any]:
    """The facet's own part of its published schema (the second half of its allOf)."""
    text = resources.files("lineage.schemas").joinpath(
        "openlineage", "facets", "1-0-0", f"{name}.json").read_text(encoding="utf-8")
    part: dict[str, Any] = json.loads(text)["$defs"][name]["allOf"][1]
    return part


def schema_problem(schema: dict[str, Any], value: Any, at: str) -> str | None:
    """The first way `value` breaks `schema` (the subset of JSON Schema the facet files
    use), named by its place; None when it keeps to it."""
    kind = schema.get("type")
    if kind is not None and (not isinstance(value, _TYPES[kind]) or
                             (kind in ("integer", "number") and isinstance(value, bool))):
        return f"{at or 'the facet'} must be of type {kind}"
    if "pattern" in schema and not re.search(schema["pattern"], value):
        return f"{at} {value!r} does not match {schema['pattern']}"
    if kind == "array":
        for i, item in enumerate(value):
            problem = schema_problem(schema.get("items", {}), item, f"{at}[{i}]")
            if problem:
                return problem
    if kind == "object":
        return _object_problem(schema, value, at)
    return None


def _object_problem(schema: dict[str, Any], value: dict[str, Any], at: str) -> str | None:
    properties = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in value:
            return f"{at + '.' if at else ''}{key} is required"
    for key, item in value.items():
        if key in properties:
            problem = schema_problem(properties[key], item, f"{at + '.' if at else ''}{key}")
            if problem:
                return problem
        elif schema.get("additionalProperties") is False:
            return f"{at} has a field {key!r} the schema does not allow"
    return None


def _is_time(value: str) -> bool:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return "t" in value.lower() and parsed.tzinfo is not None


def _is_uri(value: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$", value) is not None


def _is_uuid(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


# -- comparing with the store ---------------------------------------------------------------

def lineage_facets(event: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every lineage_ facet of the event: (key, facet), run facets first."""
    found = [(k, f) for k, f in (event["run"].get("facets") or {}).items()
             if k in FACET_SCHEMAS]
    for side in ("inputs", "outputs"):
        for dataset in event.get(side, []):
            found += [(k, f) for k, f in (dataset.get("facets") or {}).items()
                      if k in FACET_SCHEMAS]
    return found


def object_of(key: str, facet: dict[str, Any]) -> tuple[str, str]:
    """The (kind, name) of the object a lineage facet describes."""
    if key == "lineage_checkpoint":
        return "checkpoint", f"{facet['run']}@{facet['step']}"
    if key == "lineage_experiment":
        return "experiment", facet["id"]
    return key.removeprefix("lineage_").replace("training", "run"), facet.get(
        "run" if key == "lineage_training" else "name", "")


def compare_with_store(store: BaseStore, key: str, facet: dict[str, Any]
                       ) -> tuple[str, list[dict[str, Any]]]:
    """("match" | "differs" | "unknown", the differing fields) for one facet."""
    try:
        ours = store_facet(store, key, facet)
    except UnknownObjectError:
        return "unknown", []
    if ours is None:
        return "unknown", []
    fields = sorted((set(ours) | set(facet)) - {"_producer", "_schemaURL"})
    differences = [{"field": name, "event": facet.get(name), "store": ours.get(name)}
                   for name in fields if facet.get(name) != ours.get(name)]
    return ("differs" if differences else "match"), differences


def store_facet(store: BaseStore, key: str, facet: dict[str, Any]) -> dict[str, Any] | None:
    """The facet `lineage export openlineage` makes for the same object from this store;
    None (or UnknownObjectError) when the store does not hold it."""
    from openlineage.client.serde import Serde

    from lineage.exports import openlineage as export
    from lineage.exports import openlineage_events as events

    if key == "lineage_corpus":
        made = events.corpus_dataset("", export.corpus_facts(store, facet["name"]))
    elif key == "lineage_stream":
        made = events.stream_dataset("", export.stream_facts(store, facet["name"]))
    elif key == "lineage_checkpoint":
        held = [c for c in export.training_facts(store, facet["run"])["checkpoints"]
                if c["step"] == facet.get("step")]
        if not held:
            return None
        made = events.checkpoint_dataset("", held[0])
    elif key == "lineage_training":
        made = {"facets": export.training_run_facets(store, facet["run"])}
    else:
        records = export.experiment_facts(store, facet["id"])
        made = {"facets": events.experiment_run_facets(records[0])}
    result: dict[str, Any] = Serde.to_dict(made["facets"][key])
    return result
