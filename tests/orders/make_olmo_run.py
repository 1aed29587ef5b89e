"""Make OLMo-core runs over a tiny real corpus, with OLMo-core's own code.

    python tests/orders/make_olmo_run.py [OUT]     (default: tests/orders/fixtures/olmo)

Token files are written here with numpy, as Dolma's tokenizer lays them out: one token
per UTF-8 byte of each document's text, each document closed by EOS, in raw arrays (no
header), with Dolma's `start,end,id,src,loc` sidecar for the uint16 files. Everything
else is OLMo-core's: `NumpyFSLDatasetConfig` (plain and source-mixture) or
`NumpyPaddedFSLDatasetConfig` builds the dataset, `NumpyDataLoaderBase.wrap_numpy_dataset`
the loader of each data-parallel rank, whose `reshuffle` writes the per-epoch global
indices, and `BatchSizeSchedulerCallback` changes the batch size as a trainer would.
Each case keeps its global indices (and mixture index) and `expected.json`: for every step
and rank, the instances the loader yielded and the BLAKE3 of their tokens. Token files
are rebuilt from the corpus by `write_token_files` (no framework needed), so the committed
fixtures stay small.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import blake3
import numpy as np

REPO = Path(__file__).resolve().parents[2]
SHARDS = REPO / "examples" / "shards"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "olmo"
SONNETS, POEMS = 12, 3  # documents taken from each shard: small fixtures
EOS = {"uint16": 256, "uint32": 70_000}  # a uint32 EOS needs the wider files
SEQ_LEN = 32
WORLD = 2

CASES: dict[str, dict[str, Any]] = {
    # Two epochs of the uint16 files, a fixed batch of 8 instances, sidecar ids.
    "plain": {"dtype": "uint16", "seed": 7, "global_batch_size": 8 * SEQ_LEN, "epochs": 2},
    # The uint32 files mapped by a doc_id list, the batch warmed up 2 -> 4 -> 8 -> 4
    # instances by steps, over two epochs.
    "warmup": {"dtype": "uint32", "seed": 11, "global_batch_size": 2 * SEQ_LEN, "epochs": 2,
               "warmup": {"batch_sizes": [2 * SEQ_LEN, 4 * SEQ_LEN, 8 * SEQ_LEN, 4 * SEQ_LEN],
                          "schedule": [0, 3, 9, 40], "unit": "steps"}},
    # A source mixture of the sonnets and poems files, warmed up by tokens.
    "mixture": {"dtype": "uint16", "seed": 5, "global_batch_size": 4 * SEQ_LEN, "epochs": 1,
                "mixture": {"sonnets": 0.7, "poems": 0.3, "requested_tokens": 6000},
                "warmup": {"batch_sizes": [4 * SEQ_LEN, 8 * SEQ_LEN], "schedule": [0, 1024],
                           "unit": "tokens"}},
    # NumpyPaddedFSLDataset: one document an instance, at 620 tokens some padded after
    # their EOS, some cut (one exactly 620 long, its EOS cut off), two epochs.
    "padded": {"dtype": "uint16", "seed": 13, "dataset": "padded", "sequence_length": 620,
               "global_batch_size": 4 * 620, "epochs": 2},
    # The instance filter (max period 13, min period 1, a count of 3) over all the poems,
    # some of which repeat themselves: OLMo-core masks 26 of the 869 instances.
    "filtered": {"dtype": "uint16", "seed": 19, "documents": "poems",
                 "global_batch_size": 4 * SEQ_LEN, "epochs": 1, "instance_filter": [13, 1, 3]},
    # max_target_sequence_length 5 x 32: a file holds the instances of its whole chunks of
    # 160 tokens (fewer than with 32 alone), two epochs.
    "target": {"dtype": "uint16", "seed": 23, "global_batch_size": 8 * SEQ_LEN, "epochs": 2,
               "max_target_sequence_length": 5 * SEQ_LEN},
    # Every document opened by a BOS token (EOS + 2), cut into fixed-length instances, and
    # padded (one document an instance, the BOS first).
    "bos": {"dtype": "uint16", "seed": 29, "global_batch_size": 8 * SEQ_LEN, "epochs": 1,
            "bos": True},
    "bos-padded": {"dtype": "uint16", "seed": 31, "dataset": "padded", "sequence_length": 620,
                   "global_batch_size": 4 * 620, "epochs": 1, "bos": True},
    # NumpyInterleavedFSLDataset over every sonnet, each opened by a BOS: two documents an
    # instance, four chunks each (31 tokens a document: chunks of 8, 8, 8 and 7), the second
    # file exempt (its sonnets keep padded instances of their own).
    "interleaved": {"dtype": "uint16", "seed": 37, "dataset": "interleaved",
                    "documents": "sonnets", "sequence_length": 64, "bos": True,
                    "global_batch_size": 4 * 64, "epochs": 1,
                    "interleaving": {"docs_per_instance": 2, "chunks_per_doc": 4, "seed": 43,
                                     "exempt": ["sonnets-b"]}},
    # NumpyPackedFSLDataset over all the poems at 512 tokens, long ones cut into fragments
    # (many of exactly 512: the sort's order of equal lengths matters), each file alone; and
    # over the sonnets and poems, documents cut at 2,048, the three files packed together.
    "packed": {"dtype": "uint16", "seed": 47, "dataset": "packed", "documents": "poems",
               "sequence_length": 512, "global_batch_size": 2 * 512, "epochs": 2,
               "packing": {"long_doc_strategy": "fragment", "source_group_size": 1}},
    "packed-grouped": {"dtype": "uint16", "seed": 53, "dataset": "packed",
                       "sequence_length": 2048, "global_batch_size": 2 * 2048, "epochs": 1,
                       "packing": {"long_doc_strategy": "truncate", "source_group_size": 3}},
    # The instance filter on packed and on interleaved instances: OLMo-core tests a packed
    # instance with its padding (a run of 32 pad tokens masks it), an interleaved one by
    # its documents' padded instances.
    "packed-filtered": {"dtype": "uint16", "seed": 59, "dataset": "packed",
                        "documents": "poems", "sequence_length": 512,
                        "global_batch_size": 2 * 512, "epochs": 1, "instance_filter": [13, 1, 32],
                        "packing": {"long_doc_strategy": "fragment", "source_group_size": 1}},
    "interleaved-filtered": {"dtype": "uint16", "seed": 61, "dataset": "interleaved",
                             "documents": "poems", "sequence_length": 64,
                             "global_batch_size": 2 * 64, "epochs": 1,
                             "instance_filter": [13, 1, 3],
                             "interleaving": {"docs_per_instance": 2, "chunks_per_doc": 2,
                                              "seed": 67, "exempt": ["poems-a"]}},
}
BOS = {dtype: eos + 2 for dtype, eos in EOS.items()}  # EOS + 1 is the padding


def corpus_documents() -> list[tuple[str, str, str]]:
    """(source, id, text) of the documents the runs read: the first sonnets and poems."""
    with gzip.open(SHARDS / "sonnets.jsonl.gz", "rt", encoding="utf-8") as handle:
        sonnets = [json.loads(line) for _, line in zip(range(SONNETS), handle, strict=False)]
    return [("sonnets", r["id"], r["text"]) for r in sonnets] + all_poems()[:POEMS]


def all_sonnets() -> list[tuple[str, str, str]]:
    with gzip.open(SHARDS / "sonnets.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [("sonnets", r["id"], r["text"]) for r in map(json.loads, handle)]


def all_poems() -> list[tuple[str, str, str]]:
    import pyarrow.parquet as pq

    return [("poems", r["id"], r["text"])
            for r in pq.read_table(SHARDS / "poems.parquet").to_pylist()]


def token_groups(documents: str = "poetry") -> dict[str, list[tuple[str, str, str]]]:
    """The token files of a case and the documents in each, in order."""
    if documents == "poems":
        poems = all_poems()
        return {"poems-a": poems[:9], "poems-b": poems[9:]}
    if documents == "sonnets":
        sonnets = all_sonnets()
        return {"sonnets-a": sonnets[:77], "sonnets-b": sonnets[77:]}
    chosen = corpus_documents()
    return {"sonnets-0": chosen[:SONNETS // 2], "sonnets-1": chosen[SONNETS // 2:SONNETS],
            "poems-0": chosen[SONNETS:]}


def write_token_files(folder: Path, dtype: str, documents: str = "poetry",
                      bos: bool = False) -> list[Path]:
    """`sonnets-0.npy`, `sonnets-1.npy`, `poems-0.npy` (or, for "poems", `poems-a.npy`
    and `poems-b.npy`; uint16 with sidecars, uint32 with `doc_ids.txt` instead),
    documents in corpus order; with `bos`, each document opened by BOS."""
    folder.mkdir(parents=True, exist_ok=True)
    groups = token_groups(documents)
    paths, listed = [], []
    for name, docs in groups.items():
        path = folder / f"{name}.npy"
        arrays, lines, position = [], [], 0
        for source, doc_id, text in docs:
            tokens = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(dtype)
            if bos:
                tokens = np.concatenate((np.array([BOS[dtype]], dtype=dtype), tokens))
            arrays.append(np.append(tokens, np.array([EOS[dtype]], dtype=dtype)))
            end = position + len(tokens) + 1  # just past the EOS, as Dolma records it
            lines.append(f"{position},{end},{doc_id},{source},{len(lines)}\n")
            position = end
            listed.append(doc_id)
        np.concatenate(arrays).tofile(path)
        if dtype == "uint16":
            with gzip.GzipFile(folder / f"{name}.csv.gz", "wb", mtime=0) as handle:
                handle.write("".join(lines).encode("utf-8"))
        paths.append(path)
    if dtype == "uint32":
        (folder / "doc_ids.txt").write_text("".join(f"{d}\n" for d in listed), encoding="utf-8")
    return paths


def input_ids_hash(input_ids: Any) -> str:
    """A rank's tokens of one step, as little-endian int64, hashed (first 64 bits: enough
    to tell two token sequences apart in a fixture)."""
    data = np.asarray(input_ids, dtype="<i8").tobytes()
    return "blake3:" + blake3.blake3(data).hexdigest()[:16]


def make_case(name: str, out: Path, tokens: Path) -> dict[str, Any]:
    """Build the case's dataset and loaders with OLMo-core; keep what they wrote."""
    case = CASES[name]
    work = out / name
    work.mkdir(parents=True, exist_ok=True)
    for stale in work.glob("global_indices_*.npy"):
        stale.unlink()
    documents = case.get("documents", "poetry")
    folder = tokens / f"{case['dtype']}-{documents}{'-bos' if case.get('bos') else ''}"
    dataset = _dataset(case, write_token_files(folder, case["dtype"], documents,
                                               bool(case.get("bos"))), work)
    steps: list[list[dict[str, Any]]] = []
    for rank in range(WORLD):
        for number, batch in enumerate(_batches(dataset, case, work, rank)):
            if rank == 0:
                steps.append([])
            steps[number].append({"indices": [int(i) for i in batch["index"]],
                                  "input_ids": input_ids_hash(batch["input_ids"])})
            if "instance_mask" in batch:
                steps[number][-1]["instance_mask"] = [bool(m) for m in batch["instance_mask"]]
    for scratch in work.glob("dataset-*"):  # OLMo-core's caches, named after absolute paths
        if scratch.is_dir():
            shutil.rmtree(scratch)
    expected = {"case": name, "settings": case,
                "sequence_length": case.get("sequence_length", SEQ_LEN),
                "world_size": WORLD, "dataset_size": len(dataset), "steps": steps}
    head = json.dumps({k: v for k, v in expected.items() if k != "steps"})[:-1]
    lines = ",\n".join(json.dumps(step, separators=(",", ":")) for step in steps)
    (work / "expected.json").write_text(f'{head}, "steps": [\n{lines}\n]}}\n')
    return expected


