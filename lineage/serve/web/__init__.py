"""The web explorer: plain server-rendered HTML pages over the questions the JSON API
answers, with no build step and no external requests."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.routing import BaseRoute


def routes() -> list[BaseRoute]:
    """The explorer's routes, mounted by the application beside the JSON API."""
    return []
