"""A replay's state on disk: a checkpoint folder laid out like a run's checkpoints
(docs/chain-spec.md, "Checkpoints"), read into and written from NumPy arrays.

    model.safetensors              the weights, under their own names
    optimizer/state.safetensors    the optimizer and gradient tensors, under their chain
                                   names (optimizer/<name>, gradients/<name>)

In memory the state is one dict under chain names: weights/<name>, optimizer/<name>,
gradients/<name>. Files are read through the checked safetensors header and their bytes
copied into arrays: nothing is unpickled, no code in a file is run.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from lineage.errors import InputError, UsageError
from lineage.formats import safetensors as st
from lineage.runs.chain import GRADIENTS_PREFIX, OPTIMIZER_PREFIX, WEIGHTS_PREFIX
from lineage.runs.checkpoint_evidence import OPTIMIZER_FILE
from lineage.userfiles import open_regular

MODEL_FILE = "model.safetensors"
# safetensors dtype names -> NumPy dtypes (little-endian); BF16 and FP8 have no NumPy type.
_DTYPES = {
    "BOOL": "?", "U8": "<u1", "I8": "<i1", "I16": "<i2", "U16": "<u2", "F16": "<f2",
    "I32": "<i4", "U32": "<u4", "F32": "<f4", "I64": "<i8", "U64": "<u8", "F64": "<f8",
}  # fmt: skip
_NAMES = {np.dtype(v).name: k for k, v in _DTYPES.items()}


def read_state(folder: Path) -> dict[str, np.ndarray]:
    """The folder's tensors under chain names (weights/… from its *.safetensors files,
    optimizer/… and gradients/… from optimizer/state.safetensors)."""
    state: dict[str, np.ndarray] = {}
    for path in sorted(folder.glob("*.safetensors")):
        state |= {WEIGHTS_PREFIX + k: v for k, v in read_tensors(path).items()}
    optimizer = folder / OPTIMIZER_FILE
    if optimizer.is_file():
        state |= read_tensors(optimizer)
    return state


def read_tensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of one safetensors file as a NumPy array (a copy of its bytes)."""
    header = st.read_header(path)
    base = st.PREFIX_BYTES + header.header_len
    tensors: dict[str, np.ndarray] = {}
    with open_regular(path, what="safetensors file") as handle:
        for info in header.tensors:
            if info.dtype not in _DTYPES:
                raise InputError(path, f"dtype: tensor {info.name!r} is {info.dtype}, which "
                                 "NumPy cannot hold; a replay reads "
                                 f"{', '.join(sorted(_DTYPES))}")
            handle.seek(base + info.start)
            data = handle.read(info.end - info.start)
            array = np.frombuffer(data, dtype=_DTYPES[info.dtype]).reshape(info.shape)
            tensors[info.name] = array.astype(array.dtype.newbyteorder("="), copy=True)
    return tensors


def write_state(folder: Path, state: dict[str, Any], *, step: int) -> None:
    """Write a state under chain names as a checkpoint folder (which must be new or
    empty): weights to model.safetensors, the rest to optimizer/state.safetensors."""
    require_new_folder(folder)
    weights = {k[len(WEIGHTS_PREFIX):]: v for k, v in state.items()
               if k.startswith(WEIGHTS_PREFIX)}
    rest = {k: v for k, v in state.items()
            if k.startswith((OPTIMIZER_PREFIX, GRADIENTS_PREFIX))}
    (folder / "optimizer").mkdir(parents=True, exist_ok=True)
    write_tensors(folder / MODEL_FILE, weights, metadata={"step": str(step)})
    if rest:
        write_tensors(folder / OPTIMIZER_FILE, rest, metadata={"step": str(step)})


def require_new_folder(folder: Path) -> None:
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"{folder}: --save needs a new or empty folder; it holds files")


def write_tensors(path: Path, tensors: dict[str, Any], *, metadata: dict[str, str]) -> None:
    """A safetensors file: 8-byte length, JSON header padded to 8 bytes, data in name
    order (the layout the safetensors library writes)."""
    arrays = {name: np.asarray(tensors[name]) for name in sorted(tensors)}  # 0-d stays 0-d
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for name, array in arrays.items():
        if array.dtype.name not in _NAMES:
            raise UsageError(f"tensor {name!r}: dtype {array.dtype.name} cannot be saved")
        header[name] = {"dtype": _NAMES[array.dtype.name], "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw)
        for array in arrays.values():
            handle.write(array.astype(array.dtype.newbyteorder("<"), copy=False)
                         .tobytes(order="C"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)
