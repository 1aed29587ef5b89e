"""Ingestors: one module per kind of record. Installed as `lineage.ingest`."""

from __future__ import annotations

from lineage.ingest.corpus import CorpusIngestResult, ingest_corpus
from lineage.ingest.status import corpus_status

__all__ = ["CorpusIngestResult", "corpus_status", "ingest_corpus"]
