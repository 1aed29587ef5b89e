"""`lineage export openlineage` on real records: a corpus ingest (the sonnets shards), a
stream build, a closed 10-step run of examples/tiny_run.py with an ingested checkpoint,
the same run's log without its end record (an open run), and two experiments (one
passed, one whose command failed). Every event is validated with jsonschema against the
OpenLineage core spec 2-0-2 (vendored in tests/fixtures/openlineage/), the vendored
standard facet schemas, and lineage's own published facet schemas; the events are sent
through the client's file, console and HTTP transports (to a local http.server)."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest
from blake3 import blake3
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource
from safetensors.numpy import save_file

import lineage.exp
from lineage.api import Store, init_store, open_store
from lineage.exports.openlineage import openlineage_events
from lineage.exports.openlineage_facets import FACET_SCHEMAS, PRODUCER, schema_url
from lineage.ingest import ingest_corpus
from lineage.stream.build import build_stream

from .conftest import EXAMPLES, REPO, Cli, load_tiny_run

FIXTURES = REPO / "tests" / "fixtures" / "openlineage"
FACETS = REPO / "schemas" / "openlineage" / "facets" / "1-0-0"
CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return record_everything(tmp_path_factory.mktemp("ol"))


def record_everything(root: Path) -> Store:
    """The records this module exports (its docstring lists them), in a new store."""
    from lineage.ingest.checkpoint import ingest_checkpoint
    from lineage.ingest.steps import ingest_steps

    init_store(root / "store")
    store = open_store(root / "store")
    ingest_corpus(store, [EXAMPLES / "shards" / "sonnets.jsonl.gz"], corpus="sonnets",
                  license="CC0-1.0", fingerprints=False)
    build_stream(store, corpus="sonnets", name="son", seed=7, seq_len=256, batch=2)
    load_tiny_run().train(store, "son", steps=10, out=root / "son", checkpoint_every=5)
    ingest_steps(store, root / "son" / "steps.jsonl", run="sonnets", stream="son",
                 world_size=2)
    ingest_checkpoint(store, root / "son" / "checkpoint-4", run="sonnets", step=4)
    lines = (root / "son" / "steps.jsonl").read_text().splitlines(keepends=True)
    assert json.loads(lines[-1]).get("end") is True
    (root / "open.jsonl").write_text("".join(lines[:-1]))  # no end record: an open chain
    ingest_steps(store, root / "open.jsonl", run="open", stream="son", world_size=2)
    weights = root / "weights"
    weights.mkdir()
    save_file({"w": np.arange(8, dtype=np.float32)}, str(weights / "model.safetensors"))
    (weights / "config.json").write_text('{"model_type": "tiny"}')
    lineage.exp.run(store, ["true"], weights=weights, revision="r1", name="good")
    lineage.exp.run(store, ["false"], weights=weights, revision="r1", name="bad")
    return store


def _registry() -> Registry:  # type: ignore[type-arg]
    resources = [Resource.from_contents(json.loads(p.read_text()))
                 for p in [*FIXTURES.glob("*.json"), *FACETS.glob("*.json")]]
    return Registry().with_resources((r.contents["$id"], r) for r in resources)


REGISTRY = _registry()


def _formats() -> FormatChecker:
    """jsonschema's checker, plus date-time and uri, whose checkers need packages that are
    not installed (rfc3339-validator, rfc3987): RFC 3339 times and absolute URIs."""
    checker = FormatChecker()

    @checker.checks("date-time", raises=ValueError)
    def _date_time(value: object) -> bool:
        if not isinstance(value, str):
            return True
        parsed = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
        return "T" in value.upper() and parsed.tzinfo is not None

    @checker.checks("uri")
    def _uri(value: object) -> bool:
        if not isinstance(value, str):
            return True
        parts = urlsplit(value)
        return bool(parts.scheme) and bool(parts.netloc or parts.path) and " " not in value

    return checker


FORMATS = _formats()


def validator(url: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": url}, registry=REGISTRY, format_checker=FORMATS)


def facets_of(event: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    yield from (event["run"].get("facets") or {}).items()
    yield from (event["job"].get("facets") or {}).items()
    for side in ("inputs", "outputs"):
        for dataset in event.get(side, []):
            yield from (dataset.get("facets") or {}).items()


def assert_valid(event: dict[str, Any]) -> list[str]:
    """The event against the core spec, and each facet whose schema is vendored or ours
    against that schema; the facet keys checked that way."""
    assert event["schemaURL"] == f"{CORE}#/$defs/RunEvent"
    validator(event["schemaURL"]).validate(event)
    checked = []
    for key, facet in facets_of(event):
        base = facet["_schemaURL"].split("#")[0]
        if base in REGISTRY:
            validator(facet["_schemaURL"]).validate(facet)
            checked.append(key)
    return checked


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_event_is_valid_under_the_spec_and_the_facet_schemas(
        recorded: Store, tmp_path: Path) -> None:
    Cli(recorded.root)("export", "openlineage", "-o", str(tmp_path / "ev.jsonl"))
    events = read_lines(tmp_path / "ev.jsonl")
    checked = [key for event in events for key in assert_valid(event)]
    assert set(checked) >= {"jobType", *FACET_SCHEMAS}  # every lineage_ facet was checked
    assert all(e["producer"] == PRODUCER for e in events)


def test_a_broken_event_fails_the_spec_validation(recorded: Store) -> None:
    """The validation above can fail: the vendored schemas reject what they should."""
    from openlineage.client.serde import Serde

    event = Serde.to_dict(openlineage_events(recorded, run="sonnets")[-1])
    for breaking in ({"eventType": "DONE"}, {"run": {"runId": "not-a-uuid"}},
                     {"eventTime": "yesterday"}, {"eventTime": "2026-12-01T18:00:00"},
                     {"producer": "not a uri"}):
        with pytest.raises(Exception, match="is not"):
            validator(f"{CORE}#/$defs/RunEvent").validate({**event, **breaking})
    facet = event["run"]["facets"]["lineage_training"]
    with pytest.raises(Exception, match="required"):
        validator(facet["_schemaURL"]).validate(
            {k: v for k, v in facet.items() if k != "chainHead" and k != "genesis"})


def test_events_per_record_and_their_states(recorded: Store) -> None:
    from openlineage.client.serde import Serde

    events = [Serde.to_dict(e) for e in openlineage_events(recorded)]
    by_job: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_job.setdefault(event["job"]["name"], []).append(event)
    states = {job: [e["eventType"] for e in found] for job, found in by_job.items()}
    assert states == {"ingest-corpus/sonnets": ["START", "COMPLETE"],
                      "build-stream/son": ["START", "COMPLETE"],
                      "train/sonnets": ["START", "COMPLETE"], "train/open": ["START", "RUNNING"],
                      "experiment/good": ["START", "COMPLETE"],
                      "experiment/bad": ["START", "FAIL"]}
    assert [e["eventTime"] for e in events] == sorted(e["eventTime"] for e in events)
    for found in by_job.values():  # one run id per job's run, a UUID of the records
        assert len({e["run"]["runId"] for e in found}) == 1
    bad = by_job["experiment/bad"][1]["run"]["facets"]
    assert bad["errorMessage"]["message"].startswith("command-failed")
    assert bad["lineage_experiment"]["exitCode"] == 1


def test_the_facets_carry_the_store_evidence(recorded: Store) -> None:
    from openlineage.client.serde import Serde

    done = Serde.to_dict(openlineage_events(recorded, run="sonnets")[-1])
    corpus, stream = (d["facets"] for d in done["inputs"])
    shown = recorded.corpus("sonnets")
    assert corpus["lineage_corpus"]["manifestHash"] == shown.manifest_hash
    assert corpus["version"]["datasetVersion"] == shown.manifest_hash
    assert corpus["lineage_corpus"]["licenses"] == ["CC0-1.0"]
    assert corpus["lineage_corpus"]["tokens"] == shown.tokens
    facet = stream["lineage_stream"]
    assert facet["specHash"] == "blake3:" + blake3(facet["parameters"].encode()).hexdigest()
    training = done["run"]["facets"]["lineage_training"]
    head = recorded.sql("SELECT state_hash FROM steps WHERE run = 'sonnets' "
                        "ORDER BY step DESC LIMIT 1").rows[0][0]
    assert training["chainHead"] == head and training["closed"] is True
    assert training["specHash"] == facet["specHash"]
    (checkpoint,) = done["outputs"]
    assert checkpoint["name"] == "run/sonnets/checkpoint/4"
    digest = recorded.sql("SELECT weights_digest FROM checkpoints WHERE step = 4").rows[0][0]
    assert checkpoint["facets"]["lineage_checkpoint"]["weightsDigest"] == digest
    assert checkpoint["facets"]["lineage_checkpoint"]["matchesChain"] is True


def test_the_same_store_gives_the_same_bytes(recorded: Store, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(recorded.root, copy)
    Cli(recorded.root)("export", "openlineage", "-o", str(tmp_path / "a.jsonl"))
    Cli(copy)("export", "openlineage", "-o", str(tmp_path / "b.jsonl"))
    Cli(recorded.root)("export", "openlineage", "-o", str(tmp_path / "a.jsonl"))  # replaced
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert len(read_lines(tmp_path / "a.jsonl")) == 12


def test_the_console_transport_prints_what_the_file_holds(recorded: Store,
                                                          tmp_path: Path) -> None:
    cli = Cli(recorded.root)
    cli("export", "openlineage", "--run", "sonnets", "-o", str(tmp_path / "ev.jsonl"))
    printed = cli("export", "openlineage", "--run", "sonnets", "--console").stdout
    assert printed == (tmp_path / "ev.jsonl").read_text()
    assert [e["job"]["name"] for e in map(json.loads, printed.splitlines())] == [
        "ingest-corpus/sonnets", "ingest-corpus/sonnets", "build-stream/son",
        "build-stream/son", "train/sonnets", "train/sonnets"]


def test_selections(recorded: Store) -> None:
    cli = Cli(recorded.root)
    jobs = {r["job"] for r in cli.json("export", "openlineage", "--corpus", "sonnets", "-o",
                                       str(recorded.root.parent / "c.jsonl"))["runs"]}
    assert jobs == {"ingest-corpus/sonnets", "build-stream/son", "train/open",
                    "train/sonnets"}
    answer = cli.json("export", "openlineage", "--exp", "bad", "-o",
                      str(recorded.root.parent / "x.jsonl"))
    assert [(r["job"], r["states"]) for r in answer["runs"]] == [
        ("experiment/bad", ["START", "FAIL"])]
    result = cli("export", "openlineage", "--run", "nope", code=2)
    assert "no run named 'nope'" in result.stderr and "Traceback" not in result.stderr
    result = cli("export", "openlineage", "--run", "sonnets", "--exp", "bad", code=2)
    assert "at most one" in result.stderr


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, str, bytes]] = []
    authorization: list[str | None] = []
    status = 200

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, self.headers["Content-Type"], body))
        type(self).authorization.append(self.headers.get("Authorization"))
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Collector]]]:
    handler = type("Handler", (_Collector,), {"received": [], "authorization": [],
                                              "status": 200})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_events_posted_through_the_http_transport(recorded: Store, tmp_path: Path,
                                                  server: tuple[str, Any]) -> None:
    url, handler = server
    cli = Cli(recorded.root)
    answer = cli.json("export", "openlineage", "--url", url)
    assert answer["transport"] == "http" and answer["events"] == 12
    assert answer["destination"] == f"{url}/api/v1/lineage"
    assert {path for path, _, _ in handler.received} == {"/api/v1/lineage"}
    assert {kind for _, kind, _ in handler.received} == {"application/json"}
    posted = [json.loads(body) for _, _, body in handler.received]
    cli("export", "openlineage", "-o", str(tmp_path / "ev.jsonl"))
    assert posted == read_lines(tmp_path / "ev.jsonl")
    for event in posted:
        assert_valid(event)


def test_an_endpoint_that_refuses_is_an_error_naming_the_event(
        recorded: Store, server: tuple[str, Any]) -> None:
    url, handler = server
    handler.status = 400
    result = Cli(recorded.root)("export", "openlineage", "--url", url, code=2)
    assert result.stderr.startswith(f"error: --url {url}: event 1 of 12 (START ")
    assert "400" in result.stderr and len(result.stderr.splitlines()) == 1
    assert len(handler.received) == 1  # stopped at the first refusal, no retry of a 4xx


def test_a_server_error_is_retried_twice_then_named(
        recorded: Store, server: tuple[str, Any]) -> None:
    url, handler = server
    handler.status = 503
    result = Cli(recorded.root)("export", "openlineage", "--exp", "good", "--url", url,
                                "--endpoint", "lineage/events", code=2)
    assert "event 1 of 2 (START experiment/good)" in result.stderr
    assert [path for path, _, _ in handler.received] == ["/lineage/events"] * 3


def test_the_api_key_is_sent_as_a_bearer_token(recorded: Store, tmp_path: Path,
                                               server: tuple[str, Any]) -> None:
    url, handler = server
    (tmp_path / "key").write_text("s3cret-token\n")
    Cli(recorded.root)("export", "openlineage", "--exp", "good", "--url", url,
                       "--api-key-file", str(tmp_path / "key"))
    assert handler.authorization == ["Bearer s3cret-token"] * 2
    (tmp_path / "key").write_text("")
    result = Cli(recorded.root)("export", "openlineage", "--url", url, "--api-key-file",
                                str(tmp_path / "key"), code=2)
    assert "the API key file must hold one non-empty line" in result.stderr


def test_the_python_api_answer(recorded: Store, tmp_path: Path) -> None:
    answer = recorded.export_openlineage(run="sonnets", output=tmp_path / "ev.jsonl")
    assert answer.events == 6 and answer.transport == "file"
    assert answer.spec == CORE
    assert [r.job for r in answer.runs] == ["build-stream/son", "ingest-corpus/sonnets",
                                           "train/sonnets"]
    assert schema_url("LineageTrainingRunFacet").startswith(
        "https://raw.githubusercontent.com/")


def test_facet_classes_and_published_schemas_name_the_same_fields() -> None:
    import attr

    from lineage.exports import openlineage_facets

    for key, name in FACET_SCHEMAS.items():
        schema = json.loads((FACETS / f"{name}.json").read_text())
        assert schema["$id"] == schema_url(name).split("#")[0]
        assert schema["properties"] == {key: {"$ref": f"#/$defs/{name}"}}
        own = schema["$defs"][name]["allOf"][1]["properties"]
        fields = {f.name for f in attr.fields(getattr(openlineage_facets, name))
                  if not f.name.startswith("_")}
        assert set(own) == fields, name


@given(st.lists(st.text(max_size=20), min_size=1, max_size=4),
       st.lists(st.text(max_size=20), min_size=1, max_size=4))
def test_run_ids_are_version_8_uuids_of_their_parts(a: list[str], b: list[str]) -> None:
    import uuid

    from lineage.exports.openlineage_events import run_uuid

    made = uuid.UUID(run_uuid(*a))
    assert made.version == 8 and made.variant == uuid.RFC_4122
    assert run_uuid(*a) == str(made)
    if "\0" not in "".join(a + b):  # parts are joined by NUL: without one, a != b => ids differ
        assert (run_uuid(*a) == run_uuid(*b)) == (a == b)
