"""`json_text` (the JSON every `--json` prints) with the same bytes, faster.

`json.dumps(..., indent=2)` cannot use CPython's C encoder: it walks the value in Python,
about 3 ms for the 170 segments of a `docs` answer, as long as the lookup itself. But the
C encoder takes any separators, so a container whose items are all plain scalars is
written in one call, with the newline and indentation of its depth inside the item
separator; only containers that hold containers are walked here. Values outside plain
JSON (dates, decimals: `lineage.jsonout.to_jsonable`) take `json_text` itself, as does
a container that holds one.
"""

from __future__ import annotations

import json
from typing import Any

from lineage.jsonout import _LONE_SURROGATE, json_text

_SCALARS = (str, int, float, bool, type(None))


def fast_json_text(value: Any) -> str:
    """Exactly `lineage.jsonout.json_text(value)`."""
    parts: list[str] = []
    try:
        _write(value, 0, parts)
    except _NotPlain:
        return json_text(value)
    text = "".join(parts)
    if text.isascii():
        return text
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class _NotPlain(Exception):
    """A value the C encoder would pass to `default`: left to json_text."""


def _write(value: Any, depth: int, parts: list[str]) -> None:
    if isinstance(value, dict):
        items: Any = value.values()
        opening, closing = "{", "}"
    elif isinstance(value, list | tuple):
        items = value
        opening, closing = "[", "]"
    elif isinstance(value, _SCALARS):
        parts.append(json.dumps(value, ensure_ascii=False))
        return
    else:
        raise _NotPlain
    if not value:
        parts.append(opening + closing)
        return
    inner = "\n" + "  " * (depth + 1)
    if all(type(item) in _SCALARS for item in items):  # one call to the C encoder
        flat = json.dumps(value, ensure_ascii=False, separators=("," + inner, ": "))
        parts.append(opening + inner + flat[1:-1] + "\n" + "  " * depth + closing)
        return
    parts.append(opening)
    if isinstance(value, dict):
        for index, (key, item) in enumerate(value.items()):
            if not isinstance(key, str):
                raise _NotPlain  # json's own conversion of keys: left to json_text
            parts.append(("," if index else "") + inner + json.dumps(key, ensure_ascii=False)
                         + ": ")
            _write(item, depth + 1, parts)
    else:
        for index, item in enumerate(value):
            parts.append(("," if index else "") + inner)
            _write(item, depth + 1, parts)
    parts.append("\n" + "  " * depth + closing)
