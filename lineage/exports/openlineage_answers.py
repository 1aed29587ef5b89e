"""The typed answers of `lineage export openlineage` and `lineage ingest openlineage`
(lineage.answer explains the pattern)."""

from __future__ import annotations

from lineage.answer import Answer


class OpenLineageRun(Answer):
    """One OpenLineage run: its job, its id and the events sent for it, in order."""

    job: str
    run_id: str
    states: tuple[str, ...]  # e.g. ("START", "COMPLETE")
    first_time: str
    last_time: str


class OpenLineageExport(Answer):
    """`lineage export openlineage`: what was sent, where, under which spec."""

    spec: str  # the OpenLineage core spec the events follow
    producer: str
    namespace: str
    events: int
    runs: tuple[OpenLineageRun, ...]
    transport: str  # file, http or console
    destination: str


class OpenLineageDifference(Answer):
    """A field of a lineage facet whose value differs from the store's."""

    field: str
    event: object
    store: object


class OpenLineageObject(Answer):
    """A corpus, stream, run, checkpoint or experiment named by lineage facets of the
    events, checked against this store."""

    kind: str
    name: str
    status: str  # match, differs or unknown (the store holds no such object)
    differences: tuple[OpenLineageDifference, ...]


class OpenLineageIngest(Answer):
    """`lineage ingest openlineage`: the events read, how many were new, and every object
    their lineage facets name, checked against the store."""

    file: str
    events: int
    new: int  # events recorded now; the others were recorded before
    matched: int
    differs: int
    unknown: int
    objects: tuple[OpenLineageObject, ...]
