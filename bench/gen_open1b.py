"""Synthetic ready manifests shaped like Open-1B's corpus.

    python bench/gen_open1b.py --documents 10000000 --out /work/bench-stores/open1b-10m/manifest

SYNTHETIC: no document, identifier or hash comes from the real corpus. What is taken from
it is the shape: the published run trained on 332.2M documents and 450.5B tokens from four
sources whose shares of the TOKENS are DCLM baseline 66.7 %, FineWeb-Edu 13.3 %, The Stack
v2 12.0 % and Proof-Pile-2 8.0 %. The shares of the DOCUMENTS are not published; this
generator assumes 70 / 14 / 13 / 3 % (Proof-Pile-2's papers and code files are long),
which makes the mean document of each source

    source          docs   mean tokens   sigma   bytes/token
    dclm-baseline   70 %   1,292          1.0     4.3
    fineweb-edu     14 %   1,288          0.9     4.6
    the-stack-v2    13 %   1,252          1.3     3.1
    proof-pile-2     3 %   3,616          1.4     3.4

Each source's token counts are log-normal with that sigma, clipped to [16, 200,000]; the
median is solved (bisection on the clipped log-normal's exact mean) so that the clipped
mean is the one above. So 332.2M documents hold ~450.5B tokens (1,356.1 a document) in
the token shares above, and every size keeps the same mean and shares (a 10M manifest
holds ~13.56B tokens). `n_bytes` is the source's bytes per token with +-10 % jitter.

Rows, columns, doc_id order and content hashes are bench/gen_manifest.py's (its
`make_shard`, with these sources): a pure function of (`--seed`, `--documents`,
`--shards`), written one shard at a time, so memory is one shard's (2.5M rows a shard
by default: about 1 GB at the peak, whatever the size).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_manifest import MAX_TOKENS, MIN_TOKENS, Source, generate  # noqa: E402

OPEN1B_DOCUMENTS = 332_200_000
OPEN1B_TOKENS = 450_500_000_000
ROWS_PER_SHARD = 2_500_000

# (name, share of documents, share of tokens, sigma, bytes per token, licence)
_SHAPE: tuple[tuple[str, float, float, float, float, str], ...] = (
    ("dclm-baseline", 0.70, 0.667, 1.0, 4.3, "CC-BY-4.0"),
    ("fineweb-edu", 0.14, 0.133, 0.9, 4.6, "ODC-By-1.0"),
    ("the-stack-v2", 0.13, 0.120, 1.3, 3.1, "Apache-2.0"),
    ("proof-pile-2", 0.03, 0.080, 1.4, 3.4, "MIT"),
)


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def clipped_mean(mu: float, sigma: float, lo: float = MIN_TOKENS,
                 hi: float = MAX_TOKENS) -> float:
    """E[clip(X, lo, hi)] for ln X ~ N(mu, sigma^2)."""
    a, b = (math.log(lo) - mu) / sigma, (math.log(hi) - mu) / sigma
    inside = math.exp(mu + sigma**2 / 2) * (_phi(b - sigma) - _phi(a - sigma))
    return lo * _phi(a) + hi * (1.0 - _phi(b)) + inside


def median_for(mean: float, sigma: float) -> float:
    """The median whose clipped log-normal has this mean (the mean grows with the median)."""
    lo, hi = math.log(MIN_TOKENS), math.log(MAX_TOKENS)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if clipped_mean(mid, sigma) < mean else (lo, mid)
    return math.exp((lo + hi) / 2)


def open1b_sources() -> tuple[Source, ...]:
    per_doc = OPEN1B_TOKENS / OPEN1B_DOCUMENTS
    return tuple(
        Source(name, doc_share, median_for(per_doc * token_share / doc_share, sigma),
               licence, sigma=sigma, bytes_per_token=bpt)
        for name, doc_share, token_share, sigma, bpt, licence in _SHAPE)


OPEN1B: tuple[Source, ...] = open1b_sources()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=OPEN1B_DOCUMENTS)
    parser.add_argument("--shards", type=int,
                        help=f"default: one per {ROWS_PER_SHARD:,} documents")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    shards = args.shards or max(1, math.ceil(args.documents / ROWS_PER_SHARD))
    started = time.perf_counter()
    paths = generate(args.documents, shards, "parquet", args.out, args.seed, sources=OPEN1B,
                     generator="bench/gen_open1b.py")
    size = sum(p.stat().st_size for p in paths)
    print(f"wrote {args.documents:,} rows in {len(paths)} parquet shards "
          f"({size / 1e6:,.1f} MB) to {args.out} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
