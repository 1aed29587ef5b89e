"""An index array an importer made again, compared with the one a framework wrote.

A refusal names the file, the first element that differs, its value and the value
expected, and who makes the array from what: one line, exit 2, nothing stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lineage.errors import InputError

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class Maker:
    """Who makes an array and from what, as a refusal names them."""

    who: str
    source: str


def same_array(path: Path, found: Array, expected: Array, maker: Maker, base: int = 0) -> None:
    """Refuse `found` unless it is `expected`, naming its first differing element."""
    if found.shape[1:] != expected.shape[1:]:
        raise InputError(path, f"holds shape {found.shape}, {maker.who} gives shape "
                         f"{expected.shape} {maker.source} (nothing stored)")
    common = min(len(found), len(expected))
    differs = np.asarray(found[:common] != expected[:common])
    wrong = np.flatnonzero(differs.reshape(common, -1).any(axis=1))
    if len(wrong):
        at = int(wrong[0])
        raise InputError(path, f"element {base + at} is {_shown(found[at])}, {maker.who} "
                         f"gives {_shown(expected[at])} {maker.source} (nothing stored)")
    if len(found) != len(expected):
        raise InputError(path, f"holds {len(found)} elements, {maker.who} gives "
                         f"{len(expected)} {maker.source} (nothing stored)")


def _shown(value: Any) -> str:
    values = np.asarray(value).tolist()
    return f"({', '.join(map(str, values))})" if isinstance(values, list) else str(values)
