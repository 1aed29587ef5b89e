"""What it costs to run: weights + KV cache at a context and batch + overhead.

The estimate states its assumptions: the KV cache in 16-bit floats, two tensors (K and V)
per layer of num_key_value_heads x head_dim per token (grouped-query attention aware),
and an overhead of 1 GiB plus 10 % of the weights for runtime buffers and activations.
Reality varies with the runtime; the assumptions say which way.

Only a decoder keeps a KV cache. An encoder (BERT, sentence embedders) reads its whole
input at once and caches nothing; a recurrent model (Mamba, RWKV) keeps a fixed-size state.
The context is never taken beyond the model's maximum positions (`max_position_embeddings`,
`<arch>.context_length`): a larger request is clamped, and the estimate says so. A folder
without weights gets no estimate at all.

The total is then set beside the memory of common machines (`fits`): GPUs whose whole
memory holds the model, and Macs with Apple silicon, whose GPU shares the machine's
memory but may use only part of it (macOS gives the GPU about two thirds of the memory
up to 36 GB, about three quarters above: the working-set limit Metal reports).
"""

from __future__ import annotations

from typing import Any

GIB = 2**30
KV_BYTES = 2
OVERHEAD_FIXED = GIB
OVERHEAD_SHARE = 0.10
_NO_CACHE = {
    "encoder": "no KV cache: {family} is an encoder ({evidence}); it attends over the whole "
               "input at once and caches nothing between tokens",
    "recurrent": "no KV cache: {family} is a recurrent model ({evidence}); it keeps a "
                 "fixed-size state instead",
}  # fmt: skip


def estimate_memory(
    *, weights_bytes: int, architecture: dict[str, Any], context: int, batch: int,
    weights_present: bool = True, absent_reason: str | None = None,
    uncounted: list[str] | None = None,
) -> dict[str, Any]:
    if not weights_present:
        return _no_estimate(context, batch, absent_reason or "no weights in this folder")
    used, clamp_note = _clamp(context, architecture.get("positions"))
    assumptions = [f"weights: {weights_bytes:,} bytes as stored, buffers included "
                   "(no dequantization)"]
    if uncounted:
        assumptions.append("not counted: the weights in pickle files (never loaded): "
                           + ", ".join(uncounted))
    if clamp_note:
        assumptions.append(clamp_note)
    kv, kv_note = _kv_cache(architecture, used, batch)
    assumptions.append(kv_note)
    assumptions.append(f"overhead: 1 GiB + {OVERHEAD_SHARE:.0%} of the weights "
                       "(runtime buffers, activations)")
    overhead = OVERHEAD_FIXED + int(weights_bytes * OVERHEAD_SHARE)
    total = weights_bytes + (kv or 0) + overhead
    return {"estimated": True, "reason": None, "weights_bytes": weights_bytes,
            "kv_cache_bytes": kv, "kv_cache_note": kv_note, "overhead_bytes": overhead,
            "total_bytes": total, "context": used,
            "context_requested": context, "context_clamped": used != context,
            "max_positions": architecture.get("positions"), "batch": batch,
            "assumptions": assumptions, "fits": fits(total) if kv is not None else []}


GB = 10**9
# (machine, its memory): GPUs as sold (decimal GB), Macs as configured
GPUS = (("GPU 16 GB", 16 * GB), ("GPU 24 GB", 24 * GB), ("GPU 48 GB", 48 * GB),
        ("GPU 80 GB", 80 * GB))
MACS = tuple((f"Mac {n} GB unified", n * GIB) for n in (16, 24, 32, 36, 48, 64, 96, 128, 192))


def usable_by_gpu(unified_bytes: int) -> int:
    """What a Mac's GPU may use of its unified memory: about 2/3 up to 36 GB, 3/4 above."""
    return unified_bytes * 2 // 3 if unified_bytes <= 36 * GIB else unified_bytes * 3 // 4


def fits(total: int) -> list[dict[str, Any]]:
    """The estimate against each machine: {machine, memory_bytes, usable_bytes, fits}."""
    rows = [{"machine": name, "memory_bytes": size, "usable_bytes": size, "fits": total <= size}
            for name, size in GPUS]
    rows += [{"machine": name, "memory_bytes": size, "usable_bytes": usable_by_gpu(size),
              "fits": total <= usable_by_gpu(size)} for name, size in MACS]
    return rows


def _clamp(context: int, positions: int | None) -> tuple[int, str | None]:
    if positions and context > positions:
        return positions, (f"context: {context:,} requested, clamped to the model's maximum "
                           f"of {positions:,} positions")
    return context, None


def _kv_cache(arch: dict[str, Any], context: int, batch: int) -> tuple[int | None, str]:
    """(bytes, the sentence saying how they were found), bytes 0 for no cache, None unknown."""
    kind = arch.get("kind")
    family = arch.get("name") or "this model"
    if kind in _NO_CACHE:
        return 0, _NO_CACHE[kind].format(family=family, evidence=arch["kind_evidence"])
    layers, kv_heads, head_dim = arch.get("layers"), arch.get("kv_heads"), arch.get("head_dim")
    if not (layers and kv_heads and head_dim):
        return None, ("KV cache unknown: layers, KV heads or head size not found in "
                      f"{arch.get('source') or 'any config'}")
    kv = 2 * layers * kv_heads * head_dim * context * batch * KV_BYTES
    note = (f"KV cache: 2 x {layers} layers x {kv_heads} KV heads x {head_dim} head dim x "
            f"context {context:,} x batch {batch} x {KV_BYTES} bytes (FP16), shape from "
            f"{arch['source']}")
    if kind == "encoder-decoder":
        note += "; the decoder's self-attention only (the cross-attention cache is not counted)"
    elif kind == "unknown":
        note += f"; a decoder is assumed ({arch['kind_evidence']})"
    return kv, note


def _no_estimate(context: int, batch: int, reason: str) -> dict[str, Any]:
    return {"estimated": False, "reason": reason, "weights_bytes": 0, "kv_cache_bytes": None,
            "kv_cache_note": f"no KV cache: {reason}", "overhead_bytes": None,
            "total_bytes": None, "context": context, "context_requested": context,
            "context_clamped": False, "max_positions": None, "batch": batch,
            "assumptions": [f"not estimated: {reason}"], "fits": []}
