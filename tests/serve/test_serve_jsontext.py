"""The server's JSON writer prints exactly what every `--json` prints."""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.jsonout import json_text
from lineage.serve.jsontext import fast_json_text

SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
           | st.text() | st.sampled_from(["\ud800", "a\udcff", "\u2028", "é", "\x00"]))
VALUES = st.recursive(
    SCALARS,
    lambda inner: (st.lists(inner, max_size=5) | st.tuples(inner, inner)
                   | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=5)),
    max_leaves=40)


@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_same_bytes_as_json_text(value: Any) -> None:
    assert fast_json_text(value) == json_text(value)


def test_values_outside_plain_json_too() -> None:
    value = {"when": dt.date(2026, 1, 2), "rows": [{"at": dt.datetime(2026, 1, 2, 3)}],
             "big": 2**70, "nested": {"empty": [], "also": {}}, "t": (1, "x")}
    assert fast_json_text(value) == json_text(value)


def test_a_docs_answer(client: Any) -> None:
    from lineage.api import open_store
    from lineage.stream.query import docs_in_step

    store = open_store(client.app.state.store_root)
    answer = docs_in_step(store, 3, stream="main", rank=0, world_size=2)
    assert fast_json_text(answer) == json_text(answer)
