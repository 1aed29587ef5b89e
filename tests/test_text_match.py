"""Partial text matching on real text: the Shakespeare, Python stdlib and Debian texts of
the example corpus, queried with excerpts, re-wrapped copies, boilerplate, a document
split in two, and unrelated text of the same domain."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import textwrap
import unicodedata
from pathlib import Path

import blake3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.errors import InputError, StoreError, UsageError
from lineage.ingest import ingest_corpus
from lineage.stream.build import build_stream
from lineage.text import fingerprint as fp
from lineage.text.identity import normalize, words

from .conftest import Cli, write_jsonl

BOILERPLATE = (
    "Subscribe to our newsletter to get the best stories delivered to your inbox every "
    "week. We use cookies to improve your experience on our site and to show you relevant "
    "advertising. By continuing to browse you agree to our use of cookies."
)
HELD_OUT = ("macbeth.txt", "macbeth_folio.txt", "tempest.txt", "tempest_folio.txt")


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory, example_corpus: Path) -> Path:
    """The example corpus without Macbeth (held out: unrelated text of the same domain)
    and with The Tempest split into two documents at a line break near its middle."""
    root = tmp_path_factory.mktemp("text-corpus") / "corpus"
    shutil.copytree(example_corpus, root, ignore=shutil.ignore_patterns(*HELD_OUT))
    tempest = (example_corpus / "shakespeare" / "tempest.txt").read_text(encoding="utf-8")
    cut = tempest.index("\n", len(tempest) // 2) + 1
    (root / "shakespeare" / "tempest-1.txt").write_text(tempest[:cut], encoding="utf-8")
    (root / "shakespeare" / "tempest-2.txt").write_text(tempest[cut:], encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, corpus_dir: Path) -> Store:
    root = tmp_path_factory.mktemp("text-store") / "store"
    init_store(root)
    store = open_store(root)
    ingest_corpus(store, [corpus_dir], corpus="plays")
    build_stream(store, corpus="plays", name="s", seed=1, seq_len=1024, batch=16)
    return store


def _play(example_corpus: Path, name: str) -> str:
    return (example_corpus / "shakespeare" / name).read_text(encoding="utf-8")


def _lines(text: str, first: int, count: int) -> str:
    return "\n".join(text.splitlines()[first:first + count])


def _passage(text: str, first_line: int, min_words: int = 40) -> str:
    """Lines from `first_line` on until they hold at least `min_words` words."""
    lines = text.splitlines()
    end = first_line + 1
    while len(words("\n".join(lines[first_line:end]))) < min_words:
        end += 1
    return "\n".join(lines[first_line:end])


def _ask(store: Store, text: str, **options: object) -> dict:
    return store.trained_on(texts=[text], **options)["results"][0]


def test_a_paragraph_is_found_with_exact_spans(indexed: Store, corpus_dir: Path,
                                               example_corpus: Path) -> None:
    play = _play(example_corpus, "julius_caesar.txt")
    excerpt = _lines(play, 1200, 12)
    result = _ask(indexed, excerpt)
    assert result["verdict"] == "partial" and result["containment"] == 1.0
    best = result["matches"][0]
    assert best["doc_id"] == "shakespeare/julius_caesar.txt" and best["match"] == "partial"
    (span,) = best["spans"]
    assert span["verified"] and span["query_words"] == [0, len(words(excerpt))]
    assert span["query_chars"] == [0, len(excerpt)]
    start, end = span["doc_chars"]
    assert normalize(play[start:end]) == normalize(excerpt)
    first, last = span["doc_words"]
    assert words(play)[first:last] == words(excerpt)


def test_separated_paragraphs_each_get_a_span(indexed: Store, example_corpus: Path) -> None:
    play = _play(example_corpus, "twelfth_night.txt")
    pieces = [_passage(play, first) for first in (300, 1500, 2600)]
    query = "\n\n[...]\n\n".join(pieces)
    result = _ask(indexed, query)
    assert result["verdict"] == "partial" and result["containment"] == 1.0
    best = result["matches"][0]
    assert best["doc_id"] == "shakespeare/twelfth_night.txt"
    assert [s["query_words"][1] - s["query_words"][0] for s in best["spans"]] == [
        len(words(p)) for p in pieces]


def test_a_rewrapped_recased_copy_is_a_text_match(indexed: Store, example_corpus: Path,
                                                  tmp_path: Path) -> None:
    poem = _play(example_corpus, "phoenix_and_the_turtle.txt")
    copy = tmp_path / "copy.txt"
    copy.write_text(textwrap.fill(poem.upper(), 37).replace("\n", "\r\n"), encoding="utf-8")
    assert blake3.blake3(copy.read_bytes()).hexdigest() != blake3.blake3(
        poem.encode()).hexdigest()
    result = indexed.trained_on([str(copy)])["results"][0]
    assert result["verdict"] == "text-match" and result["containment"] == 1.0
    (match,) = result["matches"]
    assert match["match"] == "text" and match["doc_id"] == "shakespeare/phoenix_and_the_turtle.txt"
    assert match["text_hash"] == result["text_hash"]
    assert match["content_hash"] == blake3.blake3(poem.encode()).hexdigest()


def test_boilerplate_in_the_middle_lowers_containment(indexed: Store,
                                                      example_corpus: Path) -> None:
    play = _play(example_corpus, "julius_caesar.txt")
    before, after = _lines(play, 400, 20), _lines(play, 420, 20)
    query = f"{before}\n\n{BOILERPLATE}\n\n{after}"
    result = _ask(indexed, query)
    shared = len(words(before)) + len(words(after))
    assert result["verdict"] == "partial"
    assert result["containment"] == round(shared / len(words(query)), 4)
    best = result["matches"][0]
    assert len(best["spans"]) == 2 and all(s["verified"] for s in best["spans"])
    # A stricter threshold turns the same evidence into not-found.
    strict = _ask(indexed, query, min_containment=0.95)
    assert strict["verdict"] == "not-found" and strict["matches"]


def test_a_document_split_in_two_is_covered_by_both_parts(indexed: Store,
                                                          example_corpus: Path) -> None:
    whole = example_corpus / "shakespeare" / "tempest.txt"  # held out: only the parts are in
    result = indexed.trained_on([str(whole)])["results"][0]
    assert result["verdict"] == "partial" and result["containment"] >= 0.999
    parts = {m["doc_id"]: m["containment"] for m in result["matches"]}
    assert set(parts) >= {"shakespeare/tempest-1.txt", "shakespeare/tempest-2.txt"}
    assert 0.3 < parts["shakespeare/tempest-1.txt"] < 0.7
    assert parts["shakespeare/tempest-1.txt"] + parts["shakespeare/tempest-2.txt"] >= 0.999


def test_a_single_shared_fingerprint_is_enough_to_be_examined(
        indexed: Store, example_corpus: Path) -> None:
    """A 24-word passage can share just one fingerprint with its document; a better
    matching document elsewhere in the query must not crowd it out."""
    long_passage = _passage(_play(example_corpus, "pericles.txt"), 700, min_words=120)
    sonnets = words(_play(example_corpus, "sonnets.txt"))
    short = " ".join(sonnets[5000:5000 + fp.GUARANTEE_WORDS])
    query = f"{long_passage}\n{BOILERPLATE}\n{short}\n{BOILERPLATE}"
    result = _ask(indexed, query, min_containment=0.0)
    found = {m["doc_id"]: m["spans"] for m in result["matches"]}
    assert "shakespeare/sonnets.txt" in found and "shakespeare/pericles.txt" in found
    (span,) = found["shakespeare/sonnets.txt"]
    assert span["query_words"][1] - span["query_words"][0] >= fp.GUARANTEE_WORDS


def test_unrelated_text_of_the_same_domain_is_not_found(indexed: Store,
                                                        example_corpus: Path) -> None:
    play = _play(example_corpus, "macbeth.txt")  # held out of the corpus
    for first in (200, 900, 1700):
        result = _ask(indexed, _lines(play, first, 30))
        assert result["verdict"] == "not-found", result["matches"][:1]
        assert all(m["containment"] < 0.2 for m in result["matches"])


def test_each_match_carries_its_evidence_and_stream_placement(indexed: Store,
                                                              example_corpus: Path) -> None:
    answer = indexed.trained_on(texts=[_lines(_play(example_corpus, "pericles.txt"), 500, 15)])
    evidence = answer["text_evidence"]
    assert evidence["text_spec"] == "lineage-text/1" and evidence["min_containment"] == 0.5
    assert evidence["unicode_version"] == unicodedata.unidata_version
    assert evidence["fingerprint"] == {"spec": "lineage-fingerprint/1", "k": fp.K, "w": fp.W,
                                       "guarantee_words": fp.W + fp.K - 1}
    match = answer["results"][0]["matches"][0]
    corpus = indexed.corpus("plays")
    assert match["manifest_hash"] == corpus["manifest_hash"]
    assert match["index"] == {"text_spec": "lineage-text/1",
                              "fingerprint_spec": "lineage-fingerprint/1", "k": 5, "w": 20,
                              "unicode_version": unicodedata.unidata_version}
    exact = indexed.trained_on([str(example_corpus / "shakespeare" / "pericles.txt")])
    (placed,) = exact["results"][0]["matches"]
    assert match["content_hash"] == exact["results"][0]["content_hash"]
    assert (match["stream"], match["steps"], match["windows"]) == (
        placed["stream"], placed["steps"], placed["windows"]) and match["steps"]


def test_a_span_names_the_steps_that_held_its_own_tokens(
        indexed: Store, example_corpus: Path) -> None:
    from lineage.stream.reader import StreamReader

    play = (example_corpus / "shakespeare" / "julius_caesar.txt").read_bytes()
    query = _passage(play.decode("utf-8"), 1200, min_words=80)
    match = indexed.trained_on(texts=[query.upper()])["results"][0]["matches"][0]
    (span,) = match["spans"]
    first, last = span["doc_bytes"]
    assert play[first:last].decode("utf-8") == query
    assert span["steps"] and set(span["steps"]) <= set(match["steps"])
    # The trainer-side reader hands out exactly those bytes in exactly those windows.
    reader = StreamReader(indexed, "s")
    held = b"".join(bytes(t for t in window if t < 256)
                    for step in span["steps"] for window in reader.windows(step))
    assert play[first:last] in held


def test_exact_matches_have_containment_one(indexed: Store, corpus_dir: Path) -> None:
    result = indexed.trained_on([str(corpus_dir / "shakespeare" / "sonnets.txt")])["results"][0]
    assert result["verdict"] == "in-stream" and result["containment"] == 1.0
    assert result["matches"][0]["match"] == "exact"


def test_cli_text_stdin_and_exit_codes(indexed: Store, example_corpus: Path) -> None:
    cli = Cli(indexed.root)
    excerpt = _lines(_play(example_corpus, "sonnets.txt"), 100, 10)
    found = cli.json("trained-on", "--text", excerpt)
    assert found["results"][0]["verdict"] == "partial"
    result = cli.runner.invoke(
        __import__("lineage.cli.main", fromlist=["app"]).app,
        ["--store", str(indexed.root), "trained-on", "-", "--json"], input=excerpt)
    assert result.exit_code == 0 and json.loads(result.stdout)["results"][0]["file"] == "<stdin>"
    missing = cli.json("trained-on", "--text", _lines(_play(example_corpus, "macbeth.txt"),
                                                       300, 10), code=1)
    assert missing["results"][0]["verdict"] == "not-found"
    human = cli("trained-on", "--text", excerpt).stdout
    assert "partial, 100% of" in human and "shakespeare/sonnets.txt" in human
    cli("trained-on", code=2)  # nothing to look for


def test_text_queries_need_a_text_index(store: Store, tmp_path: Path, corpus_dir: Path) -> None:
    ingest_corpus(store, [corpus_dir / "debian-copyright"], corpus="plain", fingerprints=False)
    assert store.sql("SELECT count(*) FROM text_indexes").rows == [(0,)]
    with pytest.raises(UsageError, match="no corpus in the store has a text index"):
        store.trained_on(texts=["anything at all"])
    # A file query still gets its exact answer, and no text verdict.
    result = store.trained_on([str(corpus_dir / "debian-copyright" / "apt.txt")])["results"][0]
    assert result["verdict"] == "in-corpus-only"


def test_without_the_document_text_spans_come_from_fingerprints(
        store: Store, tmp_path: Path, example_corpus: Path) -> None:
    folder = tmp_path / "docs"
    shutil.copytree(example_corpus / "shakespeare", folder / "plays",
                    ignore=shutil.ignore_patterns(*HELD_OUT))
    ingest_corpus(store, [folder], corpus="moved")
    (folder / "plays" / "sonnets.txt").unlink()  # the text can no longer be read
    excerpt = _lines(_play(example_corpus, "sonnets.txt"), 500, 30)
    result = _ask(store, excerpt)
    assert result["verdict"] == "partial"
    best = result["matches"][0]
    assert best["doc_id"] == "plays/sonnets.txt" and "text unavailable" in best["note"]
    assert best["spans"] and not any(s["verified"] or s["doc_chars"] for s in best["spans"])
    assert result["containment"] >= 0.5


def test_ready_manifests_opt_in_by_reading_their_uris(
        store: Store, tmp_path: Path, example_corpus: Path) -> None:
    files = sorted((example_corpus / "shakespeare").glob("*.txt"))[:6]
    rows = [{"doc_id": p.name, "source": "plays", "uri": p.resolve().as_uri(),
             "n_bytes": p.stat().st_size, "n_tokens": p.stat().st_size,
             "content_hash": blake3.blake3(p.read_bytes()).hexdigest()} for p in files]
    manifest = write_jsonl(tmp_path / "manifest.jsonl", rows)
    result = ingest_corpus(store, [manifest], corpus="ready", fingerprints=True)
    assert result.text_index and result.text_index["documents"] == 6
    found = _ask(store, _lines(files[2].read_text(encoding="utf-8"), 50, 12))
    assert found["verdict"] == "partial" and found["matches"][0]["doc_id"] == files[2].name
    assert ingest_corpus(store, [manifest], corpus="plain").text_index is None  # default off

    remote = write_jsonl(tmp_path / "remote.jsonl",
                         [{**rows[0], "uri": "https://example.org/a.txt"}])
    with pytest.raises(InputError, match=r"remote.jsonl:record 1: .*not a local file"):
        ingest_corpus(store, [remote], corpus="remote", fingerprints=True)
    changed = tmp_path / "changed.txt"
    changed.write_text("not what the manifest says")
    wrong = write_jsonl(tmp_path / "wrong.jsonl", [{**rows[0], "uri": str(changed)}])
    with pytest.raises(InputError, match="does not match the content_hash"):
        ingest_corpus(store, [wrong], corpus="wrong", fingerprints=True)
    assert [c["name"] for c in store.corpora()] == ["plain", "ready"]


def test_files_that_are_not_text_stay_documents(store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "latin1.txt").write_bytes("caf\xe9 cr\xe8me br\xfbl\xe9e".encode("latin-1"))
    (folder / "utf8.txt").write_text("a plain text of a few words here", encoding="utf-8")
    (folder / "symbols.txt").write_text("... !!! ???", encoding="utf-8")
    result = ingest_corpus(store, [folder], corpus="mixed")
    assert result.documents == 3
    assert result.text_index and (result.text_index["documents"],
                                  result.text_index["not_text"]) == (1, 2)
    whole = _ask(store, "A PLAIN text of a few words HERE!")
    assert whole["verdict"] == "text-match"


def test_a_moved_or_changed_shard_is_an_error_not_an_answer(
        store: Store, tmp_path: Path, example_corpus: Path) -> None:
    records = [{"id": f"p{i}", "text": _lines(_play(example_corpus, "pericles.txt"),
                                              i * 40, 40)} for i in range(5)]
    shard = write_jsonl(tmp_path / "plays.jsonl", records)
    ingest_corpus(store, [shard], corpus="shard")
    query = records[3]["text"].split("\n", 2)[2]
    assert _ask(store, query)["matches"][0]["spans"][0]["verified"]
    write_jsonl(shard, list(reversed(records)))  # other bytes at each recorded offset
    best = _ask(store, query)["matches"][0]
    assert "changed after ingest" in best["note"] and not best["spans"][0]["verified"]
    assert best["doc_id"] == "p3"  # the index still answers, from fingerprints


def test_a_rewritten_parquet_shard_degrades_to_fingerprint_spans(
        store: Store, tmp_path: Path, example_corpus: Path) -> None:
    from .conftest import write_parquet

    texts = [_lines(_play(example_corpus, "tempest.txt"), i * 60, 60) for i in range(4)]
    shard = write_parquet(tmp_path / "plays.parquet", {"id": ["a", "b", "c", "d"],
                                                        "text": texts})
    ingest_corpus(store, [shard], corpus="pq")
    query = texts[2].split("\n", 3)[3]
    assert _ask(store, query)["matches"][0]["spans"][0]["verified"]
    write_parquet(shard, {"id": ["a"], "body": ["no text column any more"]})
    best = _ask(store, query)["matches"][0]
    assert best["doc_id"] == "c" and "changed after ingest" in best["note"]


def test_relative_uris_of_a_manifest_are_resolved_at_ingest(
        store: Store, tmp_path: Path, example_corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "m"
    (folder / "docs").mkdir(parents=True)
    source = example_corpus / "shakespeare" / "lovers_complaint.txt"
    shutil.copy(source, folder / "docs" / "a.txt")
    data = source.read_bytes()
    write_jsonl(folder / "manifest.jsonl", [{
        "doc_id": "a", "source": "s", "uri": "docs/a.txt", "n_bytes": len(data),
        "n_tokens": len(data), "content_hash": blake3.blake3(data).hexdigest()}])
    monkeypatch.chdir(folder)
    ingest_corpus(store, [Path("manifest.jsonl")], corpus="rel", fingerprints=True)
    monkeypatch.chdir(tmp_path.anchor)
    excerpt = _passage(source.read_text(encoding="utf-8"), 40)
    (span,) = _ask(store, excerpt)["matches"][0]["spans"]
    assert span["verified"]


@pytest.fixture(scope="module")
def random_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, list[list[str]]]:
    rng = random.Random(11)
    vocab = [f"w{i}" for i in range(300)]
    docs = [[rng.choice(vocab) for _ in range(rng.randrange(30, 400))] for _ in range(40)]
    root = tmp_path_factory.mktemp("random") / "store"
    init_store(root)
    store = open_store(root)
    shard = write_jsonl(root.parent / "docs.jsonl",
                        [{"id": f"d{i:02d}", "text": " ".join(d)} for i, d in enumerate(docs)])
    ingest_corpus(store, [shard], corpus="random")
    return store, docs


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_any_excerpt_of_w_plus_k_minus_1_words_is_found_in_the_store(
        random_store: tuple[Store, list[list[str]]], data: st.DataObject) -> None:
    store, docs = random_store
    number = data.draw(st.integers(0, len(docs) - 1))
    doc = docs[number]
    length = data.draw(st.integers(fp.GUARANTEE_WORDS, len(doc)))
    start = data.draw(st.integers(0, len(doc) - length))
    before = data.draw(st.lists(st.sampled_from(["noise", "other", "words"]), max_size=40))
    query = before + doc[start:start + length]
    result = _ask(store, " ".join(query), min_containment=0.0)
    mine = [m for m in result["matches"] if m["doc_id"] == f"d{number:02d}"]
    if query == doc:  # the document's own bytes: found by them, as an exact match
        assert [m["match"] for m in mine] == ["exact"], result
        return
    spans = [s for m in mine for s in m["spans"]]
    assert [len(before), len(query)] in [s["query_words"] for s in spans], result


def test_corpus_show_describes_the_text_index(indexed: Store) -> None:
    index = indexed.corpus("plays")["text_index"]
    words_in = indexed.sql("SELECT sum(n_words) FROM text_documents").rows[0][0]
    rows = indexed.sql("SELECT count(*) FROM fingerprints").rows[0][0]
    assert (index["words"], index["fingerprints"], index["k"], index["w"]) == (
        words_in, rows, 5, 20)
    assert 0 < index["index_bytes"] < 0.2 * index["text_bytes"]
    human = Cli(indexed.root)("corpus", "show", "plays").stdout
    assert f"text index  {rows:,} fingerprints" in human


def test_store_verify_covers_the_text_tables(indexed: Store) -> None:
    report = indexed.verify()
    assert report["ok"]
    tables = {row[0] for row in indexed.sql(
        "SELECT DISTINCT table_name FROM parquet_files").rows}
    assert {"fingerprints", "text_documents", "text_hashes"} <= tables


def test_a_changed_index_spec_is_refused(indexed: Store, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(indexed.root, copy)
    import duckdb

    con = duckdb.connect(str(copy / "catalog.duckdb"))
    con.execute("UPDATE text_indexes SET w = 8")
    con.close()
    with pytest.raises(StoreError, match="k=5, w=8"):
        open_store(copy).trained_on(texts=["some words to look for in the plays"])


def _copy_with_unicode_version(indexed: Store, copy: Path, version: str | None) -> Store:
    """A copy of the store whose text index says it was built under `version`."""
    import duckdb

    shutil.copytree(indexed.root, copy)
    con = duckdb.connect(str(copy / "catalog.duckdb"))
    con.execute("UPDATE text_indexes SET unicode_version = ?", [version])
    con.close()
    return open_store(copy)


def test_an_index_of_another_unicode_version_is_not_queried(
        indexed: Store, tmp_path: Path, example_corpus: Path) -> None:
    store = _copy_with_unicode_version(indexed, tmp_path / "copy", "13.0.0")
    quote = _lines(_play(example_corpus, "pericles.txt"), 500, 15)
    result = Cli(store.root)("trained-on", "--text", quote, code=2)
    assert result.stderr.count("\n") == 1
    assert (f"corpus 'plays' was text-indexed under Unicode 13.0.0 and this Python normalizes "
            f"under Unicode {unicodedata.unidata_version}") in result.stderr
    # Exact bytes do not depend on Unicode: file lookups still answer.
    exact = store.trained_on([str(example_corpus / "shakespeare" / "pericles.txt")])
    assert exact["results"][0]["verdict"] == "in-stream"


def test_an_index_without_a_recorded_unicode_version_is_queried_and_says_so(
        indexed: Store, tmp_path: Path, example_corpus: Path) -> None:
    store = _copy_with_unicode_version(indexed, tmp_path / "copy", None)
    quote = _lines(_play(example_corpus, "pericles.txt"), 500, 15)
    answer = store.trained_on(texts=[quote])
    assert answer["text_evidence"]["unicode_version"] == unicodedata.unidata_version
    (best, *_) = answer["results"][0]["matches"]
    assert best["doc_id"] == "shakespeare/pericles.txt"
    assert best["index"]["unicode_version"] is None


def test_a_store_does_not_mix_text_indexes_of_two_unicode_versions(
        indexed: Store, tmp_path: Path) -> None:
    store = _copy_with_unicode_version(indexed, tmp_path / "copy", "13.0.0")
    shard = tmp_path / "more.jsonl"
    write_jsonl(shard, [{"id": "a", "text": "a new document of a few words"}])
    cli = Cli(store.root)
    result = cli("ingest", "corpus", str(shard), "--corpus", "more", code=2)
    assert "to build another text index in this store, run lineage on a Python whose " \
        "unicodedata.unidata_version is 13.0.0; or ingest with --no-fingerprints" in result.stderr
    assert store.corpora() == indexed.corpora()  # nothing was written
    cli("ingest", "corpus", str(shard), "--corpus", "more", "--no-fingerprints")
    assert [c["name"] for c in store.corpora()] == ["more", "plays"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "é", "B"]), st.integers(0, 2**64 - 1),
                          st.integers(0, 12), st.integers(0, 300)), max_size=300),
       st.integers(1, 6), st.integers(0, 4))
def test_hits_ranked_in_python_are_the_rows_the_ranking_query_gives(
        hits: list[tuple[str, int, int, int]], limit: int, repeats: int) -> None:
    """A text's fingerprint hits are ranked in Python when they are few, in DuckDB when
    they are many: both give the same rows, in the same order. Hits repeat a few
    fingerprints many times, so that the cap on positions per fingerprint is reached."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lineage.schemas import fingerprints_schema
    from lineage.text import match

    hits = hits + [(c, 7, d, p + i) for c, _, d, p in hits[:repeats] for i in range(70)]
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "fingerprints.parquet")
        pq.write_table(pa.Table.from_pylist(
            [dict(zip(("corpus", "fingerprint", "doc", "position"), h, strict=True))
             for h in hits], schema=fingerprints_schema()), path)
        probes = sorted({h[1] for h in hits}) or [1]
        with duckdb.connect() as con:
            assert match.ranked_hits(hits, limit) == \
                match.ranked_in_sql(con, [path], probes, limit)
