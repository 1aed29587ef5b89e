"""`lineage ingest order megatron`: a Megatron-LM run's data order, from its own files.

Read (numpy only; neither torch nor megatron is needed): each indexed dataset of the
blend (`PREFIX.idx/.bin`), the GPTDataset and BlendedDataset index arrays megatron-core
cached for the split, and for each dataset the corpus doc_id of every Megatron document
(the JSONL given to Megatron's preprocessing, or a list of doc_ids, line i = document
i). The global batch size, its ramp-up and the micro batch cut the samples into steps
and ranks as Megatron's num-microbatches calculator and MegatronPretrainingSampler do
(MegatronPretrainingRandomSampler's shuffles with `--dataloader-type cyclic`).
Each sample is one window of `sequence_length + 1` tokens (docs/importers.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lineage.errors import InputError, UnknownObjectError, UsageError
from lineage.ingest.orders.common import artifact_hash, corpus_rows, store_order
from lineage.ingest.orders.indexed import read_indexed
from lineage.ingest.orders.megatron_cache import CachedRun, find_run
from lineage.ingest.orders.megatron_check import check_tokens
from lineage.ingest.orders.megatron_cyclic import cyclic_samples
from lineage.ingest.orders.megatron_docs import (
    Dataset,
    TokenLookup,
    map_dataset,
    tag,
    untag_all,
)
from lineage.ingest.orders.megatron_indices import check_blend, check_gpt
from lineage.ingest.orders.megatron_rebuild import check_rebuilt, rebuild_cache, recorded_cache
from lineage.ingest.orders.megatron_schedule import Rampup, megatron_schedule
from lineage.ingest.orders.megatron_segments import Parts, sample_parts
from lineage.ingest.orders.reread_all import check_verify
from lineage.store.base import BaseStore
from lineage.store.part_select import part_files
from lineage.store.parts import Progress
from lineage.stream.imported import ImportedSpec
from lineage.stream.schedule import BatchSchedule, RankRule

DATALOADER_TYPES = ("single", "cyclic")


@dataclass(frozen=True)
class MegatronRun:
    """What the run's command line said (the settings the files do not record)."""

    global_batch_size: int
    micro_batch_size: int
    data_parallel_size: int = 1
    rampup: Rampup | None = None
    decrease_batch_size_if_needed: bool = False
    train_iters: int | None = None
    split: str = "train"
    add_extra_token: bool = True
    dataloader_type: str = "single"  # Megatron-LM's --dataloader-type: single or cyclic
    data_sharding: bool = True  # cyclic: each rank shuffles a bucket of its own
    resumes: tuple[tuple[int, int], ...] = ()  # (step, global batch) of each restart

    def schedule(self) -> BatchSchedule:
        return megatron_schedule(self.global_batch_size, self.micro_batch_size,
                                 self.data_parallel_size, self.rampup,
                                 self.decrease_batch_size_if_needed, self.resumes)


def import_megatron(
    store: BaseStore, *, data: Sequence[Path], docs: Sequence[Path], cache: Path,
    corpus: str, stream: str, run: MegatronRun, index_hash: str | None = None,
    tokenizer: Path | None = None, sample_windows: int = 16, rebuild: bool = False,
    verify: str = "sample", progress: Progress = None,
) -> dict[str, Any]:
    """Read a Megatron run's order and store it as stream `stream` of `corpus`. With
    `rebuild`, the cache of stream `stream` (imported before) is first written anew into
    `cache` by megatron-core from the recorded config, and every file checked against
    the recorded hash; the import then answers "unchanged"."""
    if len(data) != len(docs) or not data:
        raise UsageError("give one --docs per --data, in the same order")
    check_verify(verify)
    if run.dataloader_type not in DATALOADER_TYPES:
        raise UsageError(f"--dataloader-type {run.dataloader_type!r}: expected one of "
                         f"{', '.join(DATALOADER_TYPES)}")
    recorded = recorded_cache(store, stream) if rebuild else None
    if recorded is not None:
        rebuild_cache(recorded.description, data, cache, add_extra_token=run.add_extra_token)
    cached = find_run(cache, run.split, index_hash)
    prefixes = _match_prefixes(cached, data)
    manifest_hash, tokens_of = _corpus(store, corpus)
    datasets = [map_dataset(read_indexed(prefix), docs[data.index(prefix)], tokens_of)
                for prefix in prefixes]
    _check_indices(cached, datasets, int(run.add_extra_token))
    schedule = run.schedule()
    window_len = _sequence_length(cached) + int(run.add_extra_token)
    windows = _windows(cached, schedule, run.train_iters,
                       cycles=run.dataloader_type == "cyclic")
    parts = _all_parts(cached, datasets, _samples_read(cached, run, windows), window_len,
                       int(run.add_extra_token))
    checked = check_tokens(store, corpus, datasets, parts, windows, sample=sample_windows,
                           tokenizer=tokenizer, verify=verify)
    spec = ImportedSpec(
        manifest_hash=manifest_hash, seq_len=window_len, schedule=schedule,
        rank_rule=RankRule("micro-batches", run.micro_batch_size), framework="megatron",
        artifacts=_artifacts(cached, datasets), settings=_settings(cached, datasets, run))
    if recorded is not None:
        check_rebuilt(recorded, spec.artifacts, cache, stream)
    answer = store_order(store, stream=stream, corpus=corpus, spec=spec,
                         segments=_table(parts, datasets), origin=cache, progress=progress)
    return {**answer, "checked": checked}


