"""Importers of trainers' data orders: one module per framework, reading the files the
framework wrote and storing the run's order as an `imported/2` stream
(docs/importers.md). `common` holds what they share: the spec they fill and
`store_order`, which checks their segments and stores them."""

from __future__ import annotations

from lineage.ingest.orders.common import SEGMENT_COLUMNS, artifact_hash, store_order

__all__ = ["SEGMENT_COLUMNS", "artifact_hash", "store_order"]
