"""Typed answers: frozen dataclasses whose `to_dict()` is exactly the command's `--json`.

Every question of the Python API returns an `Answer`. Its fields are the keys of the
JSON object the command line prints, in the same order; nested objects are `Answer`s
too, lists are tuples. `to_dict()` gives the JSON object back, `to_json()` the text
`--json` prints (the command line prints exactly that), and an answer that is a table
(`ROWS` names the field) turns into a polars DataFrame with `to_polars()`. An answer
also reads as its JSON object (a read-only Mapping): `answer["key"]` is
`answer.to_dict()["key"]`, and an answer equals the dict it prints as.

    answer = store.docs_in_step(3, stream="main")
    answer.documents[0].doc_id
    answer.to_polars()            # one row per document segment
    answer.to_json()              # what `lineage docs --step 3 --json` prints

Subclasses are declared as plain classes with annotated fields; `Answer` makes each a
frozen dataclass (without dataclass equality: equality is the Mapping's).

A leaf module: it imports nothing of lineage, so every layer may use it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    NewType,
    Self,
    TypeVar,
    Union,
    dataclass_transform,
)

from lineage.jsonout import json_text, to_jsonable

if TYPE_CHECKING:
    import polars as pl

__all__ = ["Answer", "AnswerList", "json_text", "keyed", "optional", "to_jsonable"]

# An integer field that may exceed 2^63 - 1 (a seed, 0 to 2^64 - 1): a plain int in Python,
# a UInt64 column in `to_polars()`.
UInt64 = NewType("UInt64", int)

_OMIT_NONE = "lineage.omit_none"
_KEY = "lineage.key"
_WITH = "lineage.present_with"


def optional(*, key: str | None = None, present_with: str | None = None,
             default: None = None, kw_only: bool = True) -> Any:
    """A field whose key the JSON holds only when it has a value (None when absent).

    With `present_with` (another field's name) the key is there exactly when that field's
    key is, and its value may then be null (e.g. a run's last step, null before step 0).
    `default` and `kw_only` are never passed: declared with their values, they tell type
    checkers (PEP 681) that the field may be left out and is keyword-only.
    """
    metadata: dict[str, Any] = {_OMIT_NONE: True}
    if key is not None:
        metadata[_KEY] = key
    if present_with is not None:
        metadata[_WITH] = present_with
    # Keyword-only, so that an optional key may come before required ones, as JSON has it.
    return dataclasses.field(default=default, metadata=metadata, kw_only=kw_only)


def keyed(key: str) -> Any:
    """A field whose JSON key is not a Python name (e.g. `from`, `ok-checks`)."""
    return dataclasses.field(metadata={_KEY: key})


@dataclass_transform(frozen_default=True, eq_default=False,
                     field_specifiers=(dataclasses.field, optional, keyed))
class Answer(Mapping[str, Any]):
    """Base of every typed answer; each subclass becomes a frozen dataclass."""

    ROWS: ClassVar[str | None] = None  # the field that holds the answer's rows, if any

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(frozen=True, eq=False)(cls)

    # -- read as the JSON object (Mapping) ---------------------------------------------

    def __getitem__(self, key: str) -> Any:
        f = fields_by_key(type(self)).get(key)
        if f is None:
            raise KeyError(key)
        if not _present(self, f):
            raise KeyError(key)
        return _plain(getattr(self, f.name))

    def __iter__(self) -> Iterator[str]:
        for key, f in fields_by_key(type(self)).items():
            if _present(self, f):
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}"
                          for f in dataclasses.fields(self))  # type: ignore[arg-type]
        return f"{type(self).__name__}({shown})"

    # -- conversions -------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON object the command line prints, as Python values."""
        out: dict[str, Any] = {}
        for name, key, decider in _layout(type(self)):
            if decider is None or getattr(self, decider) is not None:
                value = getattr(self, name)
                out[key] = value if type(value) in _SCALARS else _plain(value)
        return out

    def to_json(self) -> str:
        """Exactly what the command's `--json` prints."""
        return json_text(self.to_dict())

    def to_polars(self) -> pl.DataFrame:
        """The answer's rows as a DataFrame, one column per row field."""
        if self.ROWS is None:
            raise TypeError(f"{type(self).__name__} is not a table; use to_dict()")
        import polars as pl

        rows = [_plain(row) for row in getattr(self, self.ROWS)]
        schema = _polars_schema(type_hints(type(self))[self.ROWS])
        if schema is None:
            return pl.DataFrame(rows, infer_schema_length=None)
        return pl.DataFrame(rows, schema_overrides=schema, infer_schema_length=None) \
            if rows else pl.DataFrame(schema=schema)

    def table_rows(self) -> tuple[list[str], list[dict[str, Any]]]:
        """The answer's rows as the command's `--json` holds them, with the row type's keys
        (known even when there are no rows): what `--csv`, `--tsv` and `--nl` print."""
        if self.ROWS is None:
            raise TypeError(f"{type(self).__name__} is not a table; use to_dict()")
        rows = [_plain(row) for row in getattr(self, self.ROWS)]
        args = typing.get_args(type_hints(type(self))[self.ROWS])
        if args and isinstance(args[0], type) and issubclass(args[0], Answer):
            return list(fields_by_key(args[0])), rows
        return list(dict.fromkeys(key for row in rows for key in row)), rows

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The answer for a JSON object; its keys must be this type's fields, in order."""
        hints = type_hints(cls)
        by_key = fields_by_key(cls)
        unknown = [key for key in data if key not in by_key]
        if unknown:
            raise TypeError(f"{cls.__name__}: unexpected keys {unknown}")
        if list(data) != [key for key in by_key if key in data]:
            raise TypeError(f"{cls.__name__}: keys {list(data)} are not in field order")
        values: dict[str, Any] = {}
        for key, f in by_key.items():
            if key in data:
                values[f.name] = _convert(hints[f.name], data[key])
            elif not f.metadata.get(_OMIT_NONE):
                raise TypeError(f"{cls.__name__}: missing key {key!r}")
        answer = cls(**values)
        for key, f in by_key.items():  # a key that comes with another one comes with it
            if _WITH in f.metadata and _present(answer, f) != (key in data):
                raise TypeError(f"{cls.__name__}: key {key!r} is there exactly when "
                                f"{f.metadata[_WITH]!r} is")
        return answer


A = TypeVar("A", bound=Answer)


class AnswerList(tuple[A, ...]):
    """An answer that is a list (`corpus list`, `exp list`, ...): a tuple of Answers of one
    type that prints as the command's JSON array and turns into a polars DataFrame.

        AnswerList.from_list(CorpusSummary, rows)
    """

    row_type: type[A]

    def __new__(cls, row_type: type[A], rows: Iterable[A] = ()) -> AnswerList[A]:
        self = super().__new__(cls, rows)
        self.row_type = row_type
        return self

    @classmethod
    def from_list(cls, row_type: type[A], rows: Iterable[Mapping[str, Any]]) -> AnswerList[A]:
        """The typed list for a JSON array of objects of `row_type`."""
        return cls(row_type, (row_type.from_dict(row) for row in rows))

    def __eq__(self, other: object) -> bool:
        # Equal to the JSON array it prints as, like each Answer equals its JSON object.
        if isinstance(other, list):
            return list(self) == other
        return super().__eq__(other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]  # Answers are Mappings: not hashable

    def to_list(self) -> list[dict[str, Any]]:
        """The JSON array the command line prints, as Python values."""
        return [row.to_dict() for row in self]

    def to_json(self) -> str:
        """Exactly what the command's `--json` prints."""
        return json_text(self.to_list())

    def table_rows(self) -> tuple[list[str], list[dict[str, Any]]]:
        """The rows with the row type's keys (see `Answer.table_rows`)."""
        return list(fields_by_key(self.row_type)), self.to_list()

    def to_polars(self) -> pl.DataFrame:
        """One row per item, one column per field (typed even when the list is empty)."""
        import polars as pl

        schema = _polars_schema(tuple[self.row_type, ...])  # type: ignore[name-defined]
        rows = self.to_list()
        if not rows:
            return pl.DataFrame(schema=schema)
        frame = pl.DataFrame(rows, schema_overrides=schema, infer_schema_length=None)
        # An optional key no row holds is still a column (of nulls), in field order.
        keys = list(fields_by_key(self.row_type))
        missing = [key for key in keys if key not in frame.columns]
        if not missing:
            return frame
        nulls = [pl.lit(None, dtype=(schema or {}).get(key)).alias(key) for key in missing]
        return frame.with_columns(nulls).select(keys)


_HINTS: dict[type, dict[str, Any]] = {}
_FIELDS: dict[type, dict[str, dataclasses.Field[Any]]] = {}


def fields_by_key(cls: type) -> dict[str, dataclasses.Field[Any]]:
    """A subclass's fields by their JSON key, in order."""
    if cls not in _FIELDS:
        _FIELDS[cls] = {f.metadata.get(_KEY, f.name): f for f in dataclasses.fields(cls)}
    return _FIELDS[cls]


_SCALARS = frozenset({str, int, float, bool, type(None)})
_LAYOUTS: dict[type, tuple[tuple[str, str, str | None], ...]] = {}


def _layout(cls: type) -> tuple[tuple[str, str, str | None], ...]:
    """Per field, in order: (name, JSON key, the field whose value decides whether the key
    is present: None when it always is), worked out once per class: `to_dict` runs per
    row of every table an answer holds."""
    if cls not in _LAYOUTS:
        fields = {f.name: f for f in dataclasses.fields(cls)}

        def decider(f: dataclasses.Field[Any]) -> str | None:
            if not f.metadata.get(_OMIT_NONE):
                return None
            partner = f.metadata.get(_WITH)
            return f.name if partner is None else decider(fields[partner])

        _LAYOUTS[cls] = tuple((f.name, f.metadata.get(_KEY, f.name), decider(f))
                              for f in fields.values())
    return _LAYOUTS[cls]


def _present(answer: Answer, f: dataclasses.Field[Any]) -> bool:
    """Whether the field's key is in the answer's JSON."""
    if not f.metadata.get(_OMIT_NONE):
        return True
    partner = f.metadata.get(_WITH)
    if partner is None:
        return getattr(answer, f.name) is not None
    return _present(answer, next(p for p in dataclasses.fields(answer)  # type: ignore[arg-type]
                                 if p.name == partner))


def type_hints(cls: type) -> dict[str, Any]:
    """A class's resolved type hints (typing.get_type_hints, kept per class)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _polars_schema(rows_hint: Any) -> dict[str, Any] | None:
    """Column types for rows of an Answer type, so that empty answers and all-null columns
    keep their types; None when the rows are not Answers."""
    import polars as pl

    args = typing.get_args(rows_hint)
    row = args[0] if args else None
    if not (isinstance(row, type) and issubclass(row, Answer)):
        return None
    scalar = {str: pl.String, int: pl.Int64, float: pl.Float64, bool: pl.Boolean,
              UInt64: pl.UInt64}
    schema: dict[str, Any] = {}
    hints = type_hints(row)
    for key, f in fields_by_key(row).items():
        arms = [a for a in typing.get_args(hints[f.name]) if a is not type(None)] \
            or [hints[f.name]]
        if len(arms) == 1 and arms[0] in scalar:
            schema[key] = scalar[arms[0]]
    return schema


def _convert(hint: Any, value: Any) -> Any:
    """A JSON value as the field's type: objects become Answers, lists tuples."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        arms = [arm for arm in typing.get_args(hint) if arm is not type(None)]
        answers = [arm for arm in arms if isinstance(arm, type) and issubclass(arm, Answer)]
        if len(answers) > 1 and isinstance(value, Mapping):
            return _first_answer(answers, value)
        for arm in arms:
            if _fits(arm, value):
                return _convert(arm, value)
        return value
    if isinstance(hint, type) and issubclass(hint, Answer) and isinstance(value, Mapping):
        return hint.from_dict(value)
    if origin is tuple and isinstance(value, list | tuple):
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], item) for item in value)
        return tuple(_convert(arg, item) for arg, item in zip(args, value, strict=True))
    if origin in (dict, Mapping) and isinstance(value, Mapping):
        item = typing.get_args(hint)[1] if typing.get_args(hint) else Any
        return {key: _convert(item, v) for key, v in value.items()}
    return value


def _first_answer(arms: list[type[Answer]], value: Mapping[str, Any]) -> Answer:
    """An object that may be one of several Answer types (told apart by their keys and
    key order): the first that reads it."""
    errors = []
    for arm in arms:
        try:
            return arm.from_dict(value)
        except TypeError as exc:
            errors.append(str(exc))
    raise TypeError("; ".join(errors))


def _fits(hint: Any, value: Any) -> bool:
    origin = typing.get_origin(hint) or hint
    if isinstance(origin, type) and issubclass(origin, Answer):
        return isinstance(value, Mapping)
    if origin is tuple:
        return isinstance(value, list | tuple)
    if origin in (dict, Mapping):
        return isinstance(value, Mapping)
    return True


def _plain(value: Any) -> Any:
    if isinstance(value, Answer):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value
