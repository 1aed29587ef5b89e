"""docs/exports.md's OpenLineage example is what `lineage export openlineage --run tiny`
writes for the demo's records (examples/demo.sh: the example corpus with the demo's
licences, stream `main`, 200 steps of the tiny run, the checkpoint after step 99), but for
the two values that depend on the machine and the moment: the event time and the
checkpoint folder's path."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, Cli
from .demo_run import copy_demo_run
from .test_openlineage import assert_valid


def documented_example() -> dict[str, Any]:
    text = (REPO / "docs" / "exports.md").read_text(encoding="utf-8")
    section = text[text.index("## OpenLineage"):].split("\n## ", 1)[0]  # to the next section
    (block,) = re.findall(r"```json\n(.*?)\n```", section, flags=re.DOTALL)
    example: dict[str, Any] = json.loads(block)
    return example


def _machine_free(event: dict[str, Any]) -> dict[str, Any]:
    event = json.loads(json.dumps(event))
    event["eventTime"] = "…"
    for dataset in event["outputs"]:
        dataset["facets"]["lineage_checkpoint"]["path"] = "…"
    return event


@pytest.mark.slow
def test_the_documented_event_is_the_demo_runs(demo_run: Path, tmp_path: Path) -> None:
    from lineage.ingest.checkpoint import ingest_checkpoint

    store = copy_demo_run(demo_run, tmp_path / "demo")
    ingest_checkpoint(store, tmp_path / "demo" / "run" / "checkpoint-99", run="tiny", step=99)
    Cli(store.root)("export", "openlineage", "--run", "tiny", "-o", str(tmp_path / "e.jsonl"))
    lines = (tmp_path / "e.jsonl").read_text().splitlines()
    assert [json.loads(line)["job"]["name"] for line in lines] == [
        "ingest-corpus/example", "ingest-corpus/example", "build-stream/main",
        "build-stream/main", "train/tiny", "train/tiny"]
    written = json.loads(lines[-1])
    assert_valid(written)
    documented = documented_example()
    assert_valid(documented)
    assert _machine_free(documented) == _machine_free(written)