def _match_prefixes(cached: CachedRun, data: Sequence[Path]) -> list[Path]:
    """The given prefixes in the blend's order, matched by the name the run recorded."""
    by_name = {prefix.name: prefix for prefix in data}
    if len(by_name) != len(data):
        raise UsageError("two --data prefixes share a name")
    ordered = []
    for member in cached.datasets:
        name = Path(str(member.description.get("dataset_path"))).name
        if name not in by_name:
            raise UsageError(f"the run read dataset {name!r}; give its prefix with --data")
        ordered.append(by_name.pop(name))
    if by_name:
        raise UsageError(f"--data {', '.join(sorted(by_name))}: not part of the cached run")
    return ordered


def _check_indices(cached: CachedRun, datasets: list[Dataset], extra: int) -> None:
    """Every cached array is the one megatron-core makes from its description."""
    for member, dataset in zip(cached.datasets, datasets, strict=True):
        check_gpt(member, dataset.data.sequence_lengths, extra)
    if cached.blend is not None:
        check_blend(cached.blend, cached.datasets)


def _corpus(store: BaseStore, corpus: str) -> tuple[str, TokenLookup]:
    """The corpus's manifest hash, and a lookup of its documents' n_tokens and rows
    (one join in DuckDB per dataset, not a dictionary of the whole corpus)."""
    with store.reader(views=False) as con:
        row = con.execute("SELECT manifest_hash FROM corpora WHERE name = ?", [corpus]).fetchone()
        if row is None:
            raise UnknownObjectError(f"no corpus named {corpus!r}: `lineage corpus list` "
                                     "shows them")
        files = part_files(con, store, "documents", corpus)

    def tokens_of(doc_ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        import pyarrow as pa

        rids, n_tokens = corpus_rows(files, pa.array(doc_ids, pa.string()))
        return n_tokens, rids

    return str(row[0]), tokens_of


def _sequence_length(cached: CachedRun) -> int:
    lengths = {int(c.description["sequence_length"]) for c in cached.datasets}
    if len(lengths) != 1:
        raise InputError(cached.datasets[0].files["description.txt"],
                         f"the blend's datasets disagree on sequence_length: {sorted(lengths)}")
    return lengths.pop()


def _built(cached: CachedRun) -> int:
    """The samples of the dataset the run's sampler drew from (its `len`)."""
    top = cached.blend or cached.datasets[0]
    return len(top.arrays["dataset_index" if cached.blend else "shuffle_index"])


def _windows(cached: CachedRun, schedule: BatchSchedule, train_iters: int | None, *,
             cycles: bool = False) -> int:
    """Windows of the whole steps the run read: `train_iters` steps, else every whole
    step of the samples the run asked megatron-core for (a GPTDataset builds whole
    epochs, so it may hold more than were asked for and trained on). A cyclic loader
    starts the dataset over when it runs out, so any number of steps can be read."""
    top = cached.blend or cached.datasets[0]
    built = _built(cached)
    asked = top.description.get("size" if cached.blend else "num_samples")
    available = min(built, int(asked)) if isinstance(asked, int) else built
    steps = schedule.step_of_window(available)
    if train_iters is not None:
        if train_iters > steps and not cycles:
            raise UsageError(f"--train-iters {train_iters}: the run asked for {available} "
                             f"samples, {steps} whole steps")
        steps = train_iters
    if steps < 1:
        raise UsageError(f"the run asked for {available} samples, not one whole step")
    return schedule.first_window(steps)


def _samples_read(cached: CachedRun, run: MegatronRun, windows: int) -> np.ndarray:
    """The dataset's sample each window read: samples 0, 1, 2, ... for the `single`
    loader; for `cyclic`, its shuffles epoch after epoch (megatron_cyclic.py)."""
    if run.dataloader_type == "cyclic":
        return cyclic_samples(_built(cached), run.micro_batch_size, run.data_parallel_size,
                              windows, run.data_sharding)
    return np.arange(windows, dtype=np.int64)


def _all_parts(cached: CachedRun, datasets: list[Dataset], read: np.ndarray, window_len: int,
               extra: int) -> Parts:
    """Every window's parts in training order, from whichever dataset fed it; window w
    holds the dataset's sample `read[w]`."""
    windows = len(read)
    everything = np.arange(windows, dtype=np.int64)
    if cached.blend is None:
        choice, sample = np.zeros(windows, dtype=np.int64), read
    else:
        choice = cached.blend.arrays["dataset_index"][read].astype(np.int64)
        sample = cached.blend.arrays["dataset_sample_index"][read].astype(np.int64)
        if choice.min() < 0 or choice.max() >= len(datasets):
            raise InputError(cached.blend.files["dataset_index.npy"],
                             f"names datasets outside [0, {len(datasets)})")
    pieces = []
    for number, (member, dataset) in enumerate(zip(cached.datasets, datasets, strict=True)):
        mine = np.flatnonzero(choice == number)
        pieces.append(sample_parts(member, dataset.data, everything[mine], sample[mine],
                                   window_len, extra))
    merged = Parts(*(np.concatenate([getattr(p, f) for p in pieces])
                     for f in ("window", "slot", "document", "doc_offset", "n_tokens")))
    source = np.concatenate([np.full(len(p.window), i) for i, p in enumerate(pieces)])
    order = np.argsort(merged.window, kind="stable")
    return Parts(merged.window[order], merged.slot[order],
                 tag(source[order], merged.document[order]),
                 merged.doc_offset[order], merged.n_tokens[order])


def _table(parts: Parts, datasets: list[Dataset]) -> Any:
    """Segments with their documents' corpus rows (rids: no doc_id looked up again); an
    appended EOD is not a corpus token, so parts are clipped to the document's n_tokens
    (an EOD-only part disappears)."""
    import pyarrow as pa

    dataset, document = untag_all(parts.document)
    bases = np.cumsum([0] + [len(d.doc_ids) for d in datasets])
    everyone = bases[dataset] + document
    limits = np.concatenate([d.corpus_tokens for d in datasets])
    n_tokens = np.minimum(parts.doc_offset + parts.n_tokens, limits[everyone]) - parts.doc_offset
    keep = n_tokens > 0
    rids = np.concatenate([d.corpus_rows for d in datasets])
    return pa.table({
        "window": parts.window[keep], "slot": parts.slot[keep],
        "rid": rids[everyone[keep]], "doc_offset": parts.doc_offset[keep],
        "n_tokens": n_tokens[keep]})


def _artifacts(cached: CachedRun, datasets: list[Dataset]) -> dict[str, str]:
    """The files that fixed the order, by hash: each .idx and every cached index file
    (the .bin, as large as the corpus, is checked by sampled re-reads instead)."""
    found = {d.data.idx.name: d.data.idx_hash for d in datasets}
    members = [*cached.datasets, *([cached.blend] if cached.blend else [])]
    for member in members:
        for path in member.files.values():
            found[path.name] = artifact_hash(path)
    return found


def _settings(cached: CachedRun, datasets: list[Dataset], run: MegatronRun) -> dict[str, Any]:
    first = cached.datasets[0].description
    rampup = run.rampup
    top = cached.blend or cached.datasets[0]
    return {
        "add_extra_token_to_sequence": run.add_extra_token,
        # megatron-core's own record of the cache (the blend's names its datasets'):
        # what --rebuild-cache gives its builder when the cache is lost.
        "cache_description": top.description,
        "data_parallel_size": run.data_parallel_size,
        "datasets": [{"append_eod": d.append_eod, "num_samples": c.description.get("num_samples"),
                      "prefix": d.data.idx.stem} for c, d in zip(cached.datasets, datasets,
                                                                     strict=True)],
        "decrease_batch_size_if_needed": run.decrease_batch_size_if_needed,
        "global_batch_size": run.global_batch_size,
        "micro_batch_size": run.micro_batch_size,
        "rampup_batch_size": None if rampup is None else [rampup.start, rampup.increment,
                                                          rampup.samples],
        "random_seed": first.get("random_seed"),
        "sequence_length": first.get("sequence_length"),
        "split": run.split,
        "blend_weights": None if cached.blend is None else cached.blend.description.get("weights"),
        "train_iters": run.train_iters,
        # only a cyclic loader says so: a `single` import's spec stays what it was
        **({"dataloader_type": "cyclic", "data_sharding": run.data_sharding}
           if run.dataloader_type == "cyclic" else {}),
        **({"resumes": [list(resume) for resume in run.resumes]} if run.resumes else {}),
    }
