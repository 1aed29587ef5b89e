"""Files of audit records a user names (`audit record`, `audit sign`, a relay folder's
audit-records.jsonl, a bundle's records.jsonl): a JSON object, a JSON list of records or
JSON lines, one record a line.

A file is opened with `lineage.userfiles` (regular files only, at most
MAX_RECORDS_BYTES) and every record is held to MAX_DEPTH levels of nesting before
Python's parser, which recurses, sees it (rule `nesting-depth`, as the JSONL readers of
ingest name it). Lines are split at newline characters only: a record's strings may
hold U+2028 and the other characters `str.splitlines()` also breaks at.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from lineage.errors import InputError, RuleError
from lineage.runs.chain import MAX_DEPTH
from lineage.userfiles import read_regular

# 256 MiB: about 230,000 signed records as JSON lines (about 1.1 KB each); parsed, they
# take a few GB of memory, which is where a cap belongs.
MAX_RECORDS_BYTES = 256 << 20
DEPTH_RULE = "nesting-depth"

_WHITESPACE = re.compile(r"[ \t\n\r]*")
# Strings blanked before brackets are counted; possessive, so an unterminated string takes
# the rest of the text once instead of being retried at every quote.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def read_records_file(path: str | Path, *, what: str = "file of audit records"
                      ) -> tuple[list[Any], str]:
    """The values of a file of records, unchecked, and its form: "object" (one JSON
    value), "list" (a JSON list) or "jsonl" (one value a line)."""
    data = read_regular(path, what=what, max_bytes=MAX_RECORDS_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"unreadable: not UTF-8 (byte {exc.start})") from None
    return parse_records(text, path)


def parse_records(text: str, source: str | Path) -> tuple[list[Any], str]:
    """The values of the text of a file of records, and its form (see read_records_file)."""
    whole = _whole(text, source)
    if whole is not None:
        return whole
    return [value for _, value in iter_lines(text, source)], "jsonl"


def _whole(text: str, source: str | Path) -> tuple[list[Any], str] | None:
    """The text read as one JSON object or one JSON list, or None when it is not one."""
    decoder = json.JSONDecoder()
    at = _WHITESPACE.match(text).end()  # type: ignore[union-attr]  # matches the empty text
    if text.startswith("{", at):
        try:
            value, end = _decode(decoder, text, at, source, "record 1")
        except json.JSONDecodeError:
            return None
        return ([value], "object") if _at_end(text, end) else None
    if text.startswith("[", at):
        try:
            return _list(decoder, text, at + 1, source), "list"
        except json.JSONDecodeError:
            return None
    return None


def _list(decoder: json.JSONDecoder, text: str, at: int, source: str | Path) -> list[Any]:
    """The items of a JSON list whose `[` ends before `at`, each held to MAX_DEPTH - 1 (the
    list is a level), parsed one at a time so that each is bounded before it is parsed."""
    items: list[Any] = []
    at = _WHITESPACE.match(text, at).end()  # type: ignore[union-attr]
    if text.startswith("]", at):
        if not _at_end(text, at + 1):
            raise json.JSONDecodeError("Extra data", text, at + 1)
        return items
    while True:
        value, at = _decode(decoder, text, at, source, f"record {len(items) + 1}",
                            limit=MAX_DEPTH - 1)
        items.append(value)
        at = _WHITESPACE.match(text, at).end()  # type: ignore[union-attr]
        if text.startswith(",", at):
            at = _WHITESPACE.match(text, at + 1).end()  # type: ignore[union-attr]
        elif text.startswith("]", at) and _at_end(text, at + 1):
            return items
        else:
            raise json.JSONDecodeError("Expecting ',' delimiter", text, at)


def _decode(decoder: json.JSONDecoder, text: str, at: int, source: str | Path, where: str,
            *, limit: int = MAX_DEPTH) -> tuple[Any, int]:
    """The JSON value at `at` and where it ends; `nesting-depth` when it nests deeper than
    `limit`. The count is of its own text: a record is checked before the next is read,
    and the parser's own recursion limit is the backstop for the one being read."""
    try:
        value, end = decoder.raw_decode(text, at)
    except RecursionError:
        raise depth_error(source, where) from None
    if too_deep(text[at:end], limit):
        raise depth_error(source, where)
    return value, end


def _at_end(text: str, at: int) -> bool:
    return _WHITESPACE.match(text, at).end() == len(text)  # type: ignore[union-attr]


def iter_lines(text: str, source: str | Path) -> list[tuple[int, Any]]:
    """(line number, value) of each non-blank line of JSON lines."""
    values = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        if too_deep(line, MAX_DEPTH):
            raise depth_error(source, where)
        try:
            values.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InputError(source, f"json: not JSON ({exc.msg})", where=where) from None
        except RecursionError:  # the count above comes first; this is a backstop
            raise depth_error(source, where) from None
    return values


def too_deep(text: str, limit: int) -> bool:
    """Whether brackets outside JSON strings nest deeper than `limit`."""
    if text.count("[") + text.count("{") <= limit:
        return False  # the common case: too few brackets to nest that deep
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > limit:
            return True
    return False


def depth_error(source: str | Path, where: str | None) -> RuleError:
    return RuleError(source, DEPTH_RULE, f"JSON nested deeper than {MAX_DEPTH} levels",
                     where=where)
