"""The custom OpenLineage facets that carry lineage's evidence (docs/exports.md,
"OpenLineage").

OpenLineage lets a producer add facets of its own under a prefix; ours is `lineage_`.
Each facet names its JSON schema in `_schemaURL`: the files under
`schemas/openlineage/facets/<version>/` of the project's repository, one per facet, each
versioned on its own (a field change makes a new version folder, never an edit in place),
so a consumer can treat the URL as the identity of the facet's shape.

The classes subclass the official client's facet bases (`attr` classes), so the client
serializes them with the rest of the event.
"""

from __future__ import annotations

from typing import Any

import attr
from openlineage.client.generated.base import DatasetFacet, RunFacet

from lineage.version import __version__

# Where the project publishes its sources; the producer URI and the facets' schema URLs
# are made from it.
REPOSITORY = "https://github.com/lineage-dev/lineage"
PRODUCER = f"{REPOSITORY}/tree/v{__version__}"
FACET_VERSION = "1-0-0"
SCHEMA_BASE = f"https://raw.githubusercontent.com/lineage-dev/lineage/main/schemas/openlineage/facets/{FACET_VERSION}/"
# The facet keys lineage writes, and the schema file (and its $defs entry) of each.
FACET_SCHEMAS = {
    "lineage_corpus": "LineageCorpusDatasetFacet",
    "lineage_stream": "LineageStreamDatasetFacet",
    "lineage_checkpoint": "LineageCheckpointDatasetFacet",
    "lineage_training": "LineageTrainingRunFacet",
    "lineage_experiment": "LineageExperimentRunFacet",
}


def schema_url(name: str) -> str:
    """The `_schemaURL` of the facet defined as `name` in `<name>.json`."""
    return f"{SCHEMA_BASE}{name}.json#/$defs/{name}"


@attr.define
class LineageCorpusDatasetFacet(DatasetFacet):
    """A corpus: its manifest hash, totals, tokenizer, licences and sources."""

    name: str
    manifestHash: str
    manifestSpec: str
    documents: int
    tokens: int
    bytes: int
    droppedEmpty: int
    tokenizer: str
    licenses: list[str]
    sources: list[dict[str, Any]]

    @staticmethod
    def _get_schema() -> str:
        return schema_url("LineageCorpusDatasetFacet")


@attr.define
class LineageStreamDatasetFacet(DatasetFacet):
    """A stream: its spec, the parameters its spec hash hashes, and its totals."""

    name: str
    spec: str
    specHash: str
    parameters: str
    corpus: str
    manifestHash: str
    seqLen: int
    batch: int
    tokens: int
    windows: int
    steps: int
    occurrences: int
    occurrencesDigest: str
    seed: int | None = None

    @staticmethod
    def _get_schema() -> str:
        return schema_url("LineageStreamDatasetFacet")


@attr.define
class LineageCheckpointDatasetFacet(DatasetFacet):
    """A checkpoint of a run: its files and digests, and whether they match the chain."""

    run: str
    step: int
    path: str
    files: list[dict[str, Any]]
    structureOk: bool
    weightsDigest: str | None = None
    chainWeightsDigest: str | None = None
    matchesChain: bool | None = None
    stateDigest: str | None = None
    chainStateDigest: str | None = None
    matchesState: bool | None = None
    checksumsOk: bool | None = None

    @staticmethod
    def _get_schema() -> str:
        return schema_url("LineageCheckpointDatasetFacet")


@attr.define
class LineageTrainingRunFacet(RunFacet):
    """A training run: its stream, its step hash chain and how far it got."""

    run: str
    stream: str
    specHash: str
    corpus: str
    manifestHash: str
    chain: str
    algorithm: str
    genesis: str
    closed: bool
    worldSize: int
    stepsRecorded: int
    clippedSteps: int
    skippedSteps: int
    segments: list[dict[str, Any]]
    chainHead: str | None = None
    firstStep: int | None = None
    lastStep: int | None = None
    streamSteps: int | None = None
    checkpointEvery: int | None = None

    @staticmethod
    def _get_schema() -> str:
        return schema_url("LineageTrainingRunFacet")


@attr.define
class LineageExperimentRunFacet(RunFacet):
    """An experiment record: its id and digest, the weights it ran on, its outcome."""

    id: str
    recordDigest: str
    outcome: str
    weightsPath: str
    files: int
    name: str | None = None
    revision: str | None = None
    weightsDigest: str | None = None
    exitCode: int | None = None

    @staticmethod
    def _get_schema() -> str:
        return schema_url("LineageExperimentRunFacet")
