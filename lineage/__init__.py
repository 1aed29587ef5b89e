"""lineage: a provenance and lineage database for model training.

    import lineage
    store = lineage.open("lineage-store")
    store.docs_in_step(3, stream="main").to_polars()   # which documents were in step 3
    lineage.verify("models/m", sums="SHA256SUMS")       # a model folder's verdicts
    lineage.exp.list(store)                             # experiment records

Every name here is documented in docs/python-api.md ("Public names"), and a test holds
`__all__` to that list. The answer types load on first use, so `import lineage` stays
as fast as the command line needs.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from lineage import exp
from lineage.api import Store, init_store, open_store
from lineage.diligence.api import inspect, report, verify
from lineage.errors import (
    CommitUnknownError,
    ConflictError,
    DamagedPartError,
    InputError,
    LineageError,
    NotFoundError,
    StoreBusyError,
    StoreError,
    StoreFullError,
    StoreWriteError,
    UnknownObjectError,
    UsageError,
)
from lineage.version import __version__

if TYPE_CHECKING:
    from lineage.answer import Answer, AnswerList
    from lineage.audit.answers import AuditRequirements, AuditStatus, AuditStep, AuditWho
    from lineage.corpora.answers import Corpus, CorpusSummary
    from lineage.diligence.answers import FolderVerification, Inspection
    from lineage.exp.answers import (
        Experiment,
        ExperimentDiff,
        ExperimentRun,
        ExperimentSummary,
        ExportedBundle,
        ImportedBundle,
    )
    from lineage.runs.answers import ChainVerification, Checkpoints, Run, RunSummary, Trace
    from lineage.store.answers import StoreInit, StoreRepair, StoreVerification
    from lineage.store.query import QueryResult
    from lineage.stream.answers import StepDocuments, Stream, StreamBuildResult, StreamSummary
    from lineage.text.answers import TrainedOn

open = open_store  # noqa: A001 - `lineage.open(path)` is the public entry point

# The answer type of each question, by the module that defines it (loaded on first use).
_ANSWER_TYPES = {
    "lineage.answer": ("Answer", "AnswerList"),
    "lineage.audit.answers": ("AuditRequirements", "AuditStatus", "AuditStep", "AuditWho"),
    "lineage.corpora.answers": ("Corpus", "CorpusSummary"),
    "lineage.diligence.answers": ("FolderVerification", "Inspection"),
    "lineage.exp.answers": ("Experiment", "ExperimentDiff", "ExperimentRun",
                            "ExperimentSummary", "ExportedBundle", "ImportedBundle"),
    "lineage.runs.answers": ("ChainVerification", "Checkpoints", "Run", "RunSummary",
                             "Trace"),
    "lineage.store.answers": ("StoreInit", "StoreRepair", "StoreVerification"),
    "lineage.store.query": ("QueryResult",),
    "lineage.stream.answers": ("StepDocuments", "Stream", "StreamBuildResult",
                               "StreamSummary"),
    "lineage.text.answers": ("TrainedOn",),
}
_WHERE = {name: module for module, names in _ANSWER_TYPES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'lineage' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Answer",
    "AnswerList",
    "AuditRequirements",
    "AuditStatus",
    "AuditStep",
    "AuditWho",
    "ChainVerification",
    "Checkpoints",
    "CommitUnknownError",
    "ConflictError",
    "Corpus",
    "CorpusSummary",
    "DamagedPartError",
    "Experiment",
    "ExperimentDiff",
    "ExperimentRun",
    "ExperimentSummary",
    "ExportedBundle",
    "FolderVerification",
    "ImportedBundle",
    "InputError",
    "Inspection",
    "LineageError",
    "NotFoundError",
    "QueryResult",
    "Run",
    "RunSummary",
    "StepDocuments",
    "Store",
    "StoreBusyError",
    "StoreError",
    "StoreFullError",
    "StoreInit",
    "StoreRepair",
    "StoreVerification",
    "StoreWriteError",
    "Stream",
    "StreamBuildResult",
    "StreamSummary",
    "Trace",
    "TrainedOn",
    "UnknownObjectError",
    "UsageError",
    "__version__",
    "exp",
    "init_store",
    "inspect",
    "open",
    "open_store",
    "report",
    "verify",
]
