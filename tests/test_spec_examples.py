"""Worked examples written into the specs are computed, not copied: each is re-derived
here from the code."""

from __future__ import annotations

import re
from pathlib import Path

import blake3

from lineage.stream.spec import StreamSpec

DOCS = Path(__file__).parents[1] / "docs"


def test_the_stream_spec_example_of_canonical_json_and_spec_hash() -> None:
    page = (DOCS / "stream-spec.md").read_text(encoding="utf-8")
    example = re.search(r"```json\n(\{\"batch\":4,.*\})\n```", page)
    stated = re.search(r"its `spec_hash` is\n`(blake3:[0-9a-f]{64})`", page)
    assert example and stated
    spec = StreamSpec(
        manifest_hash="blake3:349f51603ab850215f2fe53ff14f439d1c638f80f0196cf2519ef98d31cfb4cf",
        seed=42, seq_len=1024, batch=4, separator_tokens=1, token_budget=None,
        epochs={"debian-copyright": "1", "python-stdlib": "1", "shakespeare": "1"})
    assert spec.canonical_json() == example.group(1)
    assert spec.spec_hash == stated.group(1)
    assert stated.group(1) == "blake3:" + blake3.blake3(example.group(1).encode()).hexdigest()
