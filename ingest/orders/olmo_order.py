"""OLMo-core's order of instances: the global indices of each epoch, cut into steps.

`NumpyFSLDataLoader` writes, per epoch, `global_indices_..._epoch{E}_seed{S}_...npy`: a
raw uint32 array (no header), a permutation of the dataset's instances. An epoch's
batches are that array truncated to whole batches (`indices[:total_size]`), reshaped to
`(batches, instances_per_batch)`; rank `dp_rank` of `dp_world_size` takes the columns
`dp_rank::dp_world_size` (`_get_local_instance_indices`): lineage's `strided` rank rule.

The batch-size warm-up is `BatchSizeSchedulerCallback` (olmo_core.train.callbacks): global
batch sizes in tokens, each from a point in steps, tokens or epochs. Before loading each
batch (`pre_load_batch`) it takes the latest point that is due; a larger batch takes
effect only when the batches processed in the epoch are divisible by the factor, a smaller
one at once; the loader keeps its place in the epoch (`DataLoaderBase.global_batch_size`).
`training_order` replays that rule exactly, so the windows of step N are the instances
the loader yields for step N.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lineage.errors import InputError, UsageError
from lineage.ingest.orders.recomputed import Maker, same_array
from lineage.stream.schedule import BatchSchedule

UNITS = ("steps", "tokens", "epochs")
_FIELDS = re.compile(r"_(dataset_size|epoch|seed|chunk|v)(\d+)")


@dataclass(frozen=True)
class Warmup:
    """BatchSizeSchedulerCallback's `batch_sizes` (tokens) and `schedule` points."""

    batch_sizes: tuple[int, ...]
    starts: tuple[int, ...]
    unit: str = "steps"

    def __post_init__(self) -> None:
        # The callback's own configuration checks (__post_init__), with its meaning.
        if self.unit not in UNITS:
            raise UsageError(f"--schedule-unit {self.unit!r}: expected one of {', '.join(UNITS)}")
        if not self.starts or self.starts[0] != 0:
            raise UsageError("--batch-size-schedule: the schedule starts at 0")
        pairs = list(zip(self.batch_sizes, self.starts, strict=True))
        for (size, start), (after_size, after) in zip(pairs, pairs[1:], strict=False):
            if after <= start:
                raise UsageError(f"--batch-size-schedule: {after} does not follow {start}")
            big, small = max(size, after_size), min(size, after_size)
            if big == small or big % small:
                raise UsageError("--batch-size-schedule: each batch size is another times "
                                 f"or divided by a whole factor ({size} then {after_size})")

    @classmethod
    def parse(cls, text: str, unit: str) -> Warmup:
        """`START:TOKENS,START:TOKENS,...`, e.g. `0:2048,100:4096`."""
        try:
            pairs = [tuple(int(v) for v in item.split(":")) for item in text.split(",")]
            starts, sizes = zip(*pairs, strict=True)
        except ValueError:
            raise UsageError(f"--batch-size-schedule {text!r}: expected START:TOKENS,... "
                             "(e.g. 0:2048,100:4096)") from None
        return cls(tuple(sizes), tuple(starts), unit)

    def to_json(self) -> dict[str, object]:
        return {"batch_sizes": list(self.batch_sizes), "schedule": list(self.starts),
                "unit": self.unit}

    def due(self, *, step: int, tokens: int, epoch: int) -> int | None:
        """The batch size of the latest point due (`Duration.due`), if any."""
        now = {"steps": step, "tokens": tokens}.get(self.unit)
        for size, start in reversed(list(zip(self.batch_sizes, self.starts, strict=True))):
            if (now >= start) if now is not None else (epoch > start):
                return size
        return None


@dataclass(frozen=True)
class EpochIndices:
    path: Path
    indices: np.ndarray  # uint32, a permutation of the dataset's instances
    fields: dict[str, int]  # what the file's name records (epoch, seed, dataset_size, ...)


