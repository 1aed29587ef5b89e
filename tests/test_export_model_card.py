"""`lineage export model-card` on the demo's own records: the corpus of examples/corpus
with the demo's licences, its stream, 200 steps of the tiny run and the checkpoint after
step 99 (examples/demo.sh), plus a one-licence corpus with a short run of its own. The
card's metadata is read back by yaml and by huggingface_hub's card parser, its numbers and
hashes are compared with the store's, and docs/exports.md's example is this card."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from lineage.api import Store
from lineage.exports.answers import ModelCard
from lineage.exports.model_card import is_spdx_list_id, license_fields, model_card
from lineage.ingest import ingest_corpus
from lineage.stream.build import build_stream

from .conftest import EXAMPLES, REPO, Cli, load_tiny_run
from .demo_run import copy_demo_run

HASH = re.compile(r"blake3:[0-9a-f]{64}")


@pytest.fixture(scope="module")
def demo(demo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Store:
    """The demo's corpus, stream `main`, run `tiny` (200 steps) and its checkpoint 99, and
    the sonnets under CC0-1.0 with a 10-step run `sonnets` and its checkpoint 4."""
    from lineage.ingest.checkpoint import ingest_checkpoint
    from lineage.ingest.steps import ingest_steps

    root = tmp_path_factory.mktemp("card") / "demo"
    store = copy_demo_run(demo_run, root)
    ingest_checkpoint(store, root / "run" / "checkpoint-99", run="tiny", step=99)

    ingest_corpus(store, [EXAMPLES / "shards" / "sonnets.jsonl.gz"], corpus="sonnets",
                  license="CC0-1.0", fingerprints=False)
    build_stream(store, corpus="sonnets", name="son", seed=7, seq_len=256, batch=2)
    load_tiny_run().train(store, "son", steps=10, out=root / "son", checkpoint_every=5)
    ingest_steps(store, root / "son" / "steps.jsonl", run="sonnets", stream="son",
                 world_size=2)
    ingest_checkpoint(store, root / "son" / "checkpoint-4", run="sonnets", step=4)
    return store


def card(store: Store, run: str = "tiny", step: int = 99) -> ModelCard:
    answer = store.model_card(run, checkpoint=step)
    assert answer == model_card(store, run=run, checkpoint=step)  # the API's is the core's
    assert isinstance(answer, ModelCard)
    return answer


def front_matter(text: str) -> dict[str, Any]:
    assert text.startswith("---\n")
    block, _, _ = text[4:].partition("\n---\n")
    loaded = yaml.safe_load(block)
    assert isinstance(loaded, dict)
    return loaded


def test_the_metadata_block_reads_back_with_yaml_and_the_hub_parser(
        demo: Store, tmp_path: Path) -> None:
    answer = card(demo)
    expected = {"datasets": ["example"], "license": "other", "license_name": "mixed",
                "tags": ["lineage"]}
    assert answer.metadata == expected and front_matter(answer.text) == expected
    hub = pytest.importorskip("huggingface_hub")
    parsed = hub.ModelCard(answer.text)
    assert parsed.data.to_dict() == expected
    assert parsed.text.lstrip("\n").startswith("## Training data\n")
    readme = tmp_path / "README.md"
    readme.write_text(answer.text, encoding="utf-8")
    assert hub.metadata_load(readme) == expected


def test_one_spdx_licence_on_every_source_is_the_cards_licence(demo: Store) -> None:
    answer = card(demo, "sonnets", 4)
    assert answer.metadata == {"datasets": ["sonnets"], "license": "cc0-1.0",
                               "tags": ["lineage"]}
    assert front_matter(answer.text) == answer.metadata
    assert "| sonnets | " in answer.text and "| CC0-1.0 |" in answer.text
    assert "`license: cc0-1.0`" in answer.text


def test_every_number_and_hash_in_the_text_is_the_stores(demo: Store) -> None:
    text = card(demo).text
    corpus, stream, run = demo.corpus("example"), demo.stream("main"), demo.run("tiny")
    rows = re.findall(r"^\| ([^|]+) \| (\d+) \| (\d+) \| ([0-9.]+) \| ([^|]+) \|$", text, re.M)
    assert [(s, int(d), int(t), float(sh), lic.split(", ")) for s, d, t, sh, lic in rows] == \
        [(s["source"], s["documents"], s["tokens"], s["share"], list(s["licenses"]))
         for s in corpus["sources"]]
    assert f"- Documents: {corpus['documents']}; tokens: {corpus['tokens']} " in text
    assert (f"- Seed: {stream['seed']}; sequence length: {stream['seq_len']} tokens; batch: "
            f"{stream['batch']} windows per step; steps: {stream['steps']}; tokens: "
            f"{stream['tokens']}") in text
    assert (f"- Steps recorded: {run['steps_recorded']} (steps {run['first_step']} to "
            f"{run['last_step']} of the stream's {run['stream_steps']}); chain closed: yes"
            ) in text
    assert (f"- Clipped steps: {run['clipped_count']}; skipped steps: "
            f"{run['skipped_count']}") in text
    rule = run["skip_rule"]
    assert f"above {rule['grad_norm_above']} is skipped, and so are the " \
           f"{rule['skip_following']} steps after it" in text
    head = demo.sql("SELECT state_hash FROM steps WHERE run = 'tiny' AND step = 199").rows[0][0]
    digests = demo.sql("SELECT weights_digest, state_digest FROM checkpoints "
                       "WHERE run = 'tiny' AND step = 99").rows[0]
    assert set(HASH.findall(text)) == {corpus["manifest_hash"], stream["spec_hash"],
                                       stream["occurrences_digest"], run["genesis"], head,
                                       *digests}
    assert f"Chain head (the state hash of the last step): `{head}`" in text
    assert text.count("matches the chain: yes") == 2


def test_the_evidence_names_the_records_the_card_was_made_from(demo: Store) -> None:
    evidence = card(demo).evidence
    logged = json.loads(demo.sql("SELECT record FROM steps WHERE run = 'tiny' AND step = 99")
                        .rows[0][0])  # the step record as the trainer wrote it
    chain_row = (logged["weights_digest"], logged["state_digest"])
    assert (evidence.run, evidence.corpus, evidence.stream, evidence.checkpoint) == \
        ("tiny", "example", "main", 99)
    assert evidence.manifest_hash == demo.corpus("example")["manifest_hash"]
    assert evidence.spec_hash == demo.stream("main")["spec_hash"]
    assert (evidence.weights_digest, evidence.state_digest) == tuple(chain_row)
    assert (evidence.chain_weights_digest, evidence.chain_state_digest) == tuple(chain_row)
    assert evidence.matches_chain is True and evidence.matches_state is True
    assert evidence.closed is True and evidence.chain == "lineage-chain/2"


def test_the_same_store_gives_the_same_bytes(demo: Store, tmp_path: Path) -> None:
    cli = Cli(demo.root)
    first, second = tmp_path / "a.md", tmp_path / "b.md"
    cli("export", "model-card", "--run", "tiny", "--checkpoint", "99", "-o", str(first))
    cli("export", "model-card", "--run", "tiny", "--checkpoint", "99", "-o", str(second))
    assert first.read_bytes() == second.read_bytes()
    assert first.read_text(encoding="utf-8") == card(demo).text


def test_the_docs_example_is_the_demos_card(demo: Store) -> None:
    """docs/exports.md shows the card of the demo's run; this store is built the same way,
    so the example is the card, byte for byte."""
    page = (REPO / "docs" / "exports.md").read_text(encoding="utf-8")
    example = page.split("\n````markdown\n", 1)[1].split("````\n", 1)[0]
    assert example == card(demo).text


def test_cli_prints_the_card_and_its_json(demo: Store, tmp_path: Path) -> None:
    cli = Cli(demo.root)
    plain = cli("export", "model-card", "--run", "tiny", "--checkpoint", "99")
    answer = card(demo)
    assert plain.stdout == answer.text
    printed = cli.json("export", "model-card", "--run", "tiny", "--checkpoint", "99")
    assert list(printed) == ["metadata", "text", "evidence"]
    assert printed == answer.to_dict() and printed["text"] == plain.stdout
    out = tmp_path / "README.md"
    quiet = cli("export", "model-card", "--run", "tiny", "--checkpoint", "99", "-o", str(out))
    assert quiet.stdout == "" and f"wrote {out}" in quiet.stderr
    assert out.read_text(encoding="utf-8") == answer.text


@pytest.mark.parametrize(("args", "message"), [
    (("--run", "nope", "--checkpoint", "99"), "no run named 'nope' (runs: "),
    (("--run", "tiny", "--checkpoint", "200"), "run 'tiny' has no step 200 (steps 0..199"),
    (("--run", "tiny", "--checkpoint", "49"),
     "run 'tiny' has no checkpoint ingested at step 49 (ingested: 99)"),
])
def test_an_unknown_run_step_or_checkpoint_is_an_error(
        demo: Store, args: tuple[str, ...], message: str) -> None:
    out = Cli(demo.root)("export", "model-card", *args, code=2)
    assert out.stdout == "" and out.stderr.startswith("error: ") and message in out.stderr
    assert out.stderr.count("\n") == 1


@pytest.mark.parametrize(("licences", "expected"), [
    ([["MIT"], ["MIT"]], {"license": "mit"}),
    ([["Apache-2.0"]], {"license": "apache-2.0"}),
    ([["MIT"], ["Apache-2.0"]], {"license": "other", "license_name": "mixed"}),
    ([["MIT", "Apache-2.0"]], {"license": "other", "license_name": "mixed"}),
    ([["MIT"], []], {"license": "other", "license_name": "mixed"}),
    ([[], []], {"license": "other", "license_name": "unrecorded"}),
    ([["LicenseRef-PublicDomain"]], {"license": "other",
                                     "license_name": "licenseref-publicdomain"}),
    ([["NOASSERTION"]], {"license": "other", "license_name": "noassertion"}),
    ([["MIT OR Apache-2.0"]], {"license": "other", "license_name": "mit or apache-2.0"}),
])
def test_the_licence_field(licences: list[list[str]], expected: dict[str, str]) -> None:
    assert license_fields([{"licenses": lics} for lics in licences]) == expected


_IDS = st.sampled_from(["MIT", "Apache-2.0", "CC0-1.0", "GPL-3.0-or-later", "NOASSERTION",
                        "LicenseRef-PublicDomain", "MIT OR Apache-2.0", "NONE"])


@given(st.lists(st.lists(_IDS, max_size=3, unique=True).map(sorted), min_size=1, max_size=5))
def test_a_named_licence_is_always_the_one_every_source_carries(
        licences: list[list[str]]) -> None:
    fields = license_fields([{"licenses": lics} for lics in licences])
    if fields["license"] == "other":
        assert "license_name" in fields
        return
    (only,) = {lic for lics in licences for lic in lics}  # never invented, never a choice
    assert fields == {"license": only.lower()} and is_spdx_list_id(only)
    assert all(lics == [only] for lics in licences)


def test_a_checkpoint_that_differs_from_the_chain_is_said_to(
        demo: Store, tmp_path: Path) -> None:
    """The checkpoint after step 149 recorded as step 99's: the card states both digests
    and that they differ, as the store recorded the lie."""
    from lineage.ingest.checkpoint import ingest_checkpoint
    from lineage.ingest.steps import ingest_steps

    runs = demo.root.parent
    store = copy_demo_run(runs, tmp_path / "demo")  # the module's store stays as it is
    ingest_steps(store, runs / "run" / "steps.jsonl", run="liar", stream="main", world_size=2)
    ingest_checkpoint(store, runs / "run" / "checkpoint-149", run="liar", step=99)
    answer = card(store, "liar", 99)
    evidence = answer.evidence
    assert evidence.matches_chain is False and evidence.matches_state is False
    assert evidence.weights_digest != evidence.chain_weights_digest
    assert evidence.chain_weights_digest == card(store).evidence.weights_digest
    assert answer.text.count("matches the chain: NO") == 2
    assert f"`{evidence.weights_digest}`; the chain's: `{evidence.chain_weights_digest}`" \
        in answer.text


def test_an_exported_card_is_read_back_by_inspect_and_names_its_recorded_corpus(
        demo: Store, tmp_path: Path) -> None:
    """The card lineage writes, put in the model's folder, is what `lineage inspect` reads:
    its training dataset is found in the store by the manifest hash the card states."""
    import shutil

    import lineage

    (source,) = demo.sql("SELECT path FROM checkpoints WHERE run = 'tiny' AND step = 99").rows
    folder = tmp_path / "model"
    shutil.copytree(source[0], folder)
    written = card(demo)
    (folder / "README.md").write_text(written.text, encoding="utf-8")
    inspected = lineage.inspect(folder, store=demo)
    assert inspected.card is not None and inspected.card.findings == ()
    assert inspected.card.datasets == ("example",)
    assert inspected.card.license == written.metadata["license"]
    (declared,) = inspected.provenance.datasets or ()
    assert declared.recorded and declared.corpus == "example"
    assert declared.manifest_hash == demo.corpus("example").manifest_hash
    assert declared.manifest_hash in written.text


def test_a_source_name_is_text_in_its_cell_and_a_name_in_code_keeps_its_backticks(
        demo: Store) -> None:
    """The one Markdown rule (lineage.markup): a `|`, a `*` or a `_` at a word's edge in a
    source name is escaped and its line feed spelled `\\n` (today's card wrote `_` and `*`
    as they are, which a reader takes for emphasis), its bidi override is spelled out, and
    a run name with backticks widens its span."""
    from dataclasses import replace

    from lineage.exports.card_text import card_text
    from lineage.exports.model_card import card_facts

    facts = card_facts(demo, "tiny", 99)
    sources = [{**facts.corpus["sources"][0], "source": "__a|b__*\nc\u202e"},
               *facts.corpus["sources"][1:]]
    odd = replace(facts, corpus={**facts.corpus, "sources": sources},
                  run={**facts.run, "name": "r`1``"})
    text = card_text(odd, {"license": "other", "license_name": "mixed"})
    row = next(line for line in text.splitlines() if line.startswith("| \\_\\_a"))
    assert row.startswith("| \\_\\_a\\|b\\_\\_\\*\\nc\\u202e | ")
    assert len(re.split(r"(?<!\\)\|", row)) == 7  # five cells between six pipes
    assert "- Name: ``` r`1`` ```; chain" in text  # a run of two: a fence of three
    assert "\u202e" not in text
