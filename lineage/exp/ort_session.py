"""ONNX Runtime sessions for the numerics commands: the import check, the settings a session
really uses, the graph inputs read from a .npy or .npz file, and a graph with its
intermediate values exposed as outputs (docs/experiments.md).

Input files are read with `numpy.load(allow_pickle=False)`: an array of Python objects is
refused, never unpickled. A model is checked by lineage's own bounded reader before the
onnx package loads it (its external data must stay inside the model's folder).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lineage.errors import InputError, UsageError
from lineage.formats.onnx_reader import read_onnx
from lineage.userfiles import open_regular

INSTALL = "onnxruntime is not installed: pip install onnx onnxruntime"
MAX_INPUT_BYTES = 4 << 30


def import_ort() -> tuple[Any, Any]:
    """(onnx, onnxruntime), or a usage error (exit 2) saying how to install them."""
    try:
        import onnx
        import onnxruntime
    except ImportError as exc:
        raise UsageError(INSTALL) from exc
    return onnx, onnxruntime


def session_settings(session: Any) -> dict[str, Any]:
    """The settings a session runs with, read back from it (`get_session_options()`):
    0 threads means ONNX Runtime's own default (one per physical core, for intra-op)."""
    options = session.get_session_options()
    return {"graph_optimization_level": _enum_name(options.graph_optimization_level),
            "execution_mode": _enum_name(options.execution_mode),
            "intra_op_num_threads": int(options.intra_op_num_threads),
            "inter_op_num_threads": int(options.inter_op_num_threads)}


def _enum_name(value: Any) -> str:
    return str(getattr(value, "name", value)).rsplit(".", 1)[-1]


def make_session(ort: Any, model: bytes | str, *, optimization: str = "ORT_ENABLE_ALL",
                 mode: str = "ORT_SEQUENTIAL", intra_threads: int = 0,
                 inter_threads: int = 0, providers: tuple[str, ...] = ("CPUExecutionProvider",),
                 path: str | Path = "") -> Any:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, optimization)
    options.execution_mode = getattr(ort.ExecutionMode, mode)
    options.intra_op_num_threads = intra_threads
    options.inter_op_num_threads = inter_threads
    try:
        return ort.InferenceSession(model, sess_options=options, providers=list(providers))
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise InputError(path, "onnxruntime could not create a session "
                               f"({str(exc).strip().splitlines()[0]})") from None


def check_model(path: str | Path) -> None:
    """Exists, is a regular file, and passes the bounded reader (before onnx sees it)."""
    if not os.path.isfile(path):
        raise InputError(path, "no such model file")
    read_onnx(path)


def graph_inputs(session: Any) -> list[str]:
    return [i.name for i in session.get_inputs()]


def load_inputs(path: str | Path, names: list[str]) -> dict[str, Any]:
    """The feeds for `names` from a .npy (a graph with one input) or .npz (one array per
    input name) file."""
    import numpy as np

    with open_regular(path, what="input file", max_bytes=MAX_INPUT_BYTES) as handle:
        try:
            loaded = np.load(handle, allow_pickle=False)
            arrays = ({name: loaded[name] for name in loaded.files}
                      if isinstance(loaded, np.lib.npyio.NpzFile) else {"": loaded})
        except ValueError as exc:
            rule = ("an array of Python objects (a pickle): refused" if "pickle" in str(exc)
                    else f"not a .npy or .npz array file ({exc})")
            raise InputError(path, rule) from None
        except (OSError, EOFError, KeyError) as exc:
            raise InputError(path, f"not a .npy or .npz array file ({exc})") from None
    if "" in arrays:
        if len(names) != 1:
            raise InputError(path, f"a .npy holds one array, the graph takes {len(names)} "
                                   f"inputs ({', '.join(names)}): give a .npz keyed by name")
        return {names[0]: arrays[""]}
    missing = [n for n in names if n not in arrays]
    if missing:
        raise InputError(path, f"no array for graph input {', '.join(missing)} "
                               f"(the file holds {', '.join(sorted(arrays)) or 'none'})")
    return {n: arrays[n] for n in names}


def with_exposed_values(path: str | Path, names: list[str]) -> bytes:
    """The model, copied in memory, with `names` added as graph outputs."""
    onnx, _ = import_ort()
    model = onnx.load(str(path))
    present = {o.name for o in model.graph.output}
    for name in names:
        if name not in present:
            model.graph.output.append(onnx.ValueInfoProto(name=name))
    data: bytes = model.SerializeToString()
    return data


def node_values(path: str | Path) -> list[tuple[str, str]]:
    """(value name, op type of the node producing it), in the graph's node order."""
    model = read_onnx(path, nodes=True)
    return [(name, node.op_type) for node in model.nodes for name in node.outputs if name]
