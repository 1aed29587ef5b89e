"""Make the Megatron fixtures with megatron-core's own code (needs torch + megatron-core).

    python tests/orders/make_megatron_run.py        # rewrites tests/orders/fixtures/megatron

Two preprocessing inputs of real public-domain text (Shakespeare's sonnets 1-10, and
eight poems split into stanzas as Megatron's `--split-sentences` would), tokenized as
UTF-8 bytes with the EOD token 256 appended to each document (megatron-core's
`NullTokenizer(256)` numbers it), written with megatron-core's `IndexedDatasetBuilder`.
Two runs are then built with `BlendedMegatronDatasetBuilder` and a `GPTDatasetConfig`,
which cache their index arrays:

- `single`: the sonnets alone, 2 epochs' worth of samples;
- `blend`: both datasets blended 60/40.

Beside them, `samples-<run>.npy` holds every sample megatron-core's dataset yields for
the run, in order, so the importer's own tests (test_megatron.py) check windows token
for token without megatron installed. The proof test (test_megatron_proof.py) calls
the same functions in a temporary folder and reads the samples back through
megatron-core's datasets, its sampler order and its batch-size calculator.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import shutil
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "megatron"
EOD = 256
SEQUENCE_LENGTH = 31
SEED = 1234
RUNS: dict[str, dict[str, Any]] = {
    "single": {"prefixes": ["sonnets"], "weights": None, "samples": 400},
    "blend": {"prefixes": ["sonnets", "poems"], "weights": [0.6, 0.4], "samples": 320},
}


def write_inputs(folder: Path) -> dict[str, Path]:
    """The JSONL given to preprocessing, one per dataset: {name: path}."""
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(REPO / "examples" / "shards" / "sonnets.jsonl.gz", "rt") as handle:
        sonnets = [json.loads(line) for line in handle][:10]
    poems = pq.read_table(REPO / "examples" / "shards" / "poems.parquet").to_pylist()[1:9]
    records = {
        "sonnets": [{"id": r["id"], "source": "sonnets", "text": r["text"]} for r in sonnets],
        "poems": [{"id": r["id"], "source": "poems", "text": r["text"]} for r in poems],
    }
    paths = {}
    for name, rows in records.items():
        paths[name] = folder / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return paths


def write_indexed(jsonl: Path, prefix: Path, *, split_stanzas: bool) -> None:
    """megatron-core's IndexedDatasetBuilder over byte tokens + EOD (uint16)."""
    import numpy as np
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.uint16)
    for line in jsonl.read_text(encoding="utf-8").splitlines():
        text = json.loads(line)["text"]
        pieces = text.split("\n\n") if split_stanzas else [text]
        sequences = [list((piece + ("\n\n" if i < len(pieces) - 1 else "")).encode())
                     for i, piece in enumerate(pieces)]
        sequences[-1].append(EOD)
        tokens = [t for sequence in sequences for t in sequence]
        builder.add_document(np.array(tokens), [len(s) for s in sequences])
    builder.finalize(f"{prefix}.idx")


def build_run(data: Path, cache: Path, run: str, *, add_extra_token: bool = True) -> Any:
    """Build the run's training dataset with megatron-core (writes the cached indices)."""
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.tokenizers.text.libraries.null_tokenizer import NullTokenizer

    settings = RUNS[run]
    _single_process_group()
    # Prefixes relative to the data folder, so the recorded descriptions (and so the
    # cached files' names) do not depend on where the fixtures were made.
    config = GPTDatasetConfig(
        random_seed=SEED, sequence_length=SEQUENCE_LENGTH,
        blend=(list(settings["prefixes"]), settings["weights"]),
        split="100,0,0", path_to_cache=str(cache.resolve()), tokenizer=NullTokenizer(EOD),
        reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
        add_extra_token_to_sequence=add_extra_token)
    with contextlib.chdir(data):
        builder = BlendedMegatronDatasetBuilder(
            GPTDataset, [settings["samples"], 0, 0], lambda: True, config)
        return builder.build()[0]


def _single_process_group() -> None:
    """megatron-core asks torch.distributed for the rank when it writes a blend's
    cache: a one-process gloo group answers 0 (meeting in memory: no file is left)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def make_all(folder: Path, *, samples: bool = False) -> None:
    """Inputs, indexed datasets and both runs' caches under `folder`; with `samples`,
    also `samples-<run>.npy`: every sample the run's dataset yields, in order, as
    megatron-core returns it (tokens + the last label), for tests without megatron."""
    import numpy as np
    import torch

    inputs = write_inputs(folder)
    for name, jsonl in inputs.items():
        write_indexed(jsonl, folder / name, split_stanzas=name == "poems")
    for run in RUNS:
        dataset = build_run(folder, folder / f"cache-{run}", run)
        if samples:
            rows = [torch.cat([item["tokens"], item["labels"][-1:]]).numpy()
                    for item in (dataset[i] for i in range(len(dataset)))]
            np.save(folder / f"samples-{run}.npy", np.stack(rows).astype(np.uint16))


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES
    shutil.rmtree(target, ignore_errors=True)
    make_all(target, samples=True)
    print(f"wrote {target}")
