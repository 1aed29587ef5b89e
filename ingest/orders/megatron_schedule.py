"""Megatron's global batch size per step, as its num-microbatches calculator sets it.

megatron-core `num_microbatches_calculator.RampupBatchsizeNumMicroBatchesCalculator.update`
(with `--rampup-batch-size START INCREMENT SAMPLES`): before each step the training loop
calls `update_num_microbatches(consumed_samples)`; while `consumed_samples <= SAMPLES`
the global batch is `START + int(consumed_samples / (SAMPLES / increments)) * INCREMENT`
(increments = (GLOBAL - START) / INCREMENT, Python float division as there), after
it GLOBAL. The step then consumes `micro_batch * data_parallel * num_microbatches`
samples: the batch rounded down to a multiple of micro_batch * data_parallel when
`--decrease-batch-size-if-needed` is set, else the batch itself, which must divide.
Without a ramp-up the batch is GLOBAL throughout (`ConstantNumMicroBatchesCalculator`).
"""

from __future__ import annotations

from dataclasses import dataclass

from lineage.errors import UsageError
from lineage.stream.schedule import BatchSchedule


@dataclass(frozen=True)
class Rampup:
    start: int
    increment: int
    samples: int


def megatron_schedule(global_batch: int, micro_batch: int, data_parallel: int = 1,
                      rampup: Rampup | None = None, decrease_if_needed: bool = False
                      ) -> BatchSchedule:
    """Windows (samples) per step, by step ranges."""
    unit = micro_batch * data_parallel
    if global_batch < 1 or micro_batch < 1 or data_parallel < 1:
        raise UsageError("global batch, micro batch and data-parallel size must be >= 1")
    if rampup is None:
        return BatchSchedule.fixed(_running(global_batch, unit, decrease_if_needed))
    increments = _increments(global_batch, rampup)
    per_increment = rampup.samples / increments
    segments: list[tuple[int, int]] = []
    step = consumed = 0
    while consumed <= rampup.samples:
        batch = rampup.start + int(consumed / per_increment) * rampup.increment
        running = _running(batch, unit, decrease_if_needed)
        if not segments or segments[-1][1] != running:
            segments.append((step, running))
        consumed += running
        step += 1
    final = _running(global_batch, unit, decrease_if_needed)
    if segments[-1][1] != final:
        segments.append((step, final))
    return BatchSchedule(tuple(segments))


def _increments(global_batch: int, rampup: Rampup) -> int:
    if rampup.start < 1 or rampup.increment < 1 or rampup.samples < 1:
        raise UsageError("--rampup-batch-size: start and increment must be >= 1, samples "
                         ">= 1")
    difference = global_batch - rampup.start
    if difference <= 0 or difference % rampup.increment:
        raise UsageError(f"--rampup-batch-size: global batch {global_batch} minus start "
                         f"{rampup.start} must be a positive multiple of the increment "
                         f"{rampup.increment}")
    return difference // rampup.increment


def _running(batch: int, unit: int, decrease_if_needed: bool) -> int:
    """Samples a step consumes at global batch `batch`."""
    if decrease_if_needed:
        running = batch // unit * unit
    elif batch % unit:
        raise UsageError(f"global batch {batch} is not divisible by micro batch times "
                         f"data-parallel size ({unit})")
    else:
        running = batch
    if running < 1:
        raise UsageError(f"global batch {batch} holds no whole micro batch of all ranks "
                         f"({unit})")
    return running
