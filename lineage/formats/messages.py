"""Short, printable pieces of untrusted input for one-line error messages."""

from __future__ import annotations


def show(text: str, limit: int = 80) -> str:
    """A name or key from a file, escaped to ASCII and cut at `limit` characters."""
    return ascii(text) if len(text) <= limit else ascii(text[:limit]) + "..."


def show_value(value: object, limit: int = 80) -> str:
    """Any parsed value, escaped and cut after `limit` characters of its repr."""
    text = repr(value) if not isinstance(value, str) else ascii(value)
    return text if len(text) <= limit else text[:limit] + "..."


def json_type(value: object) -> str:
    """The JSON type name of a parsed value, as a message about it would say it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
