"""`lineage-near/1`: golden vectors re-derived by a plain reference, batch = plain."""

from __future__ import annotations

import json
import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.text.identity import normalize
from lineage.text.minhash import (
    BANDS,
    BINS,
    band_keys,
    estimate,
    signature,
    signature_batch,
)
from tests import near_reference

GOLDEN = Path(__file__).parent / "golden" / "near" / "near-1.json"
WORDS = ["shall", "i", "compare", "thee", "Summer’s", "DAY", "straße", "café", "1984", "a"]


def test_golden_vectors_follow_the_spec() -> None:
    vectors = json.loads(GOLDEN.read_text("utf-8"))
    assert any(v["signature"] is None for v in vectors)
    for vector in vectors:
        sig = near_reference.signature(vector["text"])
        assert sig == vector["signature"], vector["text"]
        if sig is not None:
            assert len(sig) == BINS
            assert near_reference.band_keys(sig) == vector["band_keys"]


def test_lineage_matches_the_golden_vectors() -> None:
    for vector in json.loads(GOLDEN.read_text("utf-8")):
        words = normalize(vector["text"]).split()
        assert signature(words) == vector["signature"]
        if vector["signature"] is not None:
            assert band_keys(vector["signature"]) == vector["band_keys"]


texts = st.lists(st.sampled_from(WORDS + ["the", "x"]), max_size=40).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(st.lists(texts, min_size=1, max_size=12), st.integers(1, 5))
def test_batch_equals_plain_whatever_the_split(batch: list[str], parts: int) -> None:
    """Band keys depend on the text alone: not on its batch, nor on how work is split."""
    normals = [normalize(t) for t in batch]
    got: dict[int, tuple[list[int], list[int]]] = {}
    size = max(1, len(normals) // parts)
    for start in range(0, len(normals), size):
        found = signature_batch(normals[start:start + size])
        for i, sig, keys in zip(found.text.tolist(), found.signature, found.band_keys,
                                strict=True):
            got[start + i] = (sig.tolist(), keys.tolist())
    for i, normal in enumerate(normals):
        sig = signature(normal.split())
        assert (got.get(i) is None) == (sig is None)
        if sig is not None:
            assert got[i] == (sig, band_keys(sig))
            assert len(got[i][1]) == BANDS


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=30),
       st.lists(st.sampled_from([" ", "  ", "\n", "\t", " -- ", "… "]), min_size=30,
                max_size=30), st.booleans())
def test_signature_ignores_whitespace_case_and_punctuation(
    words: list[str], gaps: list[str], upper: bool
) -> None:
    plain = " ".join(words)
    messy = "".join(w.upper() if upper else w for w in _interleave(words, gaps))
    assert near_reference.signature(messy) == near_reference.signature(plain)
    assert signature(normalize(messy).split()) == signature(normalize(plain).split())


def _interleave(words: list[str], gaps: list[str]) -> list[str]:
    out = []
    for word, gap in zip(words, gaps, strict=False):
        out += [word, gap]
    return out


def test_estimate_tracks_the_exact_jaccard() -> None:
    """The share of equal minima is within 4 standard deviations of the true Jaccard."""
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(400)]
    for _ in range(40):
        base = [rng.choice(vocabulary) for _ in range(300)]
        copy = [w if rng.random() > rng.choice([0.05, 0.2, 0.5]) else rng.choice(vocabulary)
                for w in base]
        a = near_reference.shingle_set(" ".join(base))
        b = near_reference.shingle_set(" ".join(copy))
        exact = len(a & b) / len(a | b)
        sa, sb = signature(base), signature(copy)
        assert sa is not None and sb is not None
        sigma = (exact * (1 - exact) / BINS) ** 0.5
        assert abs(estimate(sa, sb) - exact) <= 4 * sigma + 1e-9
