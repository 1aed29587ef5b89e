"""What the order importers' per-run work costs at real size, beside the framework's own.

    .venv/bin/python bench/order_kernels.py [--runs 3] [--samples 10000000]

- **cyclic shuffle**: lineage's `torch_randperm` (numpy's Mersenne Twister and a Fisher-Yates
  loop) for one epoch of `--samples`, beside `torch.randperm` itself when torch is installed;
- **instance filter**: `is_masked` on 4,096-token instances of random tokens (the common
  case: nothing repeats), per instance;
- **interleaving**: `interleaved_segments` for 1M windows of 2 documents x 4 pieces;
- **packing**: `pack`'s best fit for 1M documents of log-normal lengths at 4,096.

Medians of `--runs`. Results go to bench/out/order-kernels.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def median_seconds(work: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=10_000_000)
    args = parser.parse_args()

    from lineage.ingest.orders.megatron_cyclic import torch_randperm
    from lineage.ingest.orders.olmo_filter import InstanceFilter, is_masked
    from lineage.ingest.orders.olmo_interleaved import (
        Interleaving,
        interleave,
        interleaved_segments,
    )
    from lineage.ingest.orders.olmo_packed import _best_fit

    out: dict[str, Any] = {"samples": args.samples, "runs": args.runs}
    out["randperm_s"] = median_seconds(lambda: torch_randperm(args.samples, 3), args.runs)
    try:
        import torch

        out["torch_randperm_s"] = median_seconds(lambda: torch.randperm(
            args.samples, generator=torch.Generator().manual_seed(3)), args.runs)
    except ImportError:
        out["torch_randperm_s"] = None

    rng = np.random.default_rng(0)
    instances = [rng.integers(0, 50_000, 4096) for _ in range(300)]
    rule = InstanceFilter()
    out["filter_ms_per_instance"] = round(1000 * median_seconds(
        lambda: [is_masked(tokens, rule) for tokens in instances], args.runs) / 300, 3)

    documents = 2_000_000
    lengths = rng.integers(10, 5000, documents)
    starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1]))
    layout = SimpleNamespace(starts=starts, ends=starts + lengths)
    mixing = Interleaving(2, 4, 43)
    dataset = interleave([documents // 2, documents // 2], mixing)
    order = rng.permutation(dataset.size)
    held = np.arange(documents)
    out["interleave_1m_windows_s"] = median_seconds(lambda: interleaved_segments(
        order, dataset, held, layout, held, 4096, mixing, True), args.runs)  # type: ignore[arg-type]

    pieces = np.sort(np.minimum(rng.lognormal(6.5, 1.2, 1_000_000).astype(np.int64) + 1,
                                4096))[::-1]
    out["best_fit_1m_documents_s"] = median_seconds(lambda: _best_fit(pieces, 4096), args.runs)

    (REPO / "bench" / "out").mkdir(exist_ok=True)
    (REPO / "bench" / "out" / "order-kernels.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
