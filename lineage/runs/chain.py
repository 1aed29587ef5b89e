"""`lineage-chain/2` (docs/chain-spec.md): hashing, and the helper a training loop calls.

    writer = ChainWriter("steps.jsonl", config=cfg, stream=store.stream("main"),
                         world_size=4, skip_rule=SkipRule(5.0, 4), checkpoint_every=100)
    for step in ...:
        ... train ...
        writer.append(step, weights=params, optimizer=moments, gradients=clipped,
                      batch_digests=reader.batch_digests(step, 4),
                      loss=loss, grad_norm=norm, lr=lr, clipped=c, skipped=s,
                      rng={"seed": seed, "counter": counter})
    writer.close()  # the end record: how many steps the run had, and its last state

Tensors are anything exposing the buffer protocol (NumPy arrays included); torch tensors
work when torch is installed, and torch is never required.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import blake3

from lineage.runs.skip_rule import SkipRule
from lineage.stream.batch_digest import BATCH_TAG, batch_digest  # noqa: F401 - part of the chain spec
from lineage.stream.query import stream_schedule
from lineage.stream.record import StreamRecord

CHAIN_SPEC = "lineage-chain/2"
CHAIN_SPEC_V1 = "lineage-chain/1"  # still verified; never written
CHAIN_SPECS = (CHAIN_SPEC_V1, CHAIN_SPEC)
ALGORITHM = "blake3"
GENESIS_TAG = f"{CHAIN_SPEC} genesis\n".encode()
STEP_TAG = f"{CHAIN_SPEC} step\n".encode()
END_TAG = f"{CHAIN_SPEC} end\n".encode()
# Tensor name prefixes of state_digest (docs/chain-spec.md, "State digest").
WEIGHTS_PREFIX, OPTIMIZER_PREFIX, GRADIENTS_PREFIX = "weights/", "optimizer/", "gradients/"
# Integers in a chain (steps, cursors, counts) stay within what every JSON reader holds
# exactly (IEEE doubles), and JSON values nest at most this deep.
MAX_INT = 2**53 - 1
MAX_DEPTH = 32
TENSORS_TAG = b"lineage-tensors/1\n"

# NumPy dtype names (and buffer-protocol format characters) -> safetensors dtype names.
_NUMPY_DTYPES = {
    "bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "uint16": "U16",
    "float16": "F16", "bfloat16": "BF16", "int32": "I32", "uint32": "U32", "float32": "F32",
    "int64": "I64", "uint64": "U64", "float64": "F64",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
}  # fmt: skip
_BUFFER_FORMATS = {
    "?": "BOOL", "B": "U8", "b": "I8", "h": "I16", "H": "U16", "e": "F16", "i": "I32",
    "I": "U32", "f": "F32", "q": "I64", "l": "I64", "Q": "U64", "L": "U64", "d": "F64",
}  # fmt: skip


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, shortest floats; non-finite floats as strings."""
    try:  # the common case: nothing to replace, no copy of the value
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    except ValueError:  # a non-finite float somewhere
        return json.dumps(_finite(value), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def blake3_hex(data: bytes) -> str:
    return "blake3:" + blake3.blake3(data).hexdigest()


def genesis_hash(header: Mapping[str, Any]) -> str:
    """The genesis of a lineage-chain/2 header: every field but `genesis` is committed,
    the algorithm and the chain's kind included, so no header edit goes unnoticed."""
    body = {k: v for k, v in header.items() if k != "genesis"}
    return blake3_hex(GENESIS_TAG + canonical_json(body).encode("utf-8"))


def genesis_hash_v1(header: Mapping[str, Any]) -> str:
    """The genesis of a lineage-chain/1 header (config, stream, corpus, world size only)."""
    body = {"config": header.get("config", {}), "manifest_hash": header.get("manifest_hash"),
            "stream_spec_hash": header.get("stream_spec_hash"),
            "world_size": header.get("world_size")}
    return blake3_hex(f"{CHAIN_SPEC_V1} genesis\n".encode() +
                      canonical_json(body).encode("utf-8"))


def expected_genesis(header: Mapping[str, Any]) -> str:
    return genesis_hash_v1(header) if header.get("chain") == CHAIN_SPEC_V1 \
        else genesis_hash(header)


def step_hash(record: Mapping[str, Any], *, spec: str = CHAIN_SPEC) -> str:
    """The state hash of a step record (the record's own `state_hash` left out)."""
    body = {k: v for k, v in record.items() if k != "state_hash"}
    tag = STEP_TAG if spec == CHAIN_SPEC else f"{spec} step\n".encode()
    return blake3_hex(tag + canonical_json(body).encode("utf-8"))


def line_step_hash(line: str, record: Mapping[str, Any], *, spec: str = CHAIN_SPEC) -> str:
    """step_hash of a record whose canonical line is known: the line with its top-level
    `state_hash` cut out is the canonical body, so it need not be serialised again."""
    value = record.get("state_hash")
    if isinstance(value, str) and min(record) != "state_hash":
        piece = ',"state_hash":' + json.dumps(value, ensure_ascii=False)
        if line.count(piece) == 1:  # the top-level one (not first, so after a comma)
            tag = STEP_TAG if spec == CHAIN_SPEC else f"{spec} step\n".encode()
            return blake3_hex(tag + line.replace(piece, "").encode("utf-8"))
    return step_hash(record, spec=spec)


def end_hash(record: Mapping[str, Any]) -> str:
    """The state hash of an end record (lineage-chain/2)."""
    body = {k: v for k, v in record.items() if k != "state_hash"}
    return blake3_hex(END_TAG + canonical_json(body).encode("utf-8"))


def is_end_record(record: Mapping[str, Any]) -> bool:
    return "end" in record


def record_hash(record: Mapping[str, Any], *, spec: str = CHAIN_SPEC) -> str:
    """The state hash a step or end record must carry."""
    return end_hash(record) if is_end_record(record) else step_hash(record, spec=spec)


# -- tensors ---------------------------------------------------------------------------


class TensorDigest:
    """Incremental `lineage-tensors/1` digest; tensors must arrive sorted by name."""

    def __init__(self) -> None:
        self._hasher = blake3.blake3(TENSORS_TAG)
        self._last: bytes | None = None

    def add(self, name: str, dtype: str, shape: Iterable[int], data: bytes | memoryview) -> None:
        self.add_chunks(name, dtype, shape, len(data), [data])

    def add_chunks(self, name: str, dtype: str, shape: Iterable[int], nbytes: int,
                   chunks: Iterable[bytes | memoryview]) -> None:
        """Add a tensor whose `nbytes` bytes arrive in pieces (e.g. read from a file)."""
        encoded = name.encode("utf-8")
        if self._last is not None and encoded <= self._last:
            raise ValueError(f"tensors must be added in name order: {name!r}")
        self._last = encoded
        dims = list(shape)
        head = struct.pack("<I", len(encoded)) + encoded
        head += struct.pack("<B", len(dtype)) + dtype.encode("ascii")
        head += struct.pack("<B", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        head += struct.pack("<Q", nbytes)
        self._hasher.update(head)
        seen = 0
        for chunk in chunks:
            self._hasher.update(chunk)
            seen += len(chunk)
        if seen != nbytes:
            raise ValueError(f"tensor {name!r}: {seen} bytes read, {nbytes} expected")

    def hexdigest(self) -> str:
        return "blake3:" + self._hasher.hexdigest()


def tensor_digest(tensors: Mapping[str, Any]) -> str:
    """Digest of named tensors (NumPy arrays, buffer-protocol objects, torch tensors)."""
    digest = TensorDigest()
    for name in sorted(tensors, key=lambda n: n.encode("utf-8")):
        dtype, shape, data = tensor_bytes(tensors[name])
        digest.add(name, dtype, shape, data)
    return digest.hexdigest()


def tensor_bytes(value: Any) -> tuple[str, tuple[int, ...], memoryview]:
    """(safetensors dtype, shape, little-endian C-order bytes) of one tensor."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        return _torch_bytes(value)
    if hasattr(value, "dtype") and hasattr(value, "tobytes") and hasattr(value, "shape"):
        name = value.dtype.name
        if name not in _NUMPY_DTYPES:
            raise TypeError(f"unsupported tensor dtype {name}")
        if getattr(value.dtype, "byteorder", "=") == ">":
            value = value.byteswap().view(value.dtype.newbyteorder("<"))
        contiguous = value if value.flags["C_CONTIGUOUS"] else value.copy(order="C")
        shape = tuple(int(d) for d in value.shape)
        if contiguous.nbytes == 0:  # a view with a zero in its shape cannot be cast
            return _NUMPY_DTYPES[name], shape, memoryview(b"")
        return _NUMPY_DTYPES[name], shape, memoryview(contiguous).cast("B")
    view = memoryview(value)
    fmt = view.format.lstrip("<=@")
    if fmt not in _BUFFER_FORMATS:
        raise TypeError(f"unsupported buffer format {view.format!r}")
    data = view.cast("B") if view.nbytes else memoryview(b"")
    return _BUFFER_FORMATS[fmt], tuple(view.shape or ()), data


def _torch_bytes(tensor: Any) -> tuple[str, tuple[int, ...], memoryview]:
    import torch  # present: the caller passed a torch tensor

    flat = tensor.detach().cpu().contiguous()
    if flat.dtype == torch.bfloat16:  # NumPy has no bfloat16: digest the raw bits
        raw = flat.view(torch.int16).numpy()
        return "BF16", tuple(int(d) for d in flat.shape), memoryview(raw).cast("B")
    return tensor_bytes(flat.numpy())


# -- batches ---------------------------------------------------------------------------


# -- the trainer's writer ---------------------------------------------------------------


class ChainWriter:
    """Appends canonical step records to a JSONL step log, folding each into the next.

    Each step reads the B windows after the previous step's cursor (after the windows a
    declared data skip jumps over), B the stream's windows per step at that step (its
    batch, or its schedule's); `close()` ends the chain with its end record.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        config: Mapping[str, Any],
        stream: StreamRecord | Mapping[str, Any],
        world_size: int,
        skip_rule: SkipRule | None = None,
        checkpoint_every: int | None = None,
        durable: bool = False,
    ) -> None:
        self.path = Path(path)
        self.durable = durable
        if isinstance(stream, StreamRecord):  # a StreamReader's `info`
            stream = stream.to_row()
        # windows per step, step by step (the stream's batch, or its schedule)
        self.schedule = stream_schedule(stream) if stream.get("batch") is not None else None
        self.header: dict[str, Any] = {
            "algorithm": ALGORITHM, "chain": CHAIN_SPEC,
            "checkpoint_every": checkpoint_every, "config": dict(config),
            "manifest_hash": stream["manifest_hash"],
            "skip_rule": skip_rule.to_json() if skip_rule else None,
            "stream_spec_hash": stream["spec_hash"], "world_size": world_size,
        }
        self.header["genesis"] = genesis_hash(self.header)
        self.prev_hash = self.header["genesis"]
        self.last_step: int | None = None
        self.cursor = 0
        self.closed = False
        if self.path.exists() and self.path.stat().st_size:
            self._resume()
        else:
            self._write_line(self.header)

    def append(
        self,
        step: int,
        *,
        weights: Mapping[str, Any],
        batch_digests: list[str],
        loss: float,
        grad_norm: float,
        lr: float,
        clipped: bool,
        skipped: bool,
        rng: Mapping[str, Any],
        cursor: int | None = None,
        optimizer: Mapping[str, Any] | None = None,
        gradients: Mapping[str, Any] | None = None,
        data_skip: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Hash this step's state and append its record; returns the record.

        `data_skip` ({"windows": n, "reason": "…"}) declares n windows jumped over before
        this step's batch (a resume past damaged data, say). `cursor` may be left out: it
        follows from the previous one; when given it must agree.
        """
        if self.closed:
            raise ValueError(f"{self.path}: the chain is closed; nothing follows its end")
        expected_step = 0 if self.last_step is None else self.last_step + 1
        if step != expected_step:
            raise ValueError(f"step {step} does not follow step {self.last_step} "
                             f"(the chain starts at step 0 and goes one step at a time)")
        cursor = self._next_cursor(step, cursor, data_skip)
        state = {f"{WEIGHTS_PREFIX}{k}": v for k, v in weights.items()}
        state |= {f"{OPTIMIZER_PREFIX}{k}": v for k, v in (optimizer or {}).items()}
        state |= {f"{GRADIENTS_PREFIX}{k}": v for k, v in (gradients or {}).items()}
        record: dict[str, Any] = {
            "batch_digests": list(batch_digests), "clipped": bool(clipped), "cursor": cursor,
            "grad_norm": float(grad_norm), "loss": float(loss), "lr": float(lr),
            "prev_hash": self.prev_hash, "rng": dict(rng), "skipped": bool(skipped),
            "state_digest": tensor_digest(state), "step": step,
            "weights_digest": tensor_digest(weights),
        }
        if data_skip is not None:
            record["data_skip"] = {"reason": str(data_skip["reason"]),
                                   "windows": int(data_skip["windows"])}
        record["state_hash"] = step_hash(record)
        self._write_line(record)
        self.prev_hash, self.last_step, self.cursor = record["state_hash"], step, cursor
        return record

    def close(self) -> dict[str, Any]:
        """Append the end record (step count and last state hash); returns it."""
        if self.closed:
            raise ValueError(f"{self.path}: the chain is already closed")
        steps = 0 if self.last_step is None else self.last_step + 1
        record: dict[str, Any] = {"end": True, "last_state_hash": self.prev_hash,
                                  "steps": steps}
        record["state_hash"] = end_hash(record)
        self._write_line(record)
        self.closed = True
        return record

    def _next_cursor(self, step: int, cursor: int | None,
                     data_skip: Mapping[str, Any] | None) -> int:
        jump = 0
        if data_skip is not None:
            jump = data_skip.get("windows")  # type: ignore[assignment]
            if not isinstance(jump, int) or isinstance(jump, bool) or jump < 1 or \
                    not isinstance(data_skip.get("reason"), str) or not data_skip["reason"]:
                raise ValueError("data_skip needs integer windows >= 1 and a reason")
        if self.schedule is None:
            if cursor is None:
                raise ValueError("the stream has no batch size: give cursor")
            return cursor
        batch = self.schedule.windows_of(step)
        expected = self.cursor + jump + batch
        if cursor is not None and cursor != expected:
            raise ValueError(f"cursor {cursor} is not {expected} (previous cursor "
                             f"{self.cursor} + skipped {jump} + batch {batch})")
        return expected

    def _write_line(self, value: Mapping[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8", newline="\n") as handle:
            handle.write(canonical_json(value) + "\n")
            if self.durable:
                handle.flush()
                os.fsync(handle.fileno())

    def _resume(self) -> None:
        """Continue an existing log (a restart): the header must match this run."""
        lines = self.path.read_text(encoding="utf-8").splitlines()
        if json.loads(lines[0]) != self.header:
            raise ValueError(f"{self.path}: the log belongs to another run configuration")
        if len(lines) > 1:
            last = json.loads(lines[-1])
            if is_end_record(last):
                raise ValueError(f"{self.path}: the chain is closed; start a new run")
            self.prev_hash, self.last_step = last["state_hash"], last["step"]
            self.cursor = int(last["cursor"])
