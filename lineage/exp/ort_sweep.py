"""`exp ort-sweep MODEL --input FILE`: the same model under varied session settings.

Every graph optimisation level ONNX Runtime offers, times both execution modes (times each
intra-op thread count asked for), each run on the same input. Each setting's outputs are
compared with the first setting's (optimisations off, sequential):

    max_abs_diff = max |o - r|                  over every element of every output
    rel_diff     = max |o - r| / max |r|        r: the first setting's output, per output;
                                                the largest over the outputs is reported

The settings listed are those read back from each session (`get_session_options()`), not
those asked for.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from lineage.errors import InputError, UsageError
from lineage.exp.ort_session import (
    check_model,
    graph_inputs,
    import_ort,
    load_inputs,
    make_session,
    session_settings,
)

# Lowest first: the first setting, the reference, runs the graph as written.
LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_LAYOUT",
          "ORT_ENABLE_ALL")
MODES = ("ORT_SEQUENTIAL", "ORT_PARALLEL")


def ort_sweep(model: str | Path, inputs: str | Path, *,
              intra_threads: tuple[int, ...] = (0,)) -> dict[str, Any]:
    _, ort = import_ort()
    check_model(model)
    if not intra_threads or any(n < 0 for n in intra_threads):
        raise UsageError("--intra-threads: give thread counts of 0 (the default) or more")
    levels = [level for level in LEVELS if hasattr(ort.GraphOptimizationLevel, level)]
    rows: list[dict[str, Any]] = []
    reference: list[Any] | None = None
    names: list[str] = []
    for threads in intra_threads:
        for level in levels:
            for mode in MODES:
                session = make_session(ort, str(model), optimization=level, mode=mode,
                                       intra_threads=threads, path=model)
                names = [o.name for o in session.get_outputs()]
                outputs = _run(session, inputs)
                reference = reference if reference is not None else outputs
                rows.append({"settings": session_settings(session),
                             **_differences(outputs, reference)})
    return {"model": str(model), "input": str(inputs), "outputs": names,
            "formula": "max|o-r| and max|o-r| / max|r| against the first setting's outputs",
            "settings": rows}


def _run(session: Any, inputs: str | Path) -> list[Any]:
    feeds = load_inputs(inputs, graph_inputs(session))
    try:
        outputs: list[Any] = session.run(None, feeds)
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise InputError(inputs, "onnxruntime could not run the graph on this input "
                                 f"({str(exc).strip().splitlines()[0]})") from None
    return outputs


def _differences(outputs: list[Any], reference: list[Any]) -> dict[str, Any]:
    import numpy as np

    worst_abs, worst_rel = 0.0, 0.0
    for out, ref in zip(outputs, reference, strict=True):
        o, r = np.asarray(out), np.asarray(ref)
        if o.shape != r.shape:
            return {"max_abs_diff": None, "rel_diff": None,
                    "note": f"output shape {list(o.shape)}, first setting {list(r.shape)}"}
        if not o.size or o.dtype.kind not in "biuf":  # strings and the like: not compared
            continue
        o, r = o.astype(np.float64), r.astype(np.float64)
        diff = float(np.max(np.abs(o - r)))
        scale = float(np.max(np.abs(r)))
        worst_abs = max(worst_abs, diff)
        worst_rel = max(worst_rel, diff / scale if scale else (0.0 if diff == 0 else math.inf))
    finite = math.isfinite(worst_abs) and math.isfinite(worst_rel)
    return {"max_abs_diff": worst_abs if finite else None,
            "rel_diff": worst_rel if finite else None,
            "note": None if finite else "inf or NaN in an output"}
