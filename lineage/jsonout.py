"""The JSON every `--json` prints, and the conversion of the values JSON lacks.

A leaf module kept small on purpose: the command line's lean path (`docs --json`,
`trained-on --json`) imports it and nothing of the typed answers.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(value: Any) -> str:
    """The JSON every `--json` prints: indented, UTF-8 as is, with the scalars JSON lacks
    (dates, decimals, UUIDs, bytes) converted as `to_jsonable` does. Conversion happens in
    json's `default` hook, so large answers are not walked twice.

    orjson writes the same text about 40 times faster (Python's json has no C encoder for
    indented output: 0.9 ms for a 200-segment `docs` answer against 0.02 ms), so it
    writes every value it renders exactly as json does: str keys, and strings, integers,
    booleans, None and floats from 1e-4 up (it writes smaller ones and NaN differently).
    Anything else, or anything it refuses (a lone surrogate, an integer past 64 bits),
    goes to json."""
    text = _orjson_text(value)
    if text is not None:
        return text
    import json

    text = json.dumps(value, indent=2, ensure_ascii=False, default=_json_scalar)
    if text.isascii():  # constant time in CPython: most answers end here
        return text
    # A lone surrogate (an undecodable byte of a file name) cannot be written as UTF-8:
    # JSON's own escape for it reads back as the same string.
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_ONE_LINE_UNSAFE = re.compile("[\ud800-\udfff\x85\u2028\u2029]")


def json_line(value: Any) -> str:
    """One value as compact JSON on one line (`--nl`): the same values as `json_text`,
    without the indentation."""
    import json

    text = json.dumps(to_jsonable(value), ensure_ascii=False, separators=(",", ":"))
    # Escaped too: lone surrogates (not UTF-8), and the line breaks other than \n that
    # JSON lets stand in a string but `str.splitlines` and others split at.
    return _ONE_LINE_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _orjson_text(value: Any) -> str | None:
    """`value` as orjson writes it, when that is what json writes; else None."""
    try:
        import orjson
    except ImportError:  # json alone writes the same text, slower
        return None
    if not _renders_alike(value):
        return None
    try:
        # An answer is a dataclass: orjson would write its fields, json its JSON object.
        return orjson.dumps(value, default=_json_scalar, option=orjson.OPT_INDENT_2
                            | orjson.OPT_PASSTHROUGH_DATACLASS).decode("utf-8")
    except TypeError:  # orjson.JSONEncodeError: json says what it cannot write, or writes it
        return None


class PlainRows(list[dict[str, Any]]):
    """Rows (dicts) whose every value is a str, an int, a bool or None, as the code that
    made them checked by the types of the columns they come from, not value by value:
    `json_text` writes them without looking at each value again (a step's 200 segments
    hold 2,000 values; looking at each took twice as long as writing them). A list of
    rows that cannot be vouched for so is a plain list, and is looked at."""


_ALIKE_SCALARS = frozenset({str, int, bool, type(None)})
_ROWS = _ALIKE_SCALARS | {dict}


def _renders_alike(value: Any) -> bool:
    """Whether orjson writes `value` as json does (docs/performance.md: what differs).
    Keys are not looked at: orjson refuses a key that is not a str, and json then writes
    the value. The types of a container's items are taken in one pass in C: most are
    plain scalars, and only the others are looked at one by one."""
    kind = type(value)
    if kind in _ALIKE_SCALARS or kind is PlainRows:
        return True
    if kind is float:
        return bool(value == 0.0 or 1e-4 <= abs(value) < math.inf)
    if kind is dict or isinstance(value, Mapping):  # an Answer too, by its JSON object
        return _items_alike(list(value.values()))
    if kind is list or isinstance(value, list | tuple):  # an AnswerList too
        return _items_alike(value)
    return False


def _items_alike(items: Any) -> bool:
    kinds = set(map(type, items))
    if kinds <= _ALIKE_SCALARS:
        return True
    if kinds <= _ROWS:  # rows of an answer (a step's segments): all their values at once
        rows = items if len(kinds) == 1 else [item for item in items if type(item) is dict]
        values = itertools.chain.from_iterable(map(dict.values, rows))
        if set(map(type, values)) <= _ALIKE_SCALARS:  # the usual case: nothing nested
            return True
        return _items_alike(list(itertools.chain.from_iterable(map(dict.values, rows))))
    return all(_renders_alike(item) for item in items if type(item) not in _ALIKE_SCALARS)


def _json_scalar(value: Any) -> Any:
    converted = to_jsonable(value)
    if converted is value:
        raise TypeError(f"{type(value).__name__} is not JSON serializable")
    return converted


def to_jsonable(value: Any) -> Any:
    """A value as JSON holds it: dates ISO 8601, bytes base64, decimals and UUIDs as text."""
    if value is None or isinstance(value, str | int | float):
        return value
    # Imported here, not at start-up: only values JSON lacks get this far.
    import base64
    import datetime as dt
    import decimal
    import uuid

    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, list | tuple):  # an AnswerList too
        return [to_jsonable(v) for v in value]
    if isinstance(value, Mapping):  # an Answer reads as its JSON object
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value