def _dataset(case: dict[str, Any], paths: list[Path], work: Path) -> Any:
    from olmo_core.data import (
        NumpyDatasetDType,
        NumpyFSLDatasetConfig,
        NumpyInterleavedFSLDatasetConfig,
        NumpyPackedFSLDatasetConfig,
        NumpyPaddedFSLDatasetConfig,
        TokenizerConfig,
    )
    from olmo_core.data.numpy_dataset import InstanceFilterConfig

    tokenizer = TokenizerConfig(vocab_size=EOS[case["dtype"]] + 2 + int(bool(case.get("bos"))),
                                eos_token_id=EOS[case["dtype"]],
                                pad_token_id=EOS[case["dtype"]] + 1,
                                bos_token_id=BOS[case["dtype"]] if case.get("bos") else None)
    common = {"tokenizer": tokenizer, "sequence_length": case.get("sequence_length", SEQ_LEN),
              "dtype": NumpyDatasetDType(case["dtype"]), "work_dir": str(work)}
    if "max_target_sequence_length" in case:
        common["max_target_sequence_length"] = case["max_target_sequence_length"]
    if "instance_filter" in case:
        max_period, min_period, max_count = case["instance_filter"]
        common["instance_filter_config"] = InstanceFilterConfig(
            repetition_max_period=max_period, repetition_min_period=min_period,
            repetition_max_count=max_count)
    if case.get("dataset") == "padded":
        config: Any = NumpyPaddedFSLDatasetConfig(paths=[str(p) for p in paths], **common)
    elif case.get("dataset") == "packed":
        from olmo_core.data.types import LongDocStrategy

        packing = case["packing"]
        config = NumpyPackedFSLDatasetConfig(
            paths=[str(p) for p in paths], source_group_size=packing["source_group_size"],
            long_doc_strategy=LongDocStrategy(packing["long_doc_strategy"]), **common)
    elif case.get("dataset") == "interleaved":
        mixing = case["interleaving"]
        config = NumpyInterleavedFSLDatasetConfig(
            paths=[str(p) for p in paths], docs_per_instance=mixing["docs_per_instance"],
            chunks_per_doc=mixing["chunks_per_doc"], seed=mixing["seed"],
            interleaving_exempt_paths=[str(p) for p in paths if p.stem in mixing["exempt"]],
            **common)
    elif "mixture" not in case:
        config = NumpyFSLDatasetConfig(paths=[str(p) for p in paths], **common)
    else:
        mix = _mixture(case, paths)
        config = NumpyFSLDatasetConfig.from_src_mix(mix, **common)
        index = mix.build(npdtype=np.dtype(case["dtype"]).type, sequence_length=SEQ_LEN)
        index.filter_zero_token_paths = True
        pairs = sorted(index.to_index().items(), key=lambda item: item[0][1])
        (work / "mixture_index.json").write_text(
            json.dumps([[Path(path).name, tokens] for (path, _), tokens in pairs]) + "\n")
    dataset = config.build()
    dataset.prepare()
    return dataset


