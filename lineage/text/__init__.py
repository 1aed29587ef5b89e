"""Text: "was this trained on?" by exact bytes and by text (docs/text-spec.md).

`identity` normalizes text and hashes it (`lineage-text/1`), `fingerprint` computes the
winnowed fingerprints (`lineage-fingerprint/1`), `match` finds documents sharing them,
`verdicts` names the answers, `trained_on` is the question itself (`folders`: the files
a folder asked about stands for) and `answers` types its answer.

Layer 6. May import: lineage.runs, lineage.stream, lineage.corpora, lineage.formats,
lineage.store, lineage.errors.
"""
