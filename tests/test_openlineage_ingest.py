"""`lineage ingest openlineage`: the events `lineage export openlineage` wrote, read back
into the store that wrote them (every object matches), into a new store (every object
unknown), after an edit (the field that differs is named, exit 1), and broken (exit 2,
the line and the rule, nothing recorded). The checker used at ingest agrees with
jsonschema on the published facet schemas (a hypothesis test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.errors import InputError
from lineage.exports.openlineage_check import check_event
from lineage.exports.openlineage_facets import FACET_SCHEMAS

from .conftest import Cli
from .test_openlineage import read_lines, record_everything, validator


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Path]:
    root = tmp_path_factory.mktemp("olin")
    store = record_everything(root)
    Cli(store.root)("export", "openlineage", "-o", str(root / "events.jsonl"))
    return store, root / "events.jsonl"


def fresh_store(tmp_path: Path) -> Store:
    init_store(tmp_path / "store")
    return open_store(tmp_path / "store")


def recorded_events(store: Store) -> int:
    return int(store.sql("SELECT count(*) FROM openlineage_events").rows[0][0])


def write_lines(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_read_back_into_the_store_that_wrote_them(exported: tuple[Store, Path],
                                                  tmp_path: Path) -> None:
    store, events = exported
    copy = Cli(store.root)
    answer = copy.json("ingest", "openlineage", str(events))
    assert (answer["events"], answer["new"], answer["differs"], answer["unknown"]) == (
        12, 12, 0, 0)
    kinds = {(o["kind"], o["name"]) for o in answer["objects"]}
    assert {("corpus", "sonnets"), ("stream", "son"), ("run", "sonnets"), ("run", "open"),
            ("checkpoint", "sonnets@4")} <= kinds
    assert sum(kind == "experiment" for kind, _ in kinds) == 2
    assert all(o["status"] == "match" for o in answer["objects"])
    again = copy.json("ingest", "openlineage", str(events))
    assert again["new"] == 0 and again["matched"] == answer["matched"]
    assert recorded_events(store) == 12
    ids = store.sql("SELECT id, event FROM openlineage_events").rows
    from blake3 import blake3
    assert all(i == "blake3:" + blake3(text.encode()).hexdigest() for i, text in ids)


def test_into_a_new_store_every_object_is_unknown(exported: tuple[Store, Path],
                                                  tmp_path: Path) -> None:
    _, events = exported
    store = fresh_store(tmp_path)
    result = Cli(store.root)("ingest", "openlineage", str(events))
    assert result.stdout.splitlines()[0].endswith("0 objects match the store, 0 differ, "
                                                  "7 unknown")
    assert recorded_events(store) == 12


def test_an_edited_facet_is_named_and_answers_no(exported: tuple[Store, Path],
                                                 tmp_path: Path) -> None:
    store, events = exported
    edited = read_lines(events)
    for event in edited:
        for dataset in event["inputs"] + event["outputs"]:
            corpus = dataset["facets"].get("lineage_corpus")
            if corpus:
                corpus["manifestHash"] = "blake3:" + "0" * 64
    answer = Cli(store.root).json("ingest", "openlineage",
                                  str(write_lines(tmp_path / "e.jsonl", edited)), code=1)
    (corpus,) = [o for o in answer["objects"] if o["kind"] == "corpus"]
    assert corpus["status"] == "differs"
    assert corpus["differences"] == [{"field": "manifestHash",
                                      "event": "blake3:" + "0" * 64,
                                      "store": store.corpus("sonnets").manifest_hash}]
    assert answer["differs"] == 1 and answer["matched"] == 6


@pytest.mark.parametrize(("edit", "rule"), [
    (lambda e: e.update(eventType="DONE"), "eventType 'DONE' is not one of START"),
    (lambda e: e["run"].update(runId="run-1"), "run.runId must be a UUID"),
    (lambda e: e.update(eventTime="2026-12-01T18:00:00"), "is not a date and time with a zone"),
    (lambda e: e["job"].pop("name"), "job.namespace and job.name must be strings"),
    (lambda e: e["outputs"][0]["facets"]["lineage_corpus"].pop("manifestHash"),
     "outputs[0].facets.lineage_corpus: manifestHash is required"),
    (lambda e: e["outputs"][0]["facets"]["lineage_corpus"].update(documents="154"),
     "lineage_corpus: documents must be of type integer"),
    (lambda e: e["outputs"][0]["facets"]["lineage_corpus"].update(
        _schemaURL="https://example.org/Other.json"), "is not the LineageCorpusDatasetFacet"),
    (lambda e: e["outputs"][0]["facets"]["version"].pop("_producer"),
     "must be an object with _producer and _schemaURL"),
])
def test_a_broken_event_is_refused_with_its_line(exported: tuple[Store, Path], tmp_path: Path,
                                                  edit: Any, rule: str) -> None:
    _, events = exported
    lines = read_lines(events)
    place = next(i for i, e in enumerate(lines) if e["job"]["name"] == "ingest-corpus/sonnets"
                 and e["eventType"] == "COMPLETE")
    edit(lines[place])
    path = write_lines(tmp_path / "bad.jsonl", lines)
    store = fresh_store(tmp_path)
    result = Cli(store.root)("ingest", "openlineage", str(path), code=2)
    assert result.stderr.startswith(f"error: {path}:line {place + 1}: not an OpenLineage "
                                    "RunEvent: ")
    assert rule in result.stderr and len(result.stderr.splitlines()) == 1
    assert recorded_events(store) == 0


def test_not_json_and_a_json_array(exported: tuple[Store, Path], tmp_path: Path) -> None:
    _, events = exported
    store = fresh_store(tmp_path)
    cli = Cli(store.root)
    (tmp_path / "junk.jsonl").write_text(events.read_text() + "{not json\n")
    result = cli("ingest", "openlineage", str(tmp_path / "junk.jsonl"), code=2)
    assert "junk.jsonl:line 13: not JSON" in result.stderr
    (tmp_path / "array.json").write_text(json.dumps(read_lines(events), indent=1))
    assert cli.json("ingest", "openlineage", str(tmp_path / "array.json"))["new"] == 12


def test_events_of_other_producers_are_kept(tmp_path: Path) -> None:
    event = {"eventType": "COMPLETE", "eventTime": "2026-01-02T03:04:05.678Z",
             "producer": "https://github.com/OpenLineage/OpenLineage/tree/1.0.0/integration/spark",
             "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
             "run": {"runId": "0190e8a4-8f3c-7c2a-9b1e-3f4d5a6b7c8d"},
             "job": {"namespace": "spark", "name": "etl.daily"},
             "inputs": [{"namespace": "s3://bucket", "name": "raw/events"}]}
    validator(event["schemaURL"]).validate(event)
    store = fresh_store(tmp_path)
    answer = Cli(store.root).json("ingest", "openlineage",
                                  str(write_lines(tmp_path / "spark.jsonl", [event])))
    assert answer["objects"] == [] and answer["new"] == 1
    assert store.sql("SELECT job_name, event_type FROM openlineage_events").rows == [
        ("etl.daily", "COMPLETE")]


MUTATIONS = st.sampled_from(["drop", "string", "float", "null", "list", "negative", "extra"])


def _facet_places(event: dict[str, Any]) -> list[dict[str, Any]]:
    found = [f for k, f in (event["run"].get("facets") or {}).items() if k in FACET_SCHEMAS]
    for side in ("inputs", "outputs"):
        for dataset in event.get(side, []):
            found += [f for k, f in dataset["facets"].items() if k in FACET_SCHEMAS]
    return found


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), mutation=MUTATIONS)
def test_the_ingest_checker_agrees_with_jsonschema(exported: tuple[Store, Path],
                                                   data: st.DataObject, mutation: str) -> None:
    events = read_lines(exported[1])
    event = data.draw(st.sampled_from(events))
    facets = _facet_places(event)
    if not facets:
        return
    facet = data.draw(st.sampled_from(facets))
    field = data.draw(st.sampled_from(sorted(k for k in facet if not k.startswith("_"))))
    value = {"string": "x", "float": 1.5, "null": None, "list": [], "negative": -1,
             "extra": facet[field]}.get(mutation)
    if mutation == "drop":
        del facet[field]
    elif mutation == "extra":
        facet[field + "Extra"] = value
    else:
        facet[field] = value
    by_jsonschema = validator(facet["_schemaURL"]).is_valid(facet) and \
        validator(event["schemaURL"]).is_valid(event)
    try:
        check_event(event, "events.jsonl", "line 1")
        by_checker = True
    except InputError:
        by_checker = False
    assert by_checker == by_jsonschema, (mutation, field)
