"""`exp compare-outputs A B --input FILE`: where a converted model's error first grows.

Both graphs run with ONNX Runtime on the same input, every value produced by a node of
both graphs (same name) exposed as an extra graph output. Per value, in A's node order:

    relative error  e_i = max |a - b| / max |a|     (a: A's value, b: B's; whole tensor)
    growth          g_i = e_i / e_(i-1)             (the previous compared value's error)

A value whose error grows by more than `jump_ratio` (or appears where the previous one was
exact: e_(i-1) = 0 < e_i; the inputs before the first value are the same, so e_0 counts as
0) is a jump; the first of them is where the error first jumps. Graph optimisations are off
in both sessions, so each value is its own node's result, not a fused one's.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from lineage.errors import InputError
from lineage.exp.ort_session import (
    check_model,
    graph_inputs,
    import_ort,
    load_inputs,
    make_session,
    node_values,
    with_exposed_values,
)

DEFAULT_JUMP_RATIO = 10.0


def compare_outputs(a: str | Path, b: str | Path, inputs: str | Path, *,
                    jump_ratio: float = DEFAULT_JUMP_RATIO) -> dict[str, Any]:
    """The per-layer error table (module docstring) as a dict."""
    _, ort = import_ort()
    check_model(a)
    check_model(b)
    values_a = node_values(a)
    in_b = {name for name, _ in node_values(b)}
    shared = [(name, op) for name, op in values_a if name in in_b]
    if not shared:
        raise InputError(b, f"no value produced by a node has the same name as in {a}: "
                            "nothing to compare layer by layer")
    names = [name for name, _ in shared]
    results = []
    for path in (a, b):
        session = make_session(ort, with_exposed_values(path, names),
                               optimization="ORT_DISABLE_ALL", path=path)
        feeds = load_inputs(inputs, graph_inputs(session))
        try:
            outputs = session.run(names, feeds)
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise InputError(inputs, "onnxruntime could not run the graph on this input "
                                     f"({str(exc).strip().splitlines()[0]})") from None
        results.append(outputs)
    layers = _table(shared, results[0], results[1], jump_ratio)
    first = next((layer["value"] for layer in layers if layer["jump"]), None)
    return {"a": str(a), "b": str(b), "input": str(inputs),
            "formula": "max|a-b| / max|a| per value; growth = error / previous error",
            "jump_ratio": jump_ratio, "first_jump": first, "layers": layers}


def _table(shared: list[tuple[str, str]], outs_a: list[Any], outs_b: list[Any],
           jump_ratio: float) -> list[dict[str, Any]]:
    import numpy as np

    layers: list[dict[str, Any]] = []
    previous = 0.0  # the inputs are the same in both runs
    for (name, op), va, vb in zip(shared, outs_a, outs_b, strict=True):
        a, b = np.asarray(va), np.asarray(vb)
        row: dict[str, Any] = {"value": name, "op": op, "shape": list(a.shape),
                               "max_abs_diff": None, "max_abs_a": None, "rel_error": None,
                               "growth": None, "jump": False, "note": None}
        if a.shape != b.shape:
            row["note"] = f"shapes differ: {list(a.shape)} in A, {list(b.shape)} in B"
            layers.append(row)
            continue
        if a.dtype.kind not in "biuf" or b.dtype.kind not in "biuf":
            row["note"] = f"not numeric ({a.dtype}): not compared"
            layers.append(row)
            continue
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        diff = float(np.max(np.abs(fa - fb))) if fa.size else 0.0
        scale = float(np.max(np.abs(fa))) if fa.size else 0.0
        row["max_abs_diff"], row["max_abs_a"] = _finite(diff), _finite(scale)
        if not (math.isfinite(diff) and math.isfinite(scale)):
            row["note"] = "inf or NaN in a value: not compared"
            layers.append(row)
            continue
        error = diff / scale if scale else (0.0 if diff == 0 else math.inf)
        if not math.isfinite(error):
            row["note"] = "A's value is all zeros and B's is not: no relative error"
            layers.append(row)
            continue
        row["rel_error"] = error
        row["growth"] = error / previous if previous else None
        row["jump"] = error > previous * jump_ratio if previous else error > 0
        previous = error
        layers.append(row)
    return layers


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