def _mixture(case: dict[str, Any], paths: list[Path]) -> Any:
    from olmo_core.data.source_mixture import (
        SourceMixtureConfig,
        SourceMixtureDatasetConfig,
        SourceMixtureList,
    )

    mixture = case["mixture"]
    sources = [SourceMixtureConfig(source_name=name, target_ratio=mixture[name],
                                   paths=[str(p) for p in paths if p.name.startswith(name)])
               for name in ("sonnets", "poems")]
    return SourceMixtureDatasetConfig(
        source_list=SourceMixtureList(sources=sources), seed=case["seed"],
        requested_tokens=mixture["requested_tokens"],
        global_batch_size=case["global_batch_size"], render_tables=False, quiet=True)


def _batches(dataset: Any, case: dict[str, Any], work: Path, rank: int) -> list[Any]:
    """Rank `rank`'s batches over the case's epochs, driven as `Trainer._fit_epoch`
    drives them: the callback's `pre_load_batch` before each batch, `reshuffle` and
    `reset` around each epoch."""
    from olmo_core.data import DataCollator, NumpyDataLoaderBase

    pad = EOS[case["dtype"]] + 1
    loader = NumpyDataLoaderBase.wrap_numpy_dataset(
        dataset, global_batch_size=case["global_batch_size"], work_dir=work,
        collator=DataCollator(pad_token_id=pad), seed=case["seed"], dp_world_size=WORLD,
        dp_rank=rank, num_threads=0)
    trainer = SimpleNamespace(data_loader=loader, global_step=0, global_train_tokens_seen=0,
                              epoch=1, train_module=_train_module(), callbacks={})
    callback = _warmup_callback(case, trainer)
    batches = []
    for epoch in range(1, case["epochs"] + 1):
        trainer.epoch = epoch
        loader.reshuffle(epoch)
        iterator = iter(loader)
        while True:
            if callback is not None:
                callback.pre_load_batch()
            batch = next(iterator, None)
            if batch is None:
                break
            trainer.global_step += 1
            trainer.global_train_tokens_seen += loader.global_num_tokens_in_batch(batch)
            batches.append(batch)
        loader.reset()
    return batches


def _train_module() -> Any:
    """A TransformerTrainModule with no optimizer, as in eval-only mode: the callback
    changes the loader's batch size and has no learning rate to adjust."""
    from olmo_core.train.train_module import TransformerTrainModule

    module = object.__new__(TransformerTrainModule)
    module.optim = None
    module.scheduler = None
    return module


def _warmup_callback(case: dict[str, Any], trainer: Any) -> Any:
    if "warmup" not in case:
        return None
    from olmo_core.train.callbacks import BatchSizeSchedulerCallback
    from olmo_core.train.common import Duration

    warmup = case["warmup"]
    unit = getattr(Duration, warmup["unit"])
    callback = BatchSizeSchedulerCallback(batch_sizes=list(warmup["batch_sizes"]),
                                          schedule=[unit(v) for v in warmup["schedule"]])
    callback.trainer = trainer
    callback.post_attach()
    return callback


def main(out: Path) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tokens:
        for name in CASES:
            expected = make_case(name, out, Path(tokens))
            print(f"{name}: {len(expected['steps'])} steps, {expected['dataset_size']} "
                  f"instances -> {out / name}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES)
