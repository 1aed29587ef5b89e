"""The JSON every `--json` prints, and the conversion of the values JSON lacks.

A leaf module kept small on purpose: the command line's lean path (`docs --json`,
`trained-on --json`) imports it and nothing of the typed answers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(value: Any) -> str:
    """The JSON every `--json` prints: indented, UTF-8 as is, with the scalars JSON lacks
    (dates, decimals, UUIDs, bytes) converted as `to_jsonable` does. Conversion happens in
    json's `default` hook, so large answers are not walked twice."""
    import json

    text = json.dumps(value, indent=2, ensure_ascii=False, default=_json_scalar)
    if text.isascii():  # constant time in CPython: most answers end here
        return text
    # A lone surrogate (an undecodable byte of a file name) cannot be written as UTF-8:
    # JSON's own escape for it reads back as the same string.
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


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
