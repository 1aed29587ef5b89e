"""The corpus, stream and duplicate questions build their typed answers themselves: each
returns the answer type (not a dict read back into one), with nested answers and tuples,
and prints exactly as the API's answer does."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineage.answer import AnswerList, json_text
from lineage.api import Store, init_store, open_store
from lineage.corpora.answers import Corpus, CorpusSource, CorpusSummary, TextIndex
from lineage.corpora.query import get_corpus, list_corpora
from lineage.ingest import ingest_corpus
from lineage.stream.answers import RankRuleAnswer, Stream, StreamSummary, shown_stream
from lineage.stream.build import build_stream
from lineage.stream.query import get_stream, list_streams
from lineage.stream.schedule import BatchSchedule, RankRule
from lineage.text.answers import CorpusDuplicates, DuplicateCluster, DuplicateDocument
from lineage.text.duplicates import corpus_duplicates

from .conftest import write_jsonl

TEXTS = ["Shall I compare thee to a summer's day? Thou art more lovely and more temperate.",
         "Rough winds do shake the darling buds of May, and summer's lease hath all too "
         "short a date.",
         "When in disgrace with fortune and men's eyes I all alone beweep my outcast state."]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """One corpus with an exact and a text-identical copy across two sources; two streams,
    one declaring a schedule and a rank rule."""
    root = tmp_path_factory.mktemp("typed_corpora")
    records = [{"id": f"poem-{i}", "text": text, "source": "poems"}
               for i, text in enumerate(TEXTS)]
    records += [{"id": "copy-exact", "text": TEXTS[0], "source": "web"},
                {"id": "copy-shouted", "text": TEXTS[1].upper(), "source": "web"}]
    shard = write_jsonl(root / "poems.jsonl", records)
    init_store(root / "store")
    opened = open_store(root / "store")
    ingest_corpus(opened, [shard], corpus="poems", license="LicenseRef-PublicDomain")
    build_stream(opened, corpus="poems", name="plain", seed=7, seq_len=16, batch=2)
    build_stream(opened, corpus="poems", name="ramp", seed=7, seq_len=16,
                 schedule=BatchSchedule.from_json([[0, 2], [2, 4]]),
                 rank_rule=RankRule.parse("micro-batches:2"))
    return opened


def test_the_corpus_questions_return_their_answers(store: Store) -> None:
    corpora = list_corpora(store)
    assert isinstance(corpora, AnswerList) and corpora.row_type is CorpusSummary
    assert [type(row) for row in corpora] == [CorpusSummary]
    assert corpora[0].created_at.endswith("Z") and corpora[0].documents == 5
    corpus = get_corpus(store, "poems")
    assert type(corpus) is Corpus
    assert [type(s) for s in corpus.sources] == [CorpusSource, CorpusSource]
    assert type(corpus.text_index) is TextIndex
    assert corpus.licenses == ("LicenseRef-PublicDomain",)
    assert json_text(corpus) == store.corpus("poems").to_json()
    assert json_text(corpora) == store.corpora().to_json()


def test_corpus_duplicates_returns_its_clusters_typed(store: Store) -> None:
    answer = corpus_duplicates(store, "poems")
    assert type(answer) is CorpusDuplicates
    assert all(type(c) is DuplicateCluster for c in answer.clusters)
    assert all(type(d) is DuplicateDocument for c in answer.clusters for d in c.documents)
    kinds = {c.kind: [d.doc_id for d in c.documents] for c in answer.clusters}
    assert kinds == {"exact": ["copy-exact", "poem-0"], "text": ["copy-shouted", "poem-1"]}
    assert answer.documents == 5 and answer.documents_in_clusters == 4
    assert answer.to_json() == store.corpus_duplicates("poems").to_json()


def test_the_stream_questions_return_their_answers(store: Store) -> None:
    streams = list_streams(store)
    assert streams.row_type is StreamSummary
    assert [(type(s), s.name) for s in streams] == [(StreamSummary, "plain"),
                                                    (StreamSummary, "ramp")]
    ramp = shown_stream(get_stream(store, "ramp"))
    assert type(ramp) is Stream
    assert ramp.schedule == ((0, 2), (2, 4))
    assert ramp.rank_rule == RankRuleAnswer(rule="micro-batches", micro_batch=2)
    plain = shown_stream(get_stream(store, "plain"))
    assert plain.schedule is None and "schedule" not in plain and "rank_rule" not in plain
    assert ramp.to_json() == store.stream("ramp").to_json()
    assert json_text(streams) == store.streams().to_json()


def test_a_stream_answer_reads_back_from_an_answer(store: Store) -> None:
    ramp = shown_stream(get_stream(store, "ramp"))
    assert shown_stream(ramp).to_json() == ramp.to_json()


def test_a_corpus_without_a_text_index_answers_null(tmp_path: Path) -> None:
    """A corpus without a text index says so (null)."""
    shard = write_jsonl(tmp_path / "one.jsonl", [{"id": "a", "text": TEXTS[2]}])
    init_store(tmp_path / "store")
    opened = open_store(tmp_path / "store")
    ingest_corpus(opened, [shard], corpus="bare", license="MIT", fingerprints=False)
    corpus = get_corpus(opened, "bare")
    assert corpus.text_index is None and corpus.to_dict()["text_index"] is None