def read_global_indices(path: Path, dataset_size: int) -> EpochIndices:
    """One epoch's global indices, checked: a permutation of the dataset's instances."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(path, f"cannot read the global indices ({exc.strerror or exc})") from exc
    if size % 4:
        raise InputError(path, f"{size} bytes is not a whole number of uint32 indices")
    fields = {name: int(value) for name, value in _FIELDS.findall(path.name)}
    recorded = fields.get("dataset_size", dataset_size)
    if recorded != dataset_size:
        raise InputError(path, f"made for a dataset of {recorded} instances, but the token "
                         f"files hold {dataset_size} of --sequence-length tokens (other "
                         "files or order, a mixture index, or max_target_sequence_length, "
                         "which is not supported)")
    indices = np.fromfile(path, dtype=np.uint32)
    if len(indices) != dataset_size:
        raise InputError(path, f"{len(indices)} indices for a dataset of {dataset_size} "
                         "instances")
    counts = np.bincount(indices, minlength=dataset_size) if len(indices) else indices
    if len(counts) > dataset_size or (counts != 1).any():
        first = int(np.flatnonzero(counts != 1)[0])
        raise InputError(path, f"not a permutation of the {dataset_size} instances "
                         f"(instance {first} appears {int(counts[first])} times)")
    return EpochIndices(path, indices, fields)


def olmo_shuffle(dataset_size: int, seed: int, epoch: int, chunk: int = 1) -> np.ndarray:
    """The global indices OLMo-core builds for an epoch (`NumpyFSLDataLoader.
    _build_global_indices`): the instances (or, with a chunk size, runs of `chunk`
    instances) shuffled in place by `np.random.Generator(np.random.PCG64(seed + epoch))`
    (`olmo_core.data.utils.get_rng`)."""
    rng = np.random.Generator(np.random.PCG64(seed=seed + epoch))
    if chunk == 1:
        indices = np.arange(dataset_size, dtype=np.uint32)
        rng.shuffle(indices)
        return indices
    chunks = np.arange(dataset_size // chunk, dtype=np.uint32)
    rng.shuffle(chunks)
    runs = np.repeat(chunks * chunk, chunk).reshape((-1, chunk)) + np.arange(chunk)
    return runs.reshape(-1).astype(np.uint32)


def rebuilt_epochs(dataset_size: int, seed: int, epochs: int) -> list[EpochIndices]:
    """The global indices of epochs 1..`epochs`, rebuilt as OLMo-core builds them."""
    return [EpochIndices(Path(f"global_indices_dataset_size{dataset_size}_epoch{epoch}_"
                              f"seed{seed}_v1.npy (rebuilt)"),
                         olmo_shuffle(dataset_size, seed, epoch),
                         {"dataset_size": dataset_size, "epoch": epoch, "seed": seed})
            for epoch in range(1, epochs + 1)]


def check_shuffles(epochs: list[EpochIndices], seed: int | None) -> str:
    """Each file is OLMo-core's shuffle for the seed (its name's, else `--seed`) and its
    epoch, or the import is refused naming the file and its first differing element;
    without a seed nothing can be compared, and the answer says so."""
    if seed is None:
        return "not checked: the file names do not record the seed (give --seed to check them)"
    versions = sorted({e.fields["v"] for e in epochs if e.fields.get("v", 1) != 1})
    if versions:
        return (f"not checked: global indices v{versions[0]} are not the v1 shuffle lineage "
                "makes")
    for number, epoch in enumerate(epochs, start=1):
        number = epoch.fields.get("epoch", number)
        chunk = epoch.fields.get("chunk", 1)
        expected = olmo_shuffle(len(epoch.indices), seed, number, chunk)
        same_array(epoch.path, epoch.indices, expected, Maker(
            "OLMo-core's shuffle", f"for seed {seed} and epoch {number}"
            + (f", chunk size {chunk}" if chunk != 1 else "")))
    return f"every file is OLMo-core's shuffle for seed {seed} and its epoch"


def training_order(epochs: list[EpochIndices], *, seq_len: int, global_batch_size: int,
                   warmup: Warmup | None, max_steps: int | None
                   ) -> tuple[np.ndarray, BatchSchedule]:
    """The instances in the order the steps consumed them, and the steps' sizes."""
    sizes: list[int] = []  # instances of each step
    taken: list[np.ndarray] = []
    batch, step, tokens = _instances(global_batch_size, seq_len), 0, 0
    for number, epoch in enumerate(epochs, start=1):
        consumed, total = 0, len(epoch.indices)
        while max_steps is None or step < max_steps:
            batch = _warm(warmup, batch, consumed, step=step, tokens=tokens, epoch=number,
                          seq_len=seq_len)
            if consumed // batch >= total // batch:  # the epoch's last whole batch is done
                break
            taken.append(epoch.indices[consumed:consumed + batch])
            sizes.append(batch)
            consumed, step, tokens = consumed + batch, step + 1, tokens + batch * seq_len
    if max_steps is not None and step < max_steps:
        raise UsageError(f"--steps {max_steps}: the epochs given hold only {step} steps")
    order = np.concatenate(taken) if taken else np.zeros(0, dtype=np.uint32)
    return order, _schedule(sizes)


def _instances(tokens: int, seq_len: int) -> int:
    if tokens < seq_len or tokens % seq_len:
        raise UsageError(f"a global batch of {tokens} tokens is not a whole number of "
                         f"{seq_len}-token instances")
    return tokens // seq_len


def _warm(warmup: Warmup | None, batch: int, consumed: int, *, step: int, tokens: int,
          epoch: int, seq_len: int) -> int:
    """The batch (in instances) after the callback's `_maybe_update_batch_size_and_lr`."""
    if warmup is None:
        return batch
    target = warmup.due(step=step, tokens=tokens, epoch=epoch)
    if target is None:
        return batch
    wanted = _instances(target, seq_len)
    if wanted > batch and (consumed // batch) % (wanted // batch) == 0:
        return wanted
    return wanted if wanted < batch else batch


def _schedule(sizes: list[int]) -> BatchSchedule:
    segments: list[tuple[int, int]] = []
    for step, size in enumerate(sizes):
        if not segments or segments[-1][1] != size:
            segments.append((step, size))
    return BatchSchedule(tuple(segments) or ((0, 1),))
