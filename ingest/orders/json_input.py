"""JSON an order importer reads (a harness manifest, Megatron's cache descriptions and
preprocessing input, an OLMo-core mixture index), parsed under the rule every JSON
reader of lineage applies: nested deeper than the step logs' limit is refused by the
`nesting-depth` rule (ingest/input_rules.py), never a RecursionError."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lineage.ingest.input_rules import IngestRuleError
from lineage.runs.chain import MAX_DEPTH


def parse_json(path: Path, data: str | bytes, *, where: str | None = None) -> Any:
    """`json.loads(data)`; ValueError (UnicodeDecodeError too) as json raises it."""
    try:
        value = json.loads(data)
    except RecursionError as exc:  # Python's parser recurses: nested past its limit
        raise _too_deep(path, where) from exc
    if nested_deeper(value, MAX_DEPTH):
        raise _too_deep(path, where)
    return value


def _too_deep(path: Path, where: str | None) -> IngestRuleError:
    return IngestRuleError(path, "nesting-depth", f"JSON nested deeper than {MAX_DEPTH} "
                           "levels", where=where)


def nested_deeper(value: object, limit: int) -> bool:
    """Whether arrays and objects nest deeper than `limit`; level by level, without
    recursion, a level's plain values looked at by their types (a list of millions of
    doc_ids costs one pass in C)."""
    level: list[dict[str, Any] | list[Any]] = [value] if isinstance(value, dict | list) else []
    for _ in range(limit):
        inner: list[dict[str, Any] | list[Any]] = []
        for item in level:
            children = list(item.values()) if isinstance(item, dict) else item
            if {type(child) for child in children} & {dict, list}:
                inner.extend(c for c in children if isinstance(c, dict | list))
        if not inner:
            return False
        level = inner
    return bool(level)
