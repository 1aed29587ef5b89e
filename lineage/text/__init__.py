"""Text: "was this trained on?" by exact bytes and by text (docs/text-spec.md).

`identity` normalizes text and hashes it (`lineage-text/1`), `fingerprint` computes the
winnowed fingerprints (`lineage-fingerprint/1`), `match` finds documents sharing them,
`minhash` computes near-duplicate signatures and band keys (`lineage-near/1`),
`near_match` finds edited copies by them and `align` confirms them word by word,
`verdicts` names the answers, `trained_on` is the question itself (`folders`: the files
a folder asked about stands for), `duplicates` lists the copies inside a corpus, and
`answers` types their answers.

Layer 6. May import: lineage.runs, lineage.stream, lineage.corpora, lineage.formats,
lineage.store, lineage.errors.
"""
