"""The Python API: `lineage.Store`, the store with its questions as methods.

This is the top layer of the core: it may import every package below it (store, corpora,
stream, runs, text, diligence, audit, exp, exports); nothing below imports it. The
question modules are imported inside the methods so that `import lineage` stays fast for
the command line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lineage.store.base import BaseStore, init_store, resolve_store_path

if TYPE_CHECKING:
    from datetime import datetime

    import polars as pl

    from lineage.answer import AnswerList
    from lineage.audit.answers import AuditRequirements, AuditStatus, AuditStep, AuditWho
    from lineage.corpora.answers import Corpus, CorpusSummary
    from lineage.exports.answers import AiActSummary, ModelCard
    from lineage.exports.openlineage_answers import OpenLineageExport
    from lineage.runs.answers import ChainVerification, Checkpoints, Run, RunSummary, Trace
    from lineage.store.answers import Removal, StoreVerification
    from lineage.store.query import QueryResult
    from lineage.store.sql_guard import RowSink
    from lineage.stream.answers import StepDocuments, Stream, StreamSummary
    from lineage.text.answers import CorpusDuplicates, TrainedOn

__all__ = ["Store", "init_store", "open_store", "resolve_store_path"]


class Store(BaseStore):
    """A lineage store on disk. Open with `lineage.open(path)` after `lineage.init_store(path)`."""

    def corpora(self) -> AnswerList[CorpusSummary]:
        """`lineage corpus list`: every corpus, by name, with its totals and manifest hash."""
        from lineage.corpora.query import list_corpora

        return list_corpora(self)

    def corpus(self, name: str) -> Corpus:
        """`lineage corpus show NAME`: one corpus with its sources, token shares, licences
        and text index; UnknownObjectError when the store holds no such corpus."""
        from lineage.corpora.query import get_corpus

        return get_corpus(self, name)

    def corpus_duplicates(self, name: str, *, threshold: float | None = None,
                          ) -> CorpusDuplicates:
        """`lineage corpus duplicates NAME`: clusters of exact, text-identical and
        near-duplicate documents in a corpus, from its stored tables; a near pair's
        signatures agree on enough bands for a shingle Jaccard of `threshold` (0.4)."""
        from lineage.text.duplicates import corpus_duplicates

        return corpus_duplicates(self, name, threshold=threshold)

    def streams(self) -> AnswerList[StreamSummary]:
        """`lineage stream list`: every stream, by name, with its corpus, shape and digest."""
        from lineage.stream.query import list_streams

        return list_streams(self)

    def stream(self, name: str | None = None) -> Stream:
        """`lineage stream show NAME`: one stream's parameters, spec hash, size and digest;
        without a name, the store's only stream (UsageError when it holds several)."""
        from lineage.stream.answers import shown_stream
        from lineage.stream.query import get_stream

        return shown_stream(get_stream(self, name))

    def docs_in_step(self, step: int, *, stream: str | None = None, rank: int | None = None,
                     world_size: int | None = None,
                     window: int | None = None) -> StepDocuments:
        """`lineage docs --step N`: the documents of a step, of one rank's part of it (`rank`
        of `world_size`), or of one window, in window order; `stream` may be left out when
        the store holds one stream."""
        from lineage.stream.answers import StepDocuments
        from lineage.stream.query import docs_in_step

        return StepDocuments.from_dict(docs_in_step(
            self, step, stream=stream, rank=rank, world_size=world_size, window=window))

    def trained_on(
        self, files: Sequence[str | os.PathLike[str]] = (), *, texts: Sequence[str] = (),
        stdin: bytes | None = None, stream: str | None = None, run: str | None = None,
        min_containment: float = 0.5, limit: int = 20, min_similarity: float = 0.5,
    ) -> TrainedOn:
        """`lineage trained-on`: was each file, text (`texts`) or `stdin` (bytes) trained
        on? By exact bytes, then as text; `partial` needs matched passages covering
        `min_containment` of a text, `near-duplicate` (a text still unmatched, found as an
        edited copy) a document aligned with `min_similarity` of its words; `limit`
        candidate documents are examined per text and per kind. With `run`, verdicts
        about that run; `stream` narrows the answer to one stream."""
        from lineage.text.answers import TrainedOn
        from lineage.text.trained_on import trained_on

        return TrainedOn.from_dict(trained_on(
            self, files, texts=texts, stdin=stdin, stream=stream, run=run,
            min_containment=min_containment, limit=limit, min_similarity=min_similarity))

    def trace(self, run: str, *, step: int | None = None, clipped: bool = False,
              skipped: bool = False, limit: int | None = None) -> Trace:
        """`lineage trace`: a run's step `step`, or its clipped or skipped steps (exactly
        one of the three), the first `limit` of them, each with its documents."""
        from lineage.runs.trace import trace_answer

        return trace_answer(self, run, step=step, clipped=clipped, skipped=skipped,
                            limit=limit)

    def runs(self) -> AnswerList[RunSummary]:
        """`lineage run list`: every run, by name."""
        from lineage.runs.query import list_runs

        return list_runs(self)

    def run(self, name: str) -> Run:
        """`lineage run show`: a run's progress, clipped and skipped steps, step logs and
        checkpoints."""
        from lineage.runs.query import get_run

        return get_run(self, name)

    def checkpoints(self, run: str, *, nearest: int | None = None) -> Checkpoints:
        """`lineage run checkpoints`: a run's checkpoints, the ones its interval lacks, and
        with `nearest` the good checkpoint at or before that step (NotFoundError if none)."""
        from lineage.runs.query import list_checkpoints

        return list_checkpoints(self, run, nearest=nearest)

    def verify_chain(self, run: str, *, batches: bool = True,
                     expect_steps: int | None = None) -> ChainVerification:
        """`lineage chain verify`: recompute the run's chain (and with `batches` its batch
        digests from the stream); `expect_steps` is the length an open chain must have.
        The answer says `ok`; it does not raise for a broken chain."""
        from lineage.runs.chain_verify import verify_chain

        return verify_chain(self, run, batches=batches, expect_steps=expect_steps)

    def audit_status(self, run: str, *, now: datetime | None = None) -> AuditStatus:
        """`lineage audit status`: the run's audit coverage by the status rules of
        lineage-audit/1 (docs/audit-spec.md); `now` (naive UTC) decides which claims have
        expired. UsageError when the run declares no checkpoint interval."""
        from lineage.audit.status import audit_status

        return audit_status(self, run, now=now)

    def audit_step(self, run: str, step: int, *, now: datetime | None = None) -> AuditStep:
        """`lineage audit show --step N`: the step's attestations, intermediate checkpoints
        and claims, and its status word."""
        from lineage.audit.status import step_records

        return step_records(self, run, step, now=now)

    def audit_requirements(self, run: str, *, step: int = 1, folder: str | os.PathLike[str]
                           = ".", requirements: str | os.PathLike[str] | None = None,
                           ) -> AuditRequirements:
        """`lineage audit requirements`: what replaying `step` of `run` needs (as its header
        or the `requirements` file declares it) against this machine, with the checkpoint
        going to `folder`."""
        from pathlib import Path

        from lineage.audit.requirements import requirements_answer

        return requirements_answer(
            self, run, step=step, folder=Path(folder),
            source=Path(requirements) if requirements is not None else None)

    def audit_who(self, run: str) -> AuditWho:
        """`lineage audit who`: everyone with a record of the run, alphabetically."""
        from lineage.audit.status import participants

        return participants(self, run)

    def model_card(self, run: str, *, checkpoint: int) -> ModelCard:
        """`lineage export model-card`: the model card of the run's checkpoint saved after
        step `checkpoint` (docs/exports.md); `.text` is the README.md text. UnknownObjectError
        for an unknown run, a step it did not record or a checkpoint not ingested."""
        from lineage.exports.model_card import model_card

        return model_card(self, run=run, checkpoint=checkpoint)

    def ai_act_summary(self, *, run: str | None = None,
                       corpus: str | None = None) -> AiActSummary:
        """`lineage export ai-act-summary`: the draft EU AI Act public summary of the
        training content of `run` (its stream's corpus) or of `corpus` (docs/exports.md).
        UsageError unless exactly one is given; UnknownObjectError for an unknown one."""
        from lineage.exports.ai_act import ai_act_summary

        return ai_act_summary(self, run=run, corpus=corpus)

    def export_openlineage(self, *, run: str | None = None, corpus: str | None = None,
                           exp: str | None = None, namespace: str = "lineage",
                           output: str | os.PathLike[str] | None = None, url: str | None = None,
                           endpoint: str = "api/v1/lineage", api_key: str | None = None
                           ) -> OpenLineageExport:
        """`lineage export openlineage`: send the OpenLineage RunEvents of `run`, `corpus`,
        the experiment `exp` or (with none) of everything, to the file `output`, the HTTP
        endpoint `url`, or the client's console transport (docs/exports.md)."""
        from pathlib import Path

        from lineage.exports.openlineage import export_openlineage

        return export_openlineage(
            self, run=run, corpus=corpus, exp=exp, namespace=namespace,
            output=Path(output) if output is not None else None, url=url, endpoint=endpoint,
            api_key=api_key)

    def remove(self, kind: str, name: str, *, cascade: bool = False) -> Removal:
        """`lineage corpus|stream|run|exp remove NAME`: the record out of the catalog in one
        commit, and with it, when `cascade`, what depends on it (a corpus's streams, a
        stream's runs, a run's audit records); ConflictError naming them otherwise. An
        experiment is named as `exp show` takes it (id, id prefix, name, NAME#N). Its
        files stay until `store gc`. Removing what is not there answers `absent`."""
        from lineage.store.remove import remove_record

        if kind == "experiment":
            from lineage.exp.records import get_record

            base = name.rpartition("#")[0] or name
            with self.reader(views=False) as con:
                held = con.execute("SELECT count(*) FROM experiments WHERE starts_with(id, ?) "
                                   "OR name = ?", [base, base]).fetchall()[0][0]
            if held:  # else absent: nothing to remove; an ambiguous prefix is an error
                name = get_record(self, name)["id"]
        return remove_record(self, kind, name, cascade=cascade)

    def verify(self) -> StoreVerification:
        """`lineage store verify`: every registered file re-hashed against the catalog;
        `ok` is False when one is missing or differs, or the ledger's log does not hold
        together (lineage.audit.log.check_logs)."""
        import dataclasses

        from lineage.audit.log import check_logs
        from lineage.store.answers import PartProblem
        from lineage.store.integrity import verify_store

        verified = verify_store(self)
        with self.reader(views=False) as con:
            faults = check_logs(con)
        if not faults:
            return verified
        problems = tuple(PartProblem(path=self.catalog_path.name, table=fault.table,
                                     status="log-mismatch", message=fault.message,
                                     owner=f"ledger log {fault.origin}") for fault in faults)
        return dataclasses.replace(verified, ok=False, problems=verified.problems + problems)

    def sql(self, query: str, *, timeout: float | None = None, max_rows: int | None = None,
            max_memory: int | None = None, on_rows: RowSink | None = None) -> QueryResult:
        """`lineage sql`: read-only SQL in the guarded session (lineage.store.sql_guard).
        `timeout` in seconds, `max_rows` (the first rows, `truncated` set when there
        were more) and `max_memory` in bytes (DuckDB's own accounting; docs/store.md
        "SQL" says what it does not cover): no limit unless given. The result prints as
        `--json` does (`to_json()`) and turns into a typed polars frame (`to_polars()`).
        `on_rows(columns, rows)` receives the rows in batches instead (the result then
        holds none): a large result is never held whole."""
        from lineage.store.sql_guard import run_guarded_sql

        return run_guarded_sql(self, query, timeout=timeout, max_rows=max_rows,
                               max_memory=max_memory, on_rows=on_rows)

    def frame(self, name: str, *, check: bool = True) -> pl.LazyFrame:
        """A polars LazyFrame of the table `name` (a Parquet-backed table such as
        `occurrences`, or a catalog table such as `steps`); UnknownObjectError names the
        tables there are.

        A Parquet-backed table's frame scans exactly the parts the catalog lists, each
        checked against the catalog first: every byte of the table is read once for that.
        `check=False` skips the check (a damaged part may then give wrong rows). A catalog
        table is read when the frame is made."""
        from lineage.store.frames import scan_table

        return scan_table(self, name, check=check)


def open_store(path: str | os.PathLike[str] | None = None) -> Store:
    """Open an existing store (see `resolve_store_path` for the default)."""
    store = Store(resolve_store_path(path))
    store.require_catalog()
    return store
