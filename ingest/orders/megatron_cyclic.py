"""Megatron-LM's `--dataloader-type cyclic`: the samples each rank reads, epoch after epoch.

Megatron-LM's `MegatronPretrainingRandomSampler` (megatron/training/datasets/
data_samplers.py; not part of megatron-core) draws a new permutation every epoch, with
`torch.randperm(n, generator)` seeded by the epoch number, and the training loop restarts
it whenever it runs out (`cyclic_iter`). Each rank keeps its own count of consumed samples,
`micro_batch * data_parallel` a micro-batch, from which a restart computes the epoch
(consumed // active, active = the dataset's samples less the tail that fills no round of
micro-batches) and the place within it:

- with data sharding (`--data-sharding`, Megatron-LM's default), rank r reads the bucket
  of samples `[r·b, (r+1)·b)`, b = ⌊total/(micro·dp)⌋·micro, in the order of
  `randperm(b)`, from `consumed_in_epoch // dp` on;
- without it (`--no-data-sharding`), every rank reads `randperm(⌊total/micro⌋·micro)`
  from `consumed_in_epoch` on, taking every dp-th entry from its rank on.

Either way a rank's list is cut into micro-batches and a last incomplete one is dropped.
A step takes the same number of micro-batches from every rank; lineage lays the windows
out round by round, each round one micro-batch of rank 0, then rank 1, and so on: the
`micro-batches` rank rule.

torch's CPU `randperm` for n below 2³²/20 is a Fisher-Yates shuffle driven by the 32-bit
outputs of a Mersenne Twister seeded as `manual_seed(seed)` seeds it, the same generator
and seeding as numpy's legacy `RandomState(seed)`: lineage draws from that, no torch.
"""

from __future__ import annotations

from array import array

import numpy as np

from lineage.errors import UsageError

RANDPERM_LIMIT = (2**32 - 1) // 20  # torch shuffles longer ranges another way


def torch_randperm(n: int, seed: int) -> np.ndarray:
    """What `torch.randperm(n, generator=torch.Generator().manual_seed(seed))` gives on the
    CPU, as int64."""
    if not 0 <= seed < 2**32:
        raise UsageError(f"a permutation seeded with {seed}: only seeds in [0, 2^32)")
    if n >= RANDPERM_LIMIT:
        raise UsageError(f"a permutation of {n:,} samples: torch draws those of "
                         f"{RANDPERM_LIMIT:,} or more another way, which lineage does not "
                         "follow")
    # machine integers, not a list: 16 bytes a sample instead of about 44
    order = array("q", np.arange(n, dtype=np.int64).tobytes())
    if n > 1:
        draws = np.random.RandomState(seed).randint(0, 2**32, size=n - 1, dtype=np.uint32)
        targets = (draws.astype(np.int64) % np.arange(n, 1, -1, dtype=np.int64)
                   + np.arange(n - 1, dtype=np.int64))
        for i, j in enumerate(array("q", targets.tobytes())):  # each swap depends on the
            order[i], order[j] = order[j], order[i]            # ones before: one at a time
    return np.frombuffer(order, dtype=np.int64).copy()


def cyclic_samples(total: int, micro_batch: int, data_parallel: int, windows: int,
                   data_sharding: bool = True) -> np.ndarray:
    """The sample each of the first `windows` windows reads (`windows` a whole number of
    rounds of `micro_batch * data_parallel`), starting from nothing consumed."""
    per_round = micro_batch * data_parallel
    active = total - total % per_round
    if active < 1:
        raise UsageError(f"the dataset's {total} samples fill no round of {per_round} "
                         "(micro batch times data-parallel size)")
    rounds = windows // per_round
    permutations: dict[tuple[int, int], np.ndarray] = {}

    def permutation(n: int, epoch: int) -> np.ndarray:
        if (n, epoch) not in permutations:
            permutations[(n, epoch)] = torch_randperm(n, epoch)
        return permutations[(n, epoch)]

    ranks = []
    for rank in range(data_parallel):
        batches: list[np.ndarray] = []
        consumed = taken = 0
        while taken < rounds:
            epoch, within = divmod(consumed, active)
            if data_sharding:
                bucket = total // per_round * micro_batch
                listed = rank * bucket + permutation(bucket, epoch)[within // data_parallel:]
            else:
                full = total // micro_batch * micro_batch
                listed = permutation(full, epoch)[within:][rank::data_parallel]
            usable = len(listed) // micro_batch
            if usable == 0:  # cannot happen from a whole epoch's start; kept as a guard
                raise UsageError(f"rank {rank} has no whole micro-batch left in epoch {epoch}")
            batches.append(listed[:usable * micro_batch].reshape(usable, micro_batch))
            consumed, taken = consumed + usable * per_round, taken + usable
        ranks.append(np.concatenate(batches)[:rounds])
    return np.stack(ranks, axis=1).reshape(-1)[:windows]
