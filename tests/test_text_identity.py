"""lineage-text/1 and lineage-fingerprint/1 without a store: the rules, the golden
vectors, the vectorized path against the reference, and the winnowing guarantee."""

from __future__ import annotations

import json
import random
from pathlib import Path

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.text import fingerprint as fp
from lineage.text.identity import located_words, normalize, text_hash, words

GOLDEN = Path(__file__).parent / "golden" / "text" / "vectors-1.json"
WINNOW_GOLDEN = GOLDEN.with_name("winnow-1.json")  # hash lists with ties


def test_normalization_rules() -> None:
    # NFKC (ligature, full-width, superscript), full case folding, invisible characters.
    assert words("ﬁne ＷＯＲＤＳ x² Straße") == ["fine", "words", "x2", "strasse"]
    assert words("co\u00adoper\u200bate\ufeff") == ["cooperate"]
    # Punctuation, symbols, underscores and combining marks separate words.
    assert words("don't—stop_it! «quoted» a+b=c") == ["don", "t", "stop", "it", "quoted",
                                                     "a", "b", "c"]
    assert normalize("  Hello,\r\n\tWORLD!  ") == "hello world"
    assert text_hash("...!") is None
    assert text_hash("Hello, World") == blake3.blake3(b"hello world").hexdigest()


def test_golden_vectors() -> None:
    """Pinned outputs of both specs: changing them needs a new spec version."""
    cases = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert len(cases) >= 3
    for case in cases:
        found = words(case["text"])
        assert " ".join(found) == case["normalized"]
        assert text_hash(case["text"]) == case["text_hash"]
        assert fp.gram_hashes(found)[:8] == case["first_gram_hashes"]
        assert [list(p) for p in fp.fingerprints(found)] == case["fingerprints"]
    assert any(len(set(fp.gram_hashes(words(c["text"])))) < len(words(c["text"])) - fp.K + 1
               for c in cases), "the vectors include texts whose grams repeat (ties)"
    for case in json.loads(WINNOW_GOLDEN.read_text(encoding="utf-8")):
        assert [list(p) for p in fp.winnow(case["hashes"], case["w"])] == case["selected"]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_located_words_are_the_words_with_their_chunks(text: str) -> None:
    located = located_words(text)
    assert located.words == words(text)
    for word, start, end in zip(located.words, located.starts, located.ends, strict=True):
        assert word in normalize(text[start:end]).split(" ")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_normalization_is_idempotent(text: str) -> None:
    assert normalize(normalize(text)) == normalize(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyzäöüéß'", min_size=1), max_size=40),
       st.randoms(use_true_random=False))
def test_rewrapping_and_case_do_not_change_the_text_hash(
        pieces: list[str], rng: random.Random) -> None:
    text = " ".join(pieces)
    gaps = [rng.choice([" ", "\n", "\t", "  ", "\u00a0", "\r\n", " \n  "]) for _ in pieces]
    wrapped = "".join(gap + piece for gap, piece in zip(gaps, pieces, strict=True))
    assert text_hash(wrapped.upper()) == text_hash(text)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "b", "c", "dé", "ß", "x1"]), max_size=90),
                max_size=8))
def test_vectorized_fingerprints_equal_the_reference(texts: list[list[str]]) -> None:
    normalized = [" ".join(t) for t in texts]
    batch = fp.fingerprint_batch(normalized)
    got = sorted(zip(batch.text.tolist(), batch.position.tolist(),
                     batch.fingerprint.tolist(), strict=True))
    want = sorted((i, p, h) for i, t in enumerate(texts) for p, h in fp.fingerprints(t))
    assert got == want


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_shared_passage_of_w_plus_k_minus_1_words_is_found(data: st.DataObject) -> None:
    vocab = [f"w{i}" for i in range(data.draw(st.integers(2, 400)))]
    doc = data.draw(st.lists(st.sampled_from(vocab), min_size=fp.GUARANTEE_WORDS,
                             max_size=400))
    length = data.draw(st.integers(fp.GUARANTEE_WORDS, len(doc)))
    start = data.draw(st.integers(0, len(doc) - length))
    noise = data.draw(st.lists(st.sampled_from(["n1", "n2", "n3"]), max_size=60))
    cut = data.draw(st.integers(0, len(noise)))
    query = noise[:cut] + doc[start:start + length] + noise[cut:]
    kept = {h for _, h in fp.fingerprints(doc)}
    assert kept & {h for _, h in fp.fingerprints(query)}


def test_density_is_about_two_in_w_plus_one() -> None:
    rng = random.Random(5)
    text = [f"w{rng.randrange(50_000)}" for _ in range(100_000)]
    density = len(fp.fingerprints(text)) / len(text)
    assert abs(density - 2 / (fp.W + 1)) < 0.01


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_the_ascii_path_finds_the_same_words_as_the_general_one(text: str) -> None:
    from lineage.text.identity import _WORD, fold

    assert words(text) == _WORD.findall(fold(text))


def test_long_texts_are_fingerprinted_in_chunks_with_the_same_picks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    from lineage.ingest import text_index

    monkeypatch.setattr(text_index, "LONG_TEXT_WORDS", 300)
    rng = random.Random(9)
    texts = [" ".join(f"w{rng.randrange(200)}" for _ in range(n)) for n in (2000, 301, 50)]
    with text_index.TextIndexer(tmp_path / "fp.parquet") as indexer:
        indexer.identities(["long", "just-long", "short"], texts)
    staged = pq.read_table(tmp_path / "fp.parquet").to_pylist()
    for doc_id, text in zip(["long", "just-long", "short"], texts, strict=True):
        got = sorted((r["position"], r["fingerprint"]) for r in staged if r["doc_id"] == doc_id)
        assert got == fp.fingerprints(text.split()), doc_id


def test_long_queries_take_the_vectorized_path_with_the_same_values() -> None:
    rng = random.Random(4)
    text = [rng.choice(["a", "bé", "c", "dd", "x1", "ß"]) for _ in range(30_000)]
    grams = fp.gram_hashes(text)
    assert fp.gram_hashes_many(text) == grams
    assert fp.winnow_many(grams) == fp.winnow(grams)
