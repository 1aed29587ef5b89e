"""The audit ledger: volunteers replay a run's steps, record what they found, and anyone
can see how far the run is covered (docs/audit-spec.md, `lineage-audit/1`).

Layer 7. May import: lineage.runs, lineage.stream, lineage.corpora, lineage.formats,
lineage.store, lineage.errors, lineage.version.
"""
