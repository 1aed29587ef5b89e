"""`lineage corpus duplicates`: clusters of exact, text-identical and near-duplicate
documents, across sources, from the stored tables. Real prose: documents of about 350
words cut from the example corpus's Gutenberg plays, with copies in a second source."""

from __future__ import annotations

import itertools
import random
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.ingest import ingest_corpus
from lineage.stream.build import build_stream
from lineage.text.duplicates import min_shared_bands

from .conftest import Cli, write_jsonl
from .test_near_query import INDEXED, _documents, _vocabulary, edited


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory, example_corpus: Path) -> Store:
    plays = _documents(example_corpus, INDEXED[:2])
    rng = random.Random(4)
    vocabulary = _vocabulary(plays)
    originals = [{**doc, "source": "plays"} for doc in plays]
    added = [
        {"id": "copy-exact", "text": plays[1]["text"]},
        {"id": "copy-wrapped", "text": textwrap.fill(plays[2]["text"].upper(), 50)},
        {"id": "copy-edited-10", "text": edited(plays[3]["text"], 0.10, vocabulary, rng)},
        {"id": "copy-edited-20", "text": edited(plays[3]["text"], 0.20, vocabulary, rng)},
    ]
    root = tmp_path_factory.mktemp("duplicates")
    shard = write_jsonl(root / "all.jsonl", originals + [{**d, "source": "web"} for d in added])
    init_store(root / "store")
    store = open_store(root / "store")
    ingest_corpus(store, [shard], corpus="mixed")
    build_stream(store, corpus="mixed", name="s", seed=1, seq_len=1024, batch=8)
    return store


def test_each_kind_of_copy_is_one_cluster_across_sources(
    copies: Store, example_corpus: Path,
) -> None:
    plays = _documents(example_corpus, INDEXED[:2])
    answer = copies.corpus_duplicates("mixed")
    found = {(c.kind, tuple(d.doc_id for d in c.documents)) for c in answer.clusters}
    assert found == {
        ("exact", (plays[1]["id"], "copy-exact")),  # by doc_id
        ("text", (plays[2]["id"], "copy-wrapped")),
        ("near", (plays[3]["id"], "copy-edited-10", "copy-edited-20")),
    }
    near = next(c for c in answer.clusters if c.kind == "near")
    assert near.shared_bands is not None and 3 <= near.shared_bands[0] <= near.shared_bands[1]
    assert {d.source for d in near.documents} == {"plays", "web"}
    assert answer.clusters_by_kind == {"exact": 1, "text": 1, "near": 1}
    assert answer.documents == len(plays) + 4 and answer.documents_in_clusters == 7
    assert answer.clusters[0].kind == "near"  # the largest first


def test_a_higher_threshold_asks_for_more_shared_bands(copies: Store) -> None:
    assert [min_shared_bands(j) for j in (0.1, 0.4, 0.5, 0.8, 1.0)] == [1, 3, 6, 22, 42]
    strict = copies.corpus_duplicates("mixed", threshold=1.0)
    assert strict.min_shared_bands == 42
    assert {c.kind for c in strict.clusters} == {"exact", "text"}


def test_the_command_line_lists_clusters_and_refuses_bad_input(copies: Store) -> None:
    cli = Cli(copies.root)
    human = cli("corpus", "duplicates", "mixed").stdout
    assert human.startswith("corpus mixed: 3 clusters of copies (1 exact, 1 text, 1 near)")
    assert "copy-edited-10" in human and "shared bands" in human
    assert cli.json("corpus", "duplicates", "mixed")["min_shared_bands"] == 3
    assert "no corpus named 'nope'" in cli("corpus", "duplicates", "nope", code=2).stderr
    assert "--threshold" in cli("corpus", "duplicates", "mixed", "--threshold", "0",
                                code=2).stderr


