"""Runs: the step hash chain, its verification, checkpoints as evidence, and traces.

`chain` is the chain spec and the trainer's writer (docs/chain-spec.md), `skip_rule` the
declared skip rule, `declared` the run's other declarations (its reduction mode),
`chain_verify` and `chain_batches` check a recorded chain against its stream,
`checkpoint_evidence` digests checkpoint folders, `windows` maps a run's steps to the
windows they read, `query` and `trace` answer questions about runs, typed by `answers`.

Layer 5. May import: lineage.stream, lineage.corpora, lineage.formats, lineage.store,
lineage.errors.
"""
