"""lineage: a provenance and lineage database for model training.

    import lineage
    store = lineage.open("lineage-store")
    store.corpora()
"""

from __future__ import annotations

from lineage.api import Store, init_store, open_store
from lineage.errors import (
    ConflictError,
    DamagedPartError,
    InputError,
    LineageError,
    NotFoundError,
    StoreBusyError,
    StoreError,
    StoreFullError,
    UnknownObjectError,
    UsageError,
)
from lineage.version import __version__

open = open_store  # noqa: A001 - `lineage.open(path)` is the public entry point

__all__ = [
    "ConflictError",
    "DamagedPartError",
    "InputError",
    "LineageError",
    "NotFoundError",
    "Store",
    "StoreBusyError",
    "StoreError",
    "StoreFullError",
    "UnknownObjectError",
    "UsageError",
    "__version__",
    "init_store",
    "open",
    "open_store",
]