def test_trained_on_counts_the_copies_a_matched_text_had(
    copies: Store, example_corpus: Path,
) -> None:
    plays = _documents(example_corpus, INDEXED[:2])
    # plays[1] is in the corpus twice byte for byte: a re-cased copy matches both as text.
    result = copies.trained_on(texts=[plays[1]["text"].lower()])["results"][0]
    assert result["verdict"] == "text-match"
    assert [m["doc_id"] for m in result["matches"]] == [plays[1]["id"], "copy-exact"]
    steps = sorted({s for m in result["matches"] for s in m["steps"]})
    for match in result["matches"]:
        assert (match["copies"], match["seen"]) == (2, 2)
        assert list(match["seen_steps"]) == steps
    # A near-copy of plays[3]: its document's text is in the corpus once.
    rng = random.Random(9)
    query = edited(plays[3]["text"], 0.2, _vocabulary(plays), rng)
    near = copies.trained_on(texts=[query])["results"][0]["matches"][0]
    assert (near["match"], near["copies"], near["seen"]) == ("near", 1, 1)
    human = Cli(copies.root)("trained-on", "--text", plays[1]["text"].lower()).stdout
    assert f"2 copies in the corpus, seen 2 times: steps {steps[0]}" in human


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40)), max_size=300),
       st.integers(1, 4))
def test_run_pairs_are_every_pair_of_a_run_once(rows: list[tuple[int, int]],
                                                max_run: int) -> None:
    """`_run_pairs` on rows sorted by (key, doc), a row repeated or not: each pair of
    distinct documents of a key's run once, runs longer than MAX_RUN making none."""
    import numpy as np

    import lineage.text.duplicates as duplicates

    rows.sort()
    keys = np.array([k for k, _ in rows], np.uint64)
    docs = np.array([d for _, d in rows], np.uint32)
    runs: dict[int, set[int]] = {}
    for key, doc in rows:
        runs.setdefault(key, set()).add(doc)
    expected = sorted((a << 32) | b for run in runs.values() if len(run) <= max_run
                      for a, b in itertools.combinations(sorted(run), 2))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(duplicates, "MAX_RUN", max_run)
        found = duplicates._run_pairs(keys, docs)
    assert sorted(found.tolist()) == expected


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)),
                                 max_size=40), max_size=6),
       needed=st.integers(1, 3), partitions=st.integers(1, 5), spill=st.integers(1, 40))
def test_pair_codes_counted_through_staging_files_as_in_memory(
        batches: list[list[tuple[int, int]]], needed: int, partitions: int, spill: int,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Pair codes dealt to staging files by their first document's range, each file
    counted alone, give the codes and counts (and their order) of one count in memory;
    the files are gone afterwards."""
    import numpy as np

    import lineage.text.duplicates as duplicates

    arrays = [np.array([(a << 32) | b for a, b in batch], np.uint64) for batch in batches]
    everything = np.concatenate([np.empty(0, np.uint64), *arrays])
    unique, counts = np.unique(everything, return_counts=True)
    expected = (unique[counts >= needed].tolist(), counts[counts >= needed].tolist())
    staging = tmp_path_factory.mktemp("staging")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(duplicates, "SPILL_CODES", spill)
        patch.setattr(duplicates, "PARTITIONS", partitions)
        counter = duplicates.PairCounter(staging, documents=25)  # some pairs past it
        for codes in arrays:
            counter.add(codes)
        found = counter.counted(needed)
        counter.close()
    assert (found[0].tolist(), found[1].tolist()) == expected
    assert list(staging.iterdir()) == []


def test_clusters_are_the_same_when_the_pairs_go_through_staging(copies: Store) -> None:
    import lineage.text.duplicates as duplicates

    in_memory = copies.corpus_duplicates("mixed").to_dict()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(duplicates, "SPILL_CODES", 1)  # every run's pairs to the files
        spilled = copies.corpus_duplicates("mixed").to_dict()
    assert spilled == in_memory
    assert not any(copies.staging_dir.iterdir())
