"""Strict JSON for untrusted headers and indexes: one meaning per document, or an InputError.

Python's `json` module is lenient in ways that let two readers disagree about the same bytes:
it keeps the last of two duplicate keys, accepts `NaN` and `Infinity`, turns `1e400` into
`inf`, accepts lone surrogate escapes, and recurses without a bound of its own. Here each of
those is a named rule, raised as `InputError(source, rule)`, never as a traceback.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from lineage.errors import InputError
from lineage.formats.messages import show as _show

__all__ = ["loads_strict"]

# Strings may hold brackets; blank them out before counting depth. The possessive loop and the
# end-of-text alternative keep this linear: an unterminated string swallows the rest of the
# text (no later quote could close a string either) instead of being retried at every quote.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def loads_strict(data: bytes | str, *, source: str, max_depth: int = 64) -> object:
    """Parse one JSON document; raise InputError(source, rule) on anything ambiguous."""
    text = _decode(data, source)
    _check_depth(text, source, max_depth)
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique_pairs,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
    except _StrictViolation as exc:
        raise InputError(source, exc.rule) from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise InputError(source, f"invalid JSON ({exc.msg})", where=where) from None
    except ValueError as exc:  # e.g. an integer longer than Python's digit limit
        raise InputError(source, f"invalid JSON number ({_first_line(exc)})") from None
    except RecursionError:  # a backstop only: the depth check above runs first
        raise InputError(source, f"JSON nested deeper than {max_depth} levels") from None
    _check_strings(value, source)
    return value


class _StrictViolation(Exception):
    """Raised inside json's hooks; turned into InputError with the source attached."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


def _decode(data: bytes | str, source: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(source, f"invalid UTF-8 at byte {exc.start}") from None


def _check_depth(text: str, source: str, max_depth: int) -> None:
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > max_depth:
            raise InputError(source, f"JSON nested deeper than {max_depth} levels")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _StrictViolation(f"duplicate JSON key {_show(key)}")
        result[key] = value
    return result


def _reject_constant(name: str) -> float:
    raise _StrictViolation(f"JSON constant {name} is not allowed (not standard JSON)")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):  # 1e400 would silently become inf
        raise _StrictViolation(f"JSON number {literal[:40]} overflows a float")
    return value


def _check_strings(value: object, source: str) -> None:
    """Reject lone surrogates (valid escapes, but not text): other readers refuse them."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            _check_text(item, source)
        elif isinstance(item, dict):
            for key, sub in item.items():
                _check_text(key, source)
                stack.append(sub)
        elif isinstance(item, list):
            stack.extend(item)


def _check_text(text: str, source: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(source, f"JSON string {_show(text)} has a lone surrogate escape") from None




def _first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return lines[0] if lines else type(exc).__name__
