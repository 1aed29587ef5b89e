"""Ingestors: one module per kind of record. Installed as `lineage.ingest`."""

from __future__ import annotations

from lineage.ingest.corpus import CorpusIngestResult, ingest_corpus

__all__ = ["CorpusIngestResult", "ingest_corpus"]
