"""Write a small Open-1B harness run: what the open-transformers trainer leaves behind
(docs/importers.md, "The Open-1B harness"), from real public-domain text.

    python tests/orders/make_harness_run.py [OUT_DIR]   (default: tests/orders/fixtures/harness)

Documents: the first 40 of Shakespeare's sonnets (two shards) and the five shortest
poems of examples/shards/poems.parquet (one shard), tokenized as the harness's byte
tokenizer does (UTF-8 bytes, ids 0-255) with an end-of-document token 256 appended to
each, written as Megatron indexed datasets (`.bin/.idx`, uint16) by megatron-core's
`IndexedDatasetBuilder` when it is installed, else by `write_indexed` below (the same
bytes: the layout is in ingest/orders/indexed.py). The trainer's order: each pass over
the documents is a seeded permutation, the passes are concatenated and cut into windows
of SEQ_LEN tokens; a step takes the windows the global-batch ramp gives at the tokens
consumed so far; micro-batch m of a step (MICRO_BATCH windows) goes to rank m mod WORLD.
Only whole steps are trained. The doc_map records every segment of every window.
"""

from __future__ import annotations

import gzip
import json
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "shards"
SEQ_LEN = 256
MICRO_BATCH = 2
WORLD = 2
RAMP = [[0, 4], [16_384, 8]]  # [tokens consumed from, windows per step]
SEED = 1234
PASSES = 2
EOD = 256
MAGIC = b"MMIDIDX\x00\x00"


def corpus_records() -> dict[str, list[tuple[str, str]]]:
    """(doc_id, text) per shard, as the corpus ingest reads them (`id` and `text`)."""
    lines = gzip.decompress((EXAMPLES / "sonnets.jsonl.gz").read_bytes()).splitlines()
    sonnets = [(r["id"], r["text"]) for r in map(json.loads, lines[:40])]
    poems = pq.read_table(EXAMPLES / "poems.parquet").to_pylist()
    short = sorted(poems, key=lambda r: (len(r["text"].encode()), r["id"]))[:5]
    return {"sonnets/00000": sonnets[:20], "sonnets/00001": sonnets[20:],
            "poems/00000": [(r["id"], r["text"]) for r in short]}


def tokenize(text: str) -> np.ndarray[Any, Any]:
    return np.array([*text.encode("utf-8"), EOD], dtype=np.uint16)


def bpe_tokenizer(path: Path) -> Any:
    """The tokens of a `tokenizer.json` (no special tokens), then EOD: for a run whose
    harness tokenized with a real BPE vocabulary instead of bytes."""
    from tokenizers import Tokenizer

    loaded = Tokenizer.from_file(str(path))

    def encode(text: str) -> np.ndarray[Any, Any]:
        ids = loaded.encode(text, add_special_tokens=False).ids
        return np.array([*ids, loaded.get_vocab_size()], dtype=np.uint16)

    return encode


def write_indexed(prefix: Path, documents: list[np.ndarray[Any, Any]]) -> None:
    """Megatron's layout, one sequence per document, uint16 tokens (dtype code 8)."""
    lengths = np.array([len(d) for d in documents], dtype="<i4")
    pointers = np.concatenate(([0], np.cumsum(lengths.astype(np.int64) * 2)[:-1]))
    prefix.with_name(prefix.name + ".bin").write_bytes(
        b"".join(d.astype("<u2").tobytes() for d in documents))
    header = MAGIC + struct.pack("<Q", 1) + struct.pack("<B", 8) + \
        struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(lengths) + 1)
    prefix.with_name(prefix.name + ".idx").write_bytes(
        header + lengths.tobytes() + pointers.astype("<i8").tobytes()
        + np.arange(len(lengths) + 1, dtype="<i8").tobytes())


def write_with_megatron(prefix: Path, documents: list[np.ndarray[Any, Any]]) -> bool:
    """megatron-core's own builder, when it is installed (it needs torch)."""
    try:
        import torch
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    except ImportError:
        return False
    builder = IndexedDatasetBuilder(str(prefix) + ".bin", dtype=np.uint16)
    for tokens in documents:
        builder.add_item(torch.from_numpy(tokens.astype(np.int64)))
        builder.end_document()
    builder.finalize(str(prefix) + ".idx")
    return True


def windows_per_step(consumed: int) -> int:
    return [windows for start, windows in RAMP if start <= consumed][-1]


def order(shards: dict[str, list[np.ndarray[Any, Any]]]) -> list[dict[str, Any]]:
    """The harness's doc_map rows: passes of seeded permutations, packed into windows."""
    documents = [(shard, local, tokens) for shard, docs in shards.items()
                 for local, tokens in enumerate(docs)]
    rng = np.random.default_rng(SEED)
    stream = [documents[i] for _ in range(PASSES) for i in rng.permutation(len(documents))]
    total = sum(len(tokens) for _, _, tokens in stream)
    steps, consumed = [], 0  # (first window, windows) of each whole step
    while consumed + windows_per_step(consumed) * SEQ_LEN <= total:
        windows = windows_per_step(consumed)
        steps.append((consumed // SEQ_LEN, windows))
        consumed += windows * SEQ_LEN
    rows, position = [], 0
    for shard, local, tokens in stream:
        start = 0
        while start < len(tokens) and position < consumed:
            window, slot = divmod(position, SEQ_LEN)
            take = min(len(tokens) - start, SEQ_LEN - slot)
            step = max(i for i, (first, _) in enumerate(steps) if first <= window)
            micro = (window - steps[step][0]) // MICRO_BATCH
            rows.append({"step": step, "window": window, "micro_batch": micro, "slot": slot,
                         "rank": micro % WORLD, "source": shard.split("/")[0],
                         "shard": shard, "local_doc": local, "token_start": start,
                         "token_end": start + take})
            start, position = start + take, position + take
    return rows


def build_run(out: Path, tokenizer: Path | None = None) -> dict[str, Any]:
    """Write doc_map.parquet, manifest.json and shards/ under `out`; say how. With a
    `tokenizer`, the shards hold its tokens and the end-of-document token is its
    vocabulary size."""
    records = corpus_records()
    encode = tokenize if tokenizer is None else bpe_tokenizer(tokenizer)
    shards = {name: [encode(text) for _, text in docs] for name, docs in records.items()}
    writer = "megatron-core"
    for name, documents in shards.items():
        prefix = out / "shards" / name
        prefix.parent.mkdir(parents=True, exist_ok=True)
        if not write_with_megatron(prefix, documents):
            write_indexed(prefix, documents)
            writer = "own writer"
    manifest = {
        "format": "open-transformers/data-manifest/1",
        "run": {"seq_len": SEQ_LEN, "micro_batch_size": MICRO_BATCH, "world_size": WORLD,
                "global_batch_ramp": RAMP, "seed": SEED, "append_eod": True,
                "eod_token": int(next(iter(shards.values()))[0][-1]),
                "tokenizer": "bytes" if tokenizer is None else "tokenizer.json"},
        "shards": [{"source": name.split("/")[0], "shard": name,
                    "doc_ids": [doc_id for doc_id, _ in docs]}
                   for name, docs in records.items()],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    rows = order(shards)
    pq.write_table(pa.Table.from_pylist(rows), out / "doc_map.parquet")
    return {"writer": writer, "rows": len(rows), "windows": rows[-1]["window"] + 1,
            "steps": rows[-1]["step"] + 1}


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else \
        Path(__file__).resolve().parent / "fixtures" / "harness"
    target.mkdir(parents=True, exist_ok=True)
    print(json.dumps(build_run(target)))
