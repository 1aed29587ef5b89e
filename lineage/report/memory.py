"""What it costs to run: weights + KV cache at a context and batch + overhead.

The estimate states its assumptions: the KV cache in 16-bit floats, two tensors (K and V)
per layer of num_key_value_heads x head_dim per token (grouped-query attention aware),
and an overhead of 1 GiB plus 10 % of the weights for runtime buffers and activations.
Reality varies with the runtime; the assumptions say which way.
"""

from __future__ import annotations

from typing import Any

GIB = 2**30
KV_BYTES = 2
OVERHEAD_FIXED = GIB
OVERHEAD_SHARE = 0.10


def estimate_memory(
    *, weights_bytes: int, layers: int | None, kv_heads: int | None, head_dim: int | None,
    context: int, batch: int, source: str,
) -> dict[str, Any]:
    assumptions = [
        f"weights: {weights_bytes:,} bytes as stored (no dequantization)",
        f"KV cache: 2 x layers x kv_heads x head_dim x context {context:,} x batch {batch} "
        f"x {KV_BYTES} bytes (FP16), shape from {source}",
        f"overhead: 1 GiB + {OVERHEAD_SHARE:.0%} of the weights (runtime buffers, activations)",
    ]
    kv = None
    if layers and kv_heads and head_dim:
        kv = 2 * layers * kv_heads * head_dim * context * batch * KV_BYTES
    else:
        assumptions.append("KV cache unknown: layers, KV heads or head size not found")
    overhead = OVERHEAD_FIXED + int(weights_bytes * OVERHEAD_SHARE)
    return {"weights_bytes": weights_bytes, "kv_cache_bytes": kv, "overhead_bytes": overhead,
            "total_bytes": weights_bytes + (kv or 0) + overhead, "context": context,
            "batch": batch, "assumptions": assumptions}
