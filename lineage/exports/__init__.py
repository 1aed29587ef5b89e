"""Exports: what the store records, written in the forms other tools read.

`model_card` writes a model card (a `README.md` with its metadata block and a training
data section) for a checkpoint of a recorded run, typed by `answers`.

Layer 8. May import: lineage.runs, lineage.stream, lineage.corpora, lineage.formats,
lineage.store, lineage.errors, lineage.version.
"""
