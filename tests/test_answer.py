"""The typed-answer base: to_dict() is the JSON object, from_dict() its exact inverse."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lineage.answer import Answer, AnswerList, json_text, keyed, optional
from lineage.api import Store
from lineage.ingest import ingest_corpus
from lineage.stream.answers import StepDocuments
from lineage.stream.build import build_stream


class _Part(Answer):
    name: str
    size: int | None


class _Whole(Answer):
    ROWS = "parts"

    title: str
    source: str = keyed("from")
    parts: tuple[_Part, ...] = ()
    note: str | None = optional()
    extra: dict[str, int] | None = optional()


_names = st.text(max_size=8)
_parts = st.lists(st.builds(lambda name, size: {"name": name, "size": size},
                            _names, st.none() | st.integers(-2**63, 2**63 - 1)))


@st.composite
def _wholes(draw: st.DrawFn) -> dict:
    data = {"title": draw(_names), "from": draw(_names), "parts": draw(_parts)}
    if draw(st.booleans()):
        data["note"] = draw(_names)
    if draw(st.booleans()):
        data["extra"] = draw(st.dictionaries(_names, st.integers()))
    return data


@given(_wholes())
def test_from_dict_then_to_dict_is_the_same_json(data):
    answer = _Whole.from_dict(data)
    assert answer.to_dict() == data
    assert answer.to_json() == json_text(data)
    assert answer == data  # an answer equals the object it prints as
    assert dict(answer) == data and list(answer) == list(data)


@given(_wholes())
def test_rows_become_a_frame_with_their_columns(data):
    frame = _Whole.from_dict(data).to_polars()
    assert frame.columns == ["name", "size"]
    assert frame.schema["size"] == pl.Int64  # also when every size is null, or no rows
    assert frame.to_dicts() == data["parts"]


def test_nested_objects_are_typed_and_frozen():
    answer = _Whole.from_dict({"title": "t", "from": "x", "parts": [{"name": "a", "size": 1}]})
    assert isinstance(answer.parts, tuple) and isinstance(answer.parts[0], _Part)
    assert answer.parts[0].size == 1 and answer.source == "x"
    assert answer["parts"] == [{"name": "a", "size": 1}]
    assert "note" not in answer and answer.note is None
    with pytest.raises(FrozenInstanceError):
        answer.title = "other"  # type: ignore[misc]


@pytest.mark.parametrize("data, problem", [
    ({"title": "t", "from": "x", "parts": [], "surprise": 1}, "unexpected keys"),
    ({"from": "x", "title": "t", "parts": []}, "not in field order"),
    ({"title": "t", "parts": []}, "missing key 'from'"),
])
def test_from_dict_refuses_a_different_shape(data, problem):
    with pytest.raises(TypeError, match=problem):
        _Whole.from_dict(data)


def test_an_answer_that_is_not_a_table_says_so():
    with pytest.raises(TypeError, match="not a table"):
        _Part(name="a", size=1).to_polars()


def test_answers_inside_plain_values_print_as_their_json():
    part = _Part(name="a", size=None)
    assert json.loads(json_text({"x": [part]})) == {"x": [{"name": "a", "size": None}]}


def test_docs_in_step_is_typed_and_prints_as_the_command_does(cli, store: Store,
                                                              example_corpus):
    ingest_corpus(store, [example_corpus], corpus="example")
    build_stream(store, corpus="example", name="main", seed=42, seq_len=512, batch=4,
                 separator_tokens=1)
    answer = store.docs_in_step(1, rank=1, world_size=2)
    assert isinstance(answer, StepDocuments)
    result = cli("docs", "--step", "1", "--rank", "1", "--world-size", "2", "--json")
    assert result.stdout == answer.to_json() + "\n"
    frame = answer.to_polars()
    assert frame.height == len(answer.documents) > 0
    assert set(frame["rank"].to_list()) == {1}


@given(_parts)
def test_a_list_answer_prints_as_the_json_array_and_frames_typed(rows):
    answers = AnswerList.from_list(_Part, rows)
    assert answers.to_list() == rows and answers.to_json() == json_text(rows)
    assert all(isinstance(row, _Part) for row in answers)
    frame = answers.to_polars()
    assert frame.columns == ["name", "size"] and frame.schema["size"] == pl.Int64
    assert frame.height == len(rows)
