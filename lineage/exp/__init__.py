"""Experiment records that travel across rented machines (docs/experiments.md).

Layer 8. May import: lineage.diligence, lineage.runs, lineage.formats, lineage.store,
lineage.errors, lineage.version.
"""
