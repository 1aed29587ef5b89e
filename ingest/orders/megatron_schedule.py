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
A run resumed from a checkpoint with another --global-batch-size makes its calculator
anew with that size; the consumed samples, saved in the checkpoint, carry on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lineage.errors import UsageError
from lineage.stream.schedule import BatchSchedule


@dataclass(frozen=True)
class Rampup:
    start: int
    increment: int
    samples: int


def megatron_schedule(global_batch: int, micro_batch: int, data_parallel: int = 1,
                      rampup: Rampup | None = None, decrease_if_needed: bool = False,
                      resumes: Sequence[tuple[int, int]] = ()) -> BatchSchedule:
    """Windows (samples) per step, by step ranges. `resumes`: the (step, global batch) of
    each restart from a checkpoint with another --global-batch-size, from which the
    calculator is made anew with it and counts on from the samples consumed."""
    unit = micro_batch * data_parallel
    if global_batch < 1 or micro_batch < 1 or data_parallel < 1:
        raise UsageError("global batch, micro batch and data-parallel size must be >= 1")
    plan = [(0, global_batch), *resumes]
    for (before, _), (step, batch) in zip(plan, plan[1:], strict=False):
        if step <= before or batch < 1:
            raise UsageError(f"a resume at step {step} with global batch {batch}: resumes "
                             "need steps after 0, in order, and batches of at least 1")
    segments: list[tuple[int, int]] = []
    step = consumed = 0
    for k, (_, batch_size) in enumerate(plan):
        until = plan[k + 1][0] if k + 1 < len(plan) else None
        per_increment = (rampup.samples / _increments(batch_size, rampup)
                         if rampup is not None else 0.0)
        while until is None or step < until:
            if rampup is not None and consumed <= rampup.samples:
                batch = rampup.start + int(consumed / per_increment) * rampup.increment
            else:  # the batch holds from here on (to the next resume)
                batch = batch_size
            running = _running(batch, unit, decrease_if_needed)
            if not segments or segments[-1][1] != running:
                segments.append((step, running))
            if batch == batch_size and (rampup is None or consumed > rampup.samples):
                if until is None:
                    break
                consumed += running * (until - step)
                step = until
                break
            consumed += running
            step += 1
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
