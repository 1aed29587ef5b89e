"""Model card metadata in due diligence: the front matter reader, its refusals, and what
inspect and report make of a card (declared datasets, licence disagreements)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.numpy import save_file

from lineage.api import Store
from lineage.diligence.api import inspect
from lineage.diligence.card import model_card
from lineage.diligence.inspect import inspect_model
from lineage.diligence.license import same_license
from lineage.formats.model_card import (
    MAX_FRONT_MATTER,
    ModelCardInputError,
    parse_front_matter,
)
from lineage.ingest import ingest_corpus
from lineage.ingest.checkpoint import ingest_checkpoint

from .conftest import Cli
from .test_report import _run_and_step_2_weights

# The shape of real Hub cards: a fine-tune of a gated base (license other, a named licence
# and a link to its file), several datasets, several languages, a base_model list (a merge).
HUB_CARD = """---
license: other
license_name: yi-license
license_link: LICENSE
base_model:
- 01-ai/Yi-6B
- 01-ai/Yi-6B-Chat
datasets:
- HuggingFaceFW/fineweb-edu
- example
language:
- en
- zh
- no
pipeline_tag: text-generation
library_name: transformers
tags:
- merge
- "{{ template_text_is_only_text }}"
model-index:
- name: tiny
  results: []
---

# tiny

