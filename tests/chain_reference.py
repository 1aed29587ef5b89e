"""A second, deliberately plain implementation of docs/chain-spec.md (lineage-chain/2).

Written from the spec text alone and sharing no code with lineage/: it hashes headers,
records, end records and tensors, writes logs, and checks a log line by line, so the
real writer, ingest and verifier can be compared with it on any input.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import blake3

SPEC = "lineage-chain/2"
MAX_INT = 2**53 - 1


def H(data: bytes) -> str:
    return "blake3:" + blake3.blake3(data).hexdigest()


def canonical(value: Any) -> str:
    def fix(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return "nan"
        if isinstance(v, float) and math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v
    return json.dumps(fix(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def without(record: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != key}


def genesis(header: dict[str, Any]) -> str:
    return H(f"{SPEC} genesis\n".encode() + canonical(without(header, "genesis")).encode())


def step_hash(record: dict[str, Any]) -> str:
    return H(f"{SPEC} step\n".encode() + canonical(without(record, "state_hash")).encode())


def end_hash(record: dict[str, Any]) -> str:
    return H(f"{SPEC} end\n".encode() + canonical(without(record, "state_hash")).encode())


DTYPES = {"float32": "F32", "float64": "F64", "int64": "I64", "int32": "I32",
          "float16": "F16", "uint8": "U8"}


def tensor_digest(tensors: dict[str, Any]) -> str:
    out = b""
    for name in sorted(tensors, key=lambda n: n.encode("utf-8")):
        array = tensors[name]
        data = array.astype(array.dtype.newbyteorder("<")).tobytes(order="C")
        dtype = DTYPES[array.dtype.name].encode()
        encoded = name.encode("utf-8")
        out += struct.pack("<I", len(encoded)) + encoded + struct.pack("<B", len(dtype)) + dtype
        out += struct.pack("<B", array.ndim) + b"".join(struct.pack("<Q", d) for d in array.shape)
        out += struct.pack("<Q", len(data)) + data
    return H(b"lineage-tensors/1\n" + out)


def batch_digest(segments: list[tuple[int, str, int, int]]) -> str:
    lines = "".join(f"{w}\t{d}\t{a}\t{b}\n" for w, d, a, b in segments)
    return H(b"lineage-batch/1\n" + lines.encode("utf-8"))


def header(config: dict[str, Any], stream: dict[str, Any], world_size: int,
           skip_rule: dict[str, Any] | None, checkpoint_every: int | None) -> dict[str, Any]:
    h = {"algorithm": "blake3", "chain": SPEC, "checkpoint_every": checkpoint_every,
         "config": config, "manifest_hash": stream["manifest_hash"], "skip_rule": skip_rule,
         "stream_spec_hash": stream["spec_hash"], "world_size": world_size}
    h["genesis"] = genesis(h)
    return h


def step_record(step: int, prev: str, cursor: int, *, weights: dict[str, Any],
                optimizer: dict[str, Any], gradients: dict[str, Any], **fields: Any
                ) -> dict[str, Any]:
    state = {"weights/" + k: v for k, v in weights.items()}
    state.update({"optimizer/" + k: v for k, v in optimizer.items()})
    state.update({"gradients/" + k: v for k, v in gradients.items()})
    record = {"step": step, "prev_hash": prev, "cursor": cursor,
              "state_digest": tensor_digest(state), "weights_digest": tensor_digest(weights),
              **fields}
    record["state_hash"] = step_hash(record)
    return record


def end_record(steps: int, last: str) -> dict[str, Any]:
    record = {"end": True, "last_state_hash": last, "steps": steps}
    record["state_hash"] = end_hash(record)
    return record


def must_skip(records: list[dict[str, Any]], rule: dict[str, Any]) -> list[bool]:
    """Per record: whether the rule says it is skipped."""
    def triggers(norm: Any) -> bool:
        if isinstance(norm, str):
            return True  # "nan", "inf", "-inf": not finite
        return norm > rule["grad_norm_above"]
    fired = [triggers(r["grad_norm"]) for r in records]
    n = rule["skip_following"]
    return [any(fired[max(0, s - n):s + 1]) for s in range(len(records))]


def first_bad_line(lines: list[str], *, batch: int) -> int | None:
    """The 1-based number of the first line of a whole log (header, steps from 0, maybe
    an end record) that breaks the spec; None when every line holds."""
    head = json.loads(lines[0])
    if canonical(head) != lines[0] or head.get("genesis") != genesis(head):
        return 1
    prev, cursor, expected = head["genesis"], 0, 0
    for number, line in enumerate(lines[1:], start=2):
        record = json.loads(line)
        if canonical(record) != line:
            return number
        if "end" in record:  # nothing may follow it
            ok = record["steps"] == expected and record["last_state_hash"] == prev and \
                record["state_hash"] == end_hash(record)
            return number if not ok else (None if number == len(lines) else number + 1)
        jump = record["data_skip"]["windows"] if "data_skip" in record else 0
        if record["step"] != expected or record["prev_hash"] != prev or \
                record["state_hash"] != step_hash(record) or \
                record["cursor"] != cursor + jump + batch:
            return number
        prev, cursor, expected = record["state_hash"], record["cursor"], expected + 1
    return None
