"""docs/text-spec.md's plain reference (tests/text_reference.py) against the fast code:
random text, hash lists full of ties, and the whole example corpus as ingested."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.ingest import ingest_corpus
from lineage.text import fingerprint as fp
from lineage.text.identity import located_words, normalize, text_hash, words

from . import text_reference as ref

GOLDEN = Path(__file__).parent / "golden" / "text" / "vectors-1.json"
WINNOW_GOLDEN = Path(__file__).parent / "golden" / "text" / "winnow-1.json"


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_words_and_text_hash_follow_the_spec(text: str) -> None:
    assert words(text) == ref.words(text)
    assert normalize(text) == ref.normalized(text)
    assert text_hash(text) == ref.text_hash(text)
    assert located_words(text).words == ref.words(text)


# Text as documents hold it: mostly ASCII words, punctuation and every kind of whitespace.
_DOCUMENT_TEXT = st.lists(st.sampled_from(
    [*"abcXYZ019", *" \t\n\r\x0b\x0c\x1c\x1f", *"'-_.,;\"!", "don't", "co-op", " \n ",
     "é", "ß", "\u00a0", "\u2019", "\u00ad", "ﬁ"])).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), _DOCUMENT_TEXT, _DOCUMENT_TEXT.filter(str.isascii)))
def test_located_words_equal_the_reference(text: str) -> None:
    """The array path (an ASCII text) and the chunk-by-chunk path (any other) both give
    each word its chunk's offsets, as the plain reference does."""
    located = located_words(text)
    found = [(word, *located.char_span(i, i + 1)) for i, word in enumerate(located.words)]
    assert found == ref.located_words(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(
    "aAzZ09 _-'\u00ad\u200b\ufeff\u00df\u0130\u03a3\u03c2\ufb01\uff21\u00b2\u2167\u0301"
    "e\u00e9\u1e9e\u2460\u3000\u6771\u0e01\t\n")))
def test_the_characters_the_rules_single_out_follow_the_spec(text: str) -> None:
    # Invisible characters, ß/ẞ, dotted İ, final sigma, ligatures, full-width, superscripts,
    # Roman numerals, combining accents, circled digits, ideographic space, CJK, Thai.
    assert words(text) == ref.words(text)


def test_the_word_rule_is_str_isalnum_for_every_code_point() -> None:
    # The spec defines words by general category and numeric value; the code uses
    # str.isalnum (through the regex [^\W_]). They agree on every character of this
    # Python's Unicode version.
    import re

    word = re.compile(r"[^\W_]")
    for code in range(0x110000):
        ch = chr(code)
        assert ref.is_word_character(ch) == ch.isalnum() == bool(word.match(ch)), hex(code)


_few_words = st.lists(st.sampled_from(["a", "b", "dé", "ß", "x1"]), max_size=120)


@settings(max_examples=300, deadline=None)
@given(_few_words)
def test_gram_hashes_and_winnowing_follow_the_spec(text_words: list[str]) -> None:
    # Five words make few distinct grams: repeated minimal hashes (ties) are common.
    hashes = ref.gram_hashes(text_words)
    assert fp.gram_hashes(text_words) == hashes
    assert fp.fingerprints(text_words) == ref.winnow(hashes)


@settings(max_examples=100, deadline=None)
@given(st.lists(_few_words, max_size=6))
def test_the_vectorized_batch_follows_the_spec(texts: list[list[str]]) -> None:
    batch = fp.fingerprint_batch([" ".join(t) for t in texts])
    got = sorted(zip(batch.text.tolist(), batch.position.tolist(),
                     batch.fingerprint.tolist(), strict=True))
    want = [(i, p, h) for i, t in enumerate(texts) for p, h in ref.winnow(ref.gram_hashes(t))]
    assert got == want


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=80), st.integers(1, 25))
def test_winnowing_of_hash_lists_full_of_ties_follows_the_spec(
        hashes: list[int], w: int) -> None:
    assert fp.winnow(hashes, w) == ref.winnow(hashes, w)


def test_long_inputs_take_the_vectorized_paths_with_the_spec_values() -> None:
    text_words = (["a", "b", "a", "b", "c"] * 5000)[:24_000]  # periodic: ties everywhere
    hashes = ref.gram_hashes(text_words)
    assert fp.gram_hashes_many(text_words) == hashes
    assert fp.winnow_many(hashes) == ref.winnow(hashes)


def test_golden_vectors_follow_the_spec() -> None:
    for case in json.loads(GOLDEN.read_text(encoding="utf-8")):
        assert ref.normalized(case["text"]) == case["normalized"]
        assert ref.text_hash(case["text"]) == case["text_hash"]
        text_words = ref.words(case["text"])
        assert ref.gram_hashes(text_words)[:8] == case["first_gram_hashes"]
        assert [list(p) for p in ref.winnow(ref.gram_hashes(text_words))] == \
            case["fingerprints"]
    for case in json.loads(WINNOW_GOLDEN.read_text(encoding="utf-8")):
        assert [list(p) for p in ref.winnow(case["hashes"], case["w"])] == case["selected"]
        assert [list(p) for p in ref.robust_winnow(case["hashes"], case["w"])] == \
            case["robust_winnowing_would_select"]


@pytest.fixture(scope="module")
def example_store(tmp_path_factory: pytest.TempPathFactory, example_corpus: Path) -> Store:
    root = tmp_path_factory.mktemp("text-reference") / "store"
    init_store(root)
    store = open_store(root)
    ingest_corpus(store, [example_corpus], corpus="example")
    return store


def test_the_example_corpus_as_ingested_follows_the_spec(example_store: Store) -> None:
    """Every document's text hash, word count and fingerprints, as the ingest stored them
    (the vectorized batch path), equal the reference computed from the file."""
    documents = example_store.sql(
        "SELECT doc, doc_id, text_hash, n_words, origin FROM text_documents ORDER BY doc").rows
    stored: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for doc, position, fingerprint in example_store.sql(
            "SELECT doc, position, fingerprint FROM fingerprints").rows:
        stored[doc].append((position, fingerprint))
    assert len(documents) == 279
    differ_from_robust = 0
    for doc, doc_id, digest, n_words, origin in documents:
        text = Path(origin).read_bytes().decode("utf-8")
        text_words = ref.words(text)
        assert (digest, n_words) == (ref.text_hash(text), len(text_words)), doc_id
        hashes = ref.gram_hashes(text_words)
        assert sorted(stored[doc]) == ref.winnow(hashes), doc_id
        differ_from_robust += ref.winnow(hashes) != ref.robust_winnow(hashes)
    # docs/text-spec.md: robust winnowing would select otherwise in 10 of the 279.
    assert differ_from_robust == 10
