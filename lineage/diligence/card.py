"""The `card` section of an inspection: a folder's model card metadata, or its findings.

A malformed card is a finding in the section (rule and message), never an error that
stops the report: the rest of the folder is still inspected.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lineage.formats.model_card import (
    CARD_NAME,
    LIST_FIELDS,
    TEXT_FIELDS,
    ModelCardInputError,
    card_fields,
    front_matter,
    opens_front_matter,
    parse_front_matter,
    read_card,
)


def readable(path: Path) -> bool:
    """A regular file, not a link; or a hub cache snapshot's vetted link to its blob."""
    from lineage.formats.hf_cache import vetted_blob

    return path.is_file() and (not path.is_symlink() or vetted_blob(path) is not None)


def model_card(folder: Path) -> dict[str, Any] | None:
    """folder/README.md's metadata (None: the folder has no README.md)."""
    path = folder / CARD_NAME
    if not path.exists() and not path.is_symlink():
        return None
    card: dict[str, Any] = {"file": CARD_NAME, "sha256": None, "bytes": None,
                            "front_matter": False}
    card.update({name: None for name in TEXT_FIELDS})
    card.update({name: [] for name in LIST_FIELDS})
    card["findings"] = []  # last, as the typed answer orders the keys
    if not readable(path):
        card["findings"].append(_finding("card-unreadable", "a link leading out of the "
                                         "folder, or not a regular file: not read"))
        return card
    try:
        read = read_card(path)
        card.update(sha256=read.sha256, bytes=read.size)
        card["front_matter"] = opens_front_matter(read.head)
        body = front_matter(path, read.head)
        if body is None:
            return card
        fields, problems = card_fields(parse_front_matter(path, body))
    except ModelCardInputError as exc:
        card["findings"].append(_finding(exc.rule_id, exc.message))
        return card
    card.update(fields)
    card["findings"] += [_finding("field-type", problem) for _name, problem in problems]
    return card


def _finding(rule: str, message: str) -> dict[str, str]:
    return {"rule": rule, "message": message}


def declared_license(card: dict[str, Any] | None) -> str | None:
    """The licence a card declares; `license: other` names itself by `license_name`."""
    if not card or not card.get("license"):
        return None
    name = card["license"]
    if name.lower() == "other" and card.get("license_name"):
        return f"other ({card['license_name']})"
    return str(name)
