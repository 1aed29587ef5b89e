"""What a run declares about how its steps were computed, beyond the chain's own fields.

A lineage chain declares it in its header's `config` (which the genesis commits to, so it
cannot be changed afterwards); a foreign chain at the header's top level. Today one
declaration: `reduction`, how the run summed gradients across devices.

- `"deterministic"`: a fixed order (e.g. shards summed in ascending order, a fixed-pairing
  tree across nodes), so a replay of a step reproduces its state hash bit for bit;
- `"non-deterministic"`: an order that can change from run to run (e.g. NCCL's default
  all-reduce): a replay's mismatch then proves nothing, and the audit treats it as it
  treats a mismatch from a machine that swapped (inconclusive).

Undeclared: nothing is assumed, and mismatches count as they always have.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REDUCTIONS = ("deterministic", "non-deterministic")


def declared_reduction(header: Mapping[str, Any]) -> str | None:
    """The run's declared reduction mode, or None; ValueError when it is not one of
    REDUCTIONS."""
    config = header.get("config")
    holder = config if header.get("chain", "").startswith("lineage-chain/") and \
        isinstance(config, Mapping) else header
    value = holder.get("reduction")
    if value is None or value in REDUCTIONS:
        return value
    where = "config.reduction" if holder is config else "reduction"
    raise ValueError(f"`{where}` must be one of {', '.join(REDUCTIONS)}, not {value!r}")
