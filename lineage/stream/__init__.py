"""The canonical data stream (`lineage-stream/1`): build, query, and read it back.

`spec` and `order` define the order (docs/stream-spec.md), `build` and `tables` write it,
`shuffle` computes and sorts the keys as independent tasks (`--engine ray`), `schedule`
cuts its windows into steps (a fixed batch or a batch-size schedule) and a
step among ranks (the rank rule), `query` answers "which documents were in step N",
`reader` gives a trainer the same rows and tokens, `batch_digest` hashes what one rank
read in one step.

Layer 4. May import: lineage.corpora, lineage.formats, lineage.store, lineage.errors.
"""
