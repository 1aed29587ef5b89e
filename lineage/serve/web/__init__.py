"""The web explorer: plain server-rendered HTML pages over the questions the JSON API
answers, with no build step and no external requests (docs/explorer.md).

Every page is also JSON (`PATH.json` or `PATH?format=json`). Pages: the store (`/`), a
corpus, a document, a stream (its source mix over training), a step, a run (loss and grad
norm plots, clipped and skipped steps, chain, checkpoints), a run's step, an experiment
(and its diff with another), and "was this trained on?" (`/trained-on`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.routing import BaseRoute


def routes() -> list[BaseRoute]:
    """The explorer's routes, mounted by the application beside the JSON API."""
    from lineage.serve.web import corpus_pages, exp_pages, run_pages, stream_pages, trained_on_page

    return [*corpus_pages.routes(), *stream_pages.routes(), *run_pages.routes(),
            *exp_pages.routes(), *trained_on_page.routes()]