{% for x in range(3) %}never rendered{% endfor %}
"""


def _folder(path: Path, card: str | bytes | None = None) -> Path:
    """A folder with real safetensors weights and, when given, a README.md."""
    path.mkdir(parents=True, exist_ok=True)
    save_file({"w": np.arange(12, dtype=np.float32).reshape(4, 3)},
              str(path / "model.safetensors"))
    if card is not None:
        data = card.encode() if isinstance(card, str) else card
        (path / "README.md").write_bytes(data)
    return path


def test_the_minilm_card_as_published(minilm_folder: Path) -> None:
    card = model_card(minilm_folder)
    assert card is not None and card["findings"] == []
    raw = (minilm_folder / "README.md").read_bytes()
    assert card["sha256"] == hashlib.sha256(raw).hexdigest() and card["bytes"] == len(raw)
    assert card["license"] == "apache-2.0" and card["language"] == ["en"]
    assert card["pipeline_tag"] == "sentence-similarity"
    assert card["library_name"] == "sentence-transformers"
    assert len(card["datasets"]) == 21 and card["datasets"][:3] == ["s2orc",
        "flax-sentence-embeddings/stackexchange_xml", "ms_marco"]  # fmt: skip
    assert "sentence-transformers" in card["tags"] and card["base_model"] == []
    # the same fields a YAML reader finds in the front matter
    published = yaml.safe_load(raw.decode().split("---")[1])
    assert card["datasets"] == published["datasets"] and card["tags"] == published["tags"]


def test_a_hub_shaped_card_is_normalized(tmp_path: Path) -> None:
    card = model_card(_folder(tmp_path / "m", HUB_CARD))
    assert card is not None and card["findings"] == []
    assert card["license"] == "other" and card["license_name"] == "yi-license"
    assert card["license_link"] == "LICENSE"
    assert card["base_model"] == ["01-ai/Yi-6B", "01-ai/Yi-6B-Chat"]
    assert card["datasets"] == ["HuggingFaceFW/fineweb-edu", "example"]
    assert card["language"] == ["en", "zh", "no"]  # YAML 1.2: `no` is Norwegian, not False
    # a template in the card is text: kept as written, never rendered
    assert card["tags"] == ["merge", "{{ template_text_is_only_text }}"]
    single = model_card(_folder(tmp_path / "s", "---\nbase_model: a/b\nlanguage: fr\n---\n"))
    assert single is not None and single["base_model"] == ["a/b"] and single["language"] == ["fr"]


BAD_CARDS = {
    "yaml-alias": b"---\na: &a [lol, lol, lol]\nb: &b [*a, *a, *a]\nc: &c [*b, *b, *b]\n"
                  b"license: mit\n---\n",
    "yaml-tag": b"---\nlicense: !!python/object/apply:os.system ['touch /tmp/never']\n---\n",
    "yaml-key": b"---\n? [a, b]\n: c\n---\n",
    "front-matter-too-large": b"---\ntags:\n" + b"- x\n" * (MAX_FRONT_MATTER // 4) + b"---\n",
    "front-matter-unclosed": b"---\nlicense: mit\n\n# a card that never closes\n",
    "front-matter-encoding": b"---\nlicense: caf\xe9\n---\n",
    "yaml-syntax": b"---\nlicense: [mit\n---\n",
    "not-a-mapping": b"---\n- mit\n---\n",
    "yaml-too-deep": b"---\nx: " + b"[" * 5000 + b"]" * 5000 + b"\n---\n",
}  # fmt: skip


@pytest.mark.parametrize("rule", sorted(BAD_CARDS))
def test_a_malformed_card_is_a_finding_and_the_report_goes_on(tmp_path: Path,
                                                              rule: str) -> None:
    folder = _folder(tmp_path / "m", BAD_CARDS[rule])
    report = inspect(folder)  # no exception: the card is one section of the report
    assert report.card is not None and [f.rule for f in report.card.findings] == [rule]
    assert report.card.front_matter and report.card.license is None
    assert report.card.sha256 == hashlib.sha256(BAD_CARDS[rule]).hexdigest()
    assert report.parameters == 12 and report.license.sources == ()
    assert not Path("/tmp/never").exists()


def test_the_reader_raises_by_rule(tmp_path: Path) -> None:
    with pytest.raises(ModelCardInputError) as caught:
        parse_front_matter(tmp_path / "README.md", b"a: &x 1\nb: *x\n")
    assert caught.value.rule_id == "yaml-alias" and str(tmp_path) in str(caught.value)


def test_a_field_of_the_wrong_shape_is_skipped_alone(tmp_path: Path) -> None:
    card = model_card(_folder(tmp_path / "m", "---\ndatasets: {a: b}\nlicense: mit\n---\n"))
    assert card is not None and card["license"] == "mit" and card["datasets"] == []
    assert [(f["rule"], f["message"]) for f in card["findings"]] == [
        ("field-type", "`datasets` is a dict, not a string or a list of strings")]
    two = model_card(_folder(tmp_path / "t",
                             "---\nlicense: [mit, apache-2.0]\nlanguage: en\n---\n"))
    assert two is not None and two["license"] is None and two["language"] == ["en"]
    assert [f["message"] for f in two["findings"]] == ["`license` lists 2 values, not one"]


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=400))
def test_any_front_matter_bytes_give_a_mapping_or_a_rule(body: bytes) -> None:
    try:
        assert isinstance(parse_front_matter(Path("README.md"), body), dict)
    except ModelCardInputError as exc:
        assert exc.rule_id in {"front-matter-encoding", "yaml-alias", "yaml-tag", "yaml-key",
                               "yaml-syntax", "not-a-mapping", "yaml-too-deep"}


def test_no_readme_leaves_the_inspection_as_it_was(tmp_path: Path) -> None:
    report = inspect(_folder(tmp_path / "m"))
    data = json.loads(report.to_json())
    assert "card" not in data and "datasets" not in data["provenance"]
    assert "disagreements" not in data["license"]
    assert report.card is None


def test_declared_datasets_recorded_by_manifest_hash_or_only_named(
        store: Store, example_corpus: Path, tmp_path: Path) -> None:
    recorded = ingest_corpus(store, [example_corpus], corpus="example")
    ingest_corpus(store, [example_corpus], corpus="HuggingFaceFW--fineweb-edu")
    card = HUB_CARD.replace("- example\n", "- example\n- allenai/c4\n")
    prov = inspect(_folder(tmp_path / "m", card), store=store).provenance
    by_name = {d.name: d for d in prov.datasets or ()}
    assert by_name["example"].recorded is True and by_name["example"].corpus == "example"
    assert by_name["example"].manifest_hash == recorded.manifest_hash
    assert by_name["HuggingFaceFW/fineweb-edu"].corpus == "HuggingFaceFW--fineweb-edu"
    assert by_name["allenai/c4"].recorded is False and by_name["allenai/c4"].corpus is None
    assert prov.tier == "open weights"  # a declaration is a claim, never a tier
    assert any(recorded.manifest_hash in e for e in prov.evidence)
    assert prov.missing[-1] == ("a recorded corpus for each training dataset README.md only "
                                "names: allenai/c4")
    unchecked = inspect(tmp_path / "m").provenance.datasets or ()
    assert [d.recorded for d in unchecked] == [None, None, None]


def test_an_unrecorded_dataset_keeps_a_run_from_being_fully_auditable(
        run_store: Store, tmp_path: Path) -> None:  # noqa: F811
    ckpt = _run_and_step_2_weights(run_store, tmp_path)
    ingest_checkpoint(run_store, ckpt, run="r", step=2)
    (ckpt / "README.md").write_text("---\ndatasets:\n- sonnets\n---\n")
    assert inspect_model(ckpt, store=run_store)["provenance"]["tier"] == "fully auditable"
    (ckpt / "README.md").write_text("---\ndatasets:\n- sonnets\n- allenai/c4\n---\n")
    prov = inspect_model(ckpt, store=run_store)["provenance"]
    assert prov["tier"] == "open source"
    assert prov["missing"] == ["a recorded corpus for each training dataset README.md only "
                               "names: allenai/c4"]


MIT_TEXT = "MIT License\n\nCopyright (c) 2024\n\nPermission is hereby granted, free of charge"


def test_licence_disagreements_between_card_licence_file_and_config(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "m", "---\nlicense: apache-2.0\n---\n")
    (folder / "LICENSE").write_text(MIT_TEXT)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama",
                                                    "license": "llama2"}))
    licence = inspect(folder).license
    assert [s["file"] for s in licence.sources] == ["README.md", "LICENSE", "config.json"]
    assert licence.disagreements == (
        "README.md (front matter) says apache-2.0 but LICENSE (licence text) says MIT",
        "README.md (front matter) says apache-2.0 but config.json (license) says llama2",
        "LICENSE (licence text) says MIT but config.json (license) says llama2")
    agreeing = _folder(tmp_path / "a", "---\nlicense: mit\n---\n")
    (agreeing / "LICENSE").write_text(MIT_TEXT)
    assert inspect(agreeing).license.disagreements is None


def test_license_other_is_named_by_license_name(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "m", HUB_CARD)
    (folder / "LICENSE").write_text("Yi Series Models Community License Agreement\n...")
    licence = inspect(folder).license
    assert licence.license == ("other (yi-license)", "unrecognised text")
    assert licence.disagreements is None  # an unrecognised text is no claim to compare


def test_same_license_reads_families() -> None:
    assert same_license("Apache-2.0", "apache-2.0") and same_license("GPL", "gpl-3.0")
    assert not same_license("MIT", "apache-2.0") and not same_license("llama3", "llama3x")


def test_cli_inspect_json_and_markdown_report_show_the_card(
        store: Store, example_corpus: Path, tmp_path: Path) -> None:
    ingest_corpus(store, [example_corpus], corpus="example")
    folder = _folder(tmp_path / "m", HUB_CARD)
    (folder / "LICENSE").write_text(MIT_TEXT)
    cli = Cli(store.root)
    data = cli.json("inspect", str(folder))
    assert data == json.loads(inspect(folder, store=store).to_json()) | {
        "generated": data["generated"]}
    assert data["card"]["datasets"] == ["HuggingFaceFW/fineweb-edu", "example"]
    assert [d["recorded"] for d in data["provenance"]["datasets"]] == [False, True]
    assert data["license"]["disagreements"] == [
        "README.md (front matter) says other (yi-license) but LICENSE (licence text) says MIT"]
    md = cli("report", str(folder), "--format", "md").stdout
    card = md[md.index("## Model card"):md.index("## Files")]
    assert "- license_name: yi-license" in card and "- base_model: 01-ai/Yi-6B, 01-ai/Yi-6B-Chat" \
        in card and "- language: en, zh, no" in card
    assert "DISAGREEMENT: README.md (front matter) says other (yi-license)" in md
    assert "only names: HuggingFaceFW/fineweb-edu" in md
    html = cli("report", str(folder), "--format", "html").stdout
    assert "<h2>Model card</h2>" in html and "yi-license" in html


def test_a_card_finding_in_the_report_and_a_folder_without_one(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "no-store")
    bad = _folder(tmp_path / "bad", BAD_CARDS["yaml-tag"])
    result = cli("report", str(bad))
    assert "- finding: yaml-tag: could not determine a constructor" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    plain = _folder(tmp_path / "plain")
    assert "## Model card" not in cli("report", str(plain)).stdout


def test_a_card_link_leaving_the_folder_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("---\nlicense: mit\n---\n")
    folder = _folder(tmp_path / "m")
    (folder / "README.md").symlink_to(outside)
    card = model_card(folder)
    assert card is not None and card["license"] is None and card["sha256"] is None
    assert [f["rule"] for f in card["findings"]] == ["card-unreadable"]
