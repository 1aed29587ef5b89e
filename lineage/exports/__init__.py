"""Exports: what the store records, written in the forms other tools read.

`model_card` writes a model card (a `README.md` with its metadata block and a training
data section) for a checkpoint of a recorded run; `ai_act` drafts the EU AI Act public
summary of training content of a run or corpus (`ai_act_text` renders it as Markdown and
HTML). Both are typed by `answers`. `openlineage` sends the records as OpenLineage
RunEvents through the official client (`openlineage_events` makes them,
`openlineage_facets` defines lineage's custom facets, `openlineage_check` reads events
back; typed by `openlineage_answers`). `croissant` describes a corpus as a Croissant dataset
(JSON-LD) made from its manifest's Parquet parts.

Layer 8. May import: lineage.runs, lineage.stream, lineage.corpora, lineage.formats,
lineage.store, lineage.errors, lineage.version.
"""
