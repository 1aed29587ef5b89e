"""The audit ledger (docs/audit-spec.md, lineage-audit/1): records that many auditors make
about one run, a step each, and the status of the run's coverage that follows from them.

`records` defines the records (ids, validation, builders), `ledger` stores and reads them,
`status` applies the status rules, typed by `answers`.

Layer 7. May import: lineage.runs, lineage.stream, lineage.corpora, lineage.formats,
lineage.store, lineage.errors, lineage.version.
"""
