"""The store a request reads: opened read-only for the request, closed after it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from lineage.api import Store

if TYPE_CHECKING:
    from starlette.requests import Request


@contextmanager
def store_for(request: Request) -> Iterator[Store]:
    """The store of the application serving `request` (its directory is set at start-up)."""
    yield Store(request.app.state.store_root)
