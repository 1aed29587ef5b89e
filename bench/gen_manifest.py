"""Synthetic ready manifests for the corpus-ingest benchmarks.

    python bench/gen_manifest.py --documents 10000000 --shards 16 --format parquet \
        --out /tmp/lineage-bench/manifest-10m-parquet [--seed 0]

Rows have the columns of a ready manifest (`doc_id, source, uri, n_bytes, n_tokens,
content_hash, license`) and look like a pretraining mix:

* four sources with fixed shares: web 66.7 %, edu 13.3 %, code 12 %, math 8 %;
* token counts log-normal (median ~500 overall, sigma 1.1, so a long tail), clipped to
  [16, 200 000]; `n_bytes` is about 4.2 bytes per token (uniform jitter of +-10 %);
* unique `doc_id`s (`<source>/<10-digit permuted index>-<16 hex>`) in an order unrelated
  to their sort order, so the ingest's sort by `doc_id` has real work to do;
* a random 64-hex `content_hash` per row (BLAKE3 XOF output, not the hash of any text);
* a licence per source.

Everything is a pure function of (`--seed`, `--documents`, `--shards`): the same arguments
give byte-identical files. Vectorised with pyarrow and polars (numpy is not a dependency);
one shard is in memory at a time. Other mixes pass their own `Source`s to `generate`
(each with its share of documents, log-normal median and sigma, bytes per token and
licence): bench/gen_open1b.py is Open-1B's.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import blake3
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


@dataclass(frozen=True)
class Source:
    """One source of a synthetic mix: its share of documents and its token counts'
    log-normal (median, sigma), clipped to [MIN_TOKENS, MAX_TOKENS]."""

    name: str
    share: float
    median: float
    licence: str
    sigma: float = 1.1
    bytes_per_token: float = 4.2


SOURCES: tuple[Source, ...] = (
    Source("web", 0.667, 480.0, "ODC-By-1.0"),
    Source("edu", 0.133, 650.0, "ODC-By-1.0"),
    Source("code", 0.120, 420.0, "Apache-2.0"),
    Source("math", 0.080, 560.0, "CC-BY-4.0"),
)
MIN_TOKENS, MAX_TOKENS = 16, 200_000
_MULTIPLIER = 2_654_435_761  # Knuth's multiplicative constant; made coprime with N below


def _seed_for(seed: int, shard: int, stream: int) -> int:
    """A 63-bit seed for one random stream of one shard, derived by BLAKE3."""
    digest = blake3.blake3(f"lineage-bench/{seed}/{shard}/{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def _uniform(n: int, seed: int) -> pl.Series:
    return pl.from_arrow(pc.random(n, initializer=seed))  # type: ignore[return-value]


def _hex_column(n: int, width_bytes: int, seed: int, shard: int, stream: str) -> pa.Array:
    """n random lowercase hex strings of 2*width_bytes characters each."""
    raw = blake3.blake3(f"lineage-bench/{seed}/{shard}/{stream}".encode()).digest(
        length=n * width_bytes
    )
    data = pa.py_buffer(raw.hex().encode("ascii"))
    width = 2 * width_bytes
    offsets = pl.int_range(0, width * (n + 1), width, dtype=pl.Int64, eager=True).to_arrow()
    return pa.Array.from_buffers(pa.large_string(), n, [None, offsets.buffers()[1], data])


def _permutation_params(total: int, seed: int) -> tuple[int, int]:
    mult = _MULTIPLIER
    while math.gcd(mult, total) != 1:
        mult += 2
    offset = _seed_for(seed, -1, 0) % max(total, 1)
    return mult, offset


def _per_source(sources: Sequence[Source], values: list[object]) -> pl.Expr:
    """values[k] on the rows of sources[k]: the sources' cumulative shares cut the
    uniform column `us`, the last source takes the rest."""
    expr = pl.lit(values[-1])
    cumulative = 0.0
    bounds = []
    for source, value in zip(sources[:-1], values[:-1], strict=True):
        cumulative += source.share
        bounds.append((cumulative, value))
    for bound, value in reversed(bounds):
        expr = pl.when(pl.col("us") < bound).then(pl.lit(value)).otherwise(expr)
    return expr


def make_shard(*, start: int, count: int, total: int, shard: int, seed: int,
               sources: Sequence[Source] = SOURCES) -> pa.Table:
    """Rows [start, start + count) of a `total`-row manifest, as an Arrow table."""
    mult, offset = _permutation_params(total, seed)
    u_source = _uniform(count, _seed_for(seed, shard, 1))
    u1 = _uniform(count, _seed_for(seed, shard, 2))
    u2 = _uniform(count, _seed_for(seed, shard, 3))
    u_bytes = _uniform(count, _seed_for(seed, shard, 4))
    index = pl.int_range(start, start + count, dtype=pl.Int64, eager=True)

    df = pl.DataFrame({"i": index, "us": u_source, "u1": u1, "u2": u2, "ub": u_bytes})
    source_expr = _per_source(sources, [x.name for x in sources])
    median_expr = _per_source(sources, [x.median for x in sources])
    sigma_expr = _per_source(sources, [x.sigma for x in sources])
    bpt_expr = _per_source(sources, [x.bytes_per_token for x in sources])
    licence_expr = _per_source(sources, [x.licence for x in sources])
    # Box-Muller: z ~ N(0, 1); 1 - u1 is in (0, 1], so the log is finite.
    z = (-2.0 * (1.0 - pl.col("u1")).log()).sqrt() * (2.0 * math.pi * pl.col("u2")).cos()
    tokens = (median_expr.log() + sigma_expr * z).exp().round().clip(MIN_TOKENS, MAX_TOKENS)
    perm = (pl.col("i") * mult + offset) % total
    df = df.select(
        source=source_expr,
        perm=perm.cast(pl.String).str.zfill(10),
        i=pl.col("i"),
        n_tokens=tokens.cast(pl.Int64),
        jitter=0.9 + 0.2 * pl.col("ub"),
        bpt=bpt_expr,
        license=licence_expr,
    )
    df = df.with_columns(
        id_tail=pl.from_arrow(_hex_column(count, 8, seed, shard, "doc_id")),  # type: ignore[arg-type]
        content_hash=pl.from_arrow(_hex_column(count, 32, seed, shard, "content")),  # type: ignore[arg-type]
    )
    df = df.select(
        doc_id=pl.concat_str([pl.col("source"), pl.lit("/"), pl.col("perm"), pl.lit("-"),
                              pl.col("id_tail")]),
        source=pl.col("source"),
        uri=pl.concat_str([pl.lit("s3://corpus-bucket/raw/"), pl.col("source"),
                           pl.lit(f"/shard-{shard:05d}.jsonl.zst#"),
                           (pl.col("i") - start).cast(pl.String)]),
        n_bytes=(pl.col("n_tokens") * pl.col("bpt") * pl.col("jitter")).round().cast(pl.Int64),
        n_tokens=pl.col("n_tokens"),
        content_hash=pl.col("content_hash"),
        license=pl.col("license"),
    )
    return df.to_arrow()


def shard_bounds(documents: int, shards: int) -> list[tuple[int, int]]:
    """(start, count) of each shard: as even as possible, first shards one row larger."""
    base, extra = divmod(documents, shards)
    bounds, start = [], 0
    for k in range(shards):
        count = base + (1 if k < extra else 0)
        bounds.append((start, count))
        start += count
    return bounds


def write_shard(table: pa.Table, path: Path, fmt: str) -> None:
    tmp = path.with_name(path.name + ".partial")
    if fmt == "parquet":
        pq.write_table(table, tmp, compression="zstd")
    else:
        pl.from_arrow(table).write_ndjson(tmp)  # type: ignore[union-attr]
    tmp.replace(path)


def generate(documents: int, shards: int, fmt: str, out: Path, seed: int = 0,
             sources: Sequence[Source] = SOURCES,
             generator: str = "bench/gen_manifest.py") -> list[Path]:
    """Write the manifest shards into `out` (created), one shard in memory at a time;
    returns their paths."""
    if fmt not in ("parquet", "jsonl"):
        raise ValueError(f"format must be parquet or jsonl, not {fmt!r}")
    if documents < 1 or shards < 1 or shards > documents:
        raise ValueError("need 1 <= shards <= documents")
    out.mkdir(parents=True, exist_ok=True)
    suffix = "parquet" if fmt == "parquet" else "jsonl"
    paths = []
    for k, (start, count) in enumerate(shard_bounds(documents, shards)):
        path = out / f"manifest-{k:05d}.{suffix}"
        write_shard(make_shard(start=start, count=count, total=documents, shard=k, seed=seed,
                               sources=sources), path, fmt)
        paths.append(path)
    (out / "SPEC.json").write_text(json.dumps(
        {"generator": generator, "documents": documents, "shards": shards,
         "format": fmt, "seed": seed}, sort_keys=True) + "\n")
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, required=True)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    paths = generate(args.documents, args.shards, args.format, args.out, args.seed)
    size = sum(p.stat().st_size for p in paths)
    print(f"wrote {args.documents:,} rows in {len(paths)} {args.format} shards "
          f"({size / 1e6:,.1f} MB) to {args.out} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
