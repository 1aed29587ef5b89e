"""The audit ledger (docs/audit-spec.md, `lineage-audit/1`): many people verify one run, a
step each, and anyone can see how far it is covered. Attestations, claims and
intermediate checkpoints are records; ledgers travel as self-verifying bundles and
records may be signed with the auditor's SSH key.

Layer 7. May import: lineage.runs, lineage.stream, lineage.corpora, lineage.formats,
lineage.store, lineage.errors, lineage.version.
"""
