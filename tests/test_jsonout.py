"""`json_text` writes exactly what Python's json writes (`indent=2`, UTF-8 as is, the
scalars JSON lacks converted), whether orjson or json writes it: every `--json` answer
and every server answer is the same bytes either way."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import uuid
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage import jsonout
from lineage.answer import Answer, AnswerList, optional
from lineage.jsonout import json_text


def python_json(value: Any) -> str:
    """What json_text wrote before orjson: Python's json and nothing else."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=jsonout._json_scalar)
    return jsonout._LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def orjson_wrote(value: Any) -> bool:
    """Whether json_text took orjson's text for `value` (else json's)."""
    return jsonout._orjson_text(value) is not None


# Every character, surrogates and control characters included, and the awkward ones often.
texts = st.text(st.characters(codec=None)) | st.sampled_from(
    ["", "\x00", "\x1f\x7f", "\u2028\u2029", "é\u00a0ß", "\ud800", "x\udfffy", "\"\\/",
     "\t\n\r\b\f", "😀", "\ufeff"])
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [1e16, 1e-5, 9.999999999999999e-05, 1e-4, -0.0, 0.0, 5e-324, 1e308, 1e22, 123456.789,
     2.5e-7, math.nan, -math.inf])
ints = st.integers() | st.sampled_from([2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**63) - 1,
                                        10**40])
scalars = st.none() | st.booleans() | ints | floats | texts
keys = texts | st.integers(-5, 5) | st.booleans() | st.none() | st.floats(0, 1e-3)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner)
    | st.dictionaries(texts, inner, max_size=5) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=40)


@settings(max_examples=1500)
@given(values)
def test_json_text_writes_what_json_writes(value: Any) -> None:
    assert json_text(value) == python_json(value)


@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
                    | st.text(st.characters(blacklist_categories=["Cs"]))
                    | st.floats(min_value=1e-4, allow_infinity=False) | st.just(0.0),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=4),
                    max_leaves=30))
def test_orjson_writes_the_values_it_shares_with_json(value: Any) -> None:
    """Strings, 64-bit integers, booleans, None and floats from 1e-4 up, in lists and
    objects with str keys: orjson writes them, and writes them as json does."""
    assert orjson_wrote(value)
    assert json_text(value) == python_json(value)


@pytest.mark.parametrize("value", [
    1e-5, [2.5e-7], {"x": math.nan}, [math.inf], {1: "a"}, {"a": {None: 1}}, 2**64,
    [-(2**63) - 1], "lone \ud800 surrogate", {"at": dt.datetime(2026, 1, 2, 3, 4, 5)},
    [dt.date(2026, 1, 2)], decimal.Decimal("1.10"), uuid.UUID(int=7), b"\x00\xff",
    [dt.timedelta(seconds=1.5)],
])
def test_what_orjson_writes_otherwise_goes_to_json(value: Any) -> None:
    assert not orjson_wrote(value)
    assert json_text(value) == python_json(value)


@pytest.mark.parametrize("value", [1e-5, 2.5e-7, math.nan, math.inf])
def test_orjson_writes_small_floats_and_nan_otherwise(value: float) -> None:
    """Why those floats go to json: orjson's own text for them is not json's."""
    assert orjson.dumps(value).decode() != json.dumps(value)


class _Part(Answer):
    name: str
    size: int | None
    share: float
    note: str | None = optional()  # absent from its JSON object when None


def test_answers_and_lists_of_them_are_written_by_orjson() -> None:
    part = _Part.from_dict({"name": "a\u2028b", "size": None, "share": 0.25})
    parts = AnswerList.from_list(_Part, [part.to_dict(), part.to_dict()])
    for value in (part, parts, {"parts": parts}):
        assert orjson_wrote(value)
        assert json_text(value) == python_json(value)
        assert "note" not in json_text(value)


def test_unwritable_values_fail_as_json_fails() -> None:
    with pytest.raises(TypeError, match="object is not JSON serializable"):
        json_text({"x": object()})


plain_rows = st.lists(st.dictionaries(
    texts, st.none() | st.booleans() | ints | texts, max_size=6), max_size=6)


@given(plain_rows)
def test_plain_rows_are_written_as_json_writes_them_unlooked(rows: list[dict[str, Any]],
                                                            ) -> None:
    """Rows vouched for as holding only text, integers, booleans and None are not looked
    at value by value, and are still written as json writes them: an integer past 64
    bits or a lone surrogate makes orjson refuse, and json writes them instead."""
    assert json_text(jsonout.PlainRows(rows)) == python_json(rows)
    assert json_text({"rows": jsonout.PlainRows(rows)}) == python_json({"rows": rows})


def test_plain_rows_are_trusted_and_a_plain_list_is_looked_at() -> None:
    """What vouching skips: a float below 1e-4 in a plain list goes to json; in
    PlainRows it would be orjson's text (which is why only code that checked its columns'
    types makes PlainRows)."""
    rows = [{"share": 1e-5}]
    assert not orjson_wrote(rows)
    assert orjson_wrote(jsonout.PlainRows(rows))
