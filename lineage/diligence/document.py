"""Typed answers read from JSON objects whose keys vary: `Document`.

An `Answer` is strict: its JSON has exactly its fields, in order. Some objects are not
that regular and must still print exactly as they are: an experiment record read back
from the store (records of every spec version; keys sorted, as canonical JSON stores
them) or taken from a bundle; a checksum verdict built in two places with its keys in two
orders. A `Document` keeps the object's own key order and the keys it lacks: a key it
lacks reads as None as an attribute and stays out of `to_dict()`; a key its type does not
name (a record of a later spec) is kept as plain JSON, reachable as `doc["key"]`. So
`Document.from_dict(d).to_dict() == d`, key order included, for every `d` it reads.

A Document built directly (`Record(a=1, ...)`) prints every field, as an Answer does.

A `ScalarDocument` is a Document whose fields all hold JSON scalars: it reads and prints
the same, without converting value by value, for rows that come by the hundred thousand
(the files a SHA256SUMS list names).
"""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Self

from lineage.answer import Answer, fields_by_key, type_hints

_SCALARS = (str, int, float, bool, type(None))


class Document(Answer):
    """An answer that prints as the JSON object it was read from (see the module)."""

    # Set on instances made by from_dict: the object's keys in order, and its extra keys.
    _keys: ClassVar[tuple[str, ...] | None] = None
    _extra: ClassVar[dict[str, Any]] = {}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The document for a JSON object: keys it lacks read as None, others are kept."""
        by_key = fields_by_key(cls)
        typed = super().from_dict({key: data.get(key) for key in by_key})
        object.__setattr__(typed, "_keys", tuple(data))
        object.__setattr__(typed, "_extra", {k: copy.deepcopy(v) for k, v in data.items()
                                             if k not in by_key})
        return typed

    def __getitem__(self, key: str) -> Any:
        if self._keys is None:
            return super().__getitem__(key)
        if key not in self._keys:
            raise KeyError(key)
        if key in self._extra:
            return copy.deepcopy(self._extra[key])
        return super().__getitem__(key)

    def __iter__(self) -> Iterator[str]:
        if self._keys is None:
            return super().__iter__()
        return iter(self._keys)

    def to_dict(self) -> dict[str, Any]:
        if self._keys is None:
            return super().to_dict()
        return {key: self[key] for key in self._keys}


class ScalarDocument(Document):
    """A Document of JSON scalars (str, int, float, bool or None in every field): a scalar
    needs no conversion, so reading and printing skip it, and the answer is the same."""

    _names: ClassVar[dict[str, str]] = {}  # JSON key -> attribute, per subclass

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        hints = type_hints(cls)
        cls._names = {key: f.name for key, f in fields_by_key(cls).items()}
        for name in cls._names.values():
            arms = typing.get_args(hints[name]) if isinstance(hints[name], types.UnionType) \
                else (hints[name],)
            if not all(arm in _SCALARS for arm in arms):
                raise TypeError(f"{cls.__name__}.{name} is not a JSON scalar: {hints[name]}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        typed = object.__new__(cls)
        for key, name in cls._names.items():
            object.__setattr__(typed, name, data.get(key))
        object.__setattr__(typed, "_keys", tuple(data))
        object.__setattr__(typed, "_extra", {k: copy.deepcopy(v) for k, v in data.items()
                                             if k not in cls._names})
        return typed

    def to_dict(self) -> dict[str, Any]:
        if self._keys is None:
            return super().to_dict()
        extra, names = self._extra, self._names
        return {key: copy.deepcopy(extra[key]) if key in extra else getattr(self, names[key])
                for key in self._keys}
