"""The verdicts of "was this trained on?", from strongest to weakest evidence.

By exact bytes: `in-stream`, `in-corpus-only`. As text (docs/text-spec.md): `text-match`,
`partial`, then as an edited copy (docs/near-spec.md): `near-duplicate`. About a run:
`trained`, `skipped-only`, `not-reached`. Else `not-found`.
"""

IN_STREAM = "in-stream"  # a document with these bytes is placed in a stream
IN_CORPUS_ONLY = "in-corpus-only"  # in a corpus, in no stream (e.g. past the token budget)
TEXT_MATCH = "text-match"  # the same normalized words as a document
PARTIAL = "partial"  # passages of documents cover enough of the query
NEAR_DUPLICATE = "near-duplicate"  # an edited copy of a document, aligned word by word
TRAINED = "trained"  # in a step the run completed and did not skip
SKIPPED_ONLY = "skipped-only"  # only in steps the run skipped
NOT_REACHED = "not-reached"  # only in steps after the run's last
NOT_FOUND = "not-found"

# Verdicts about the text, beside which a run's verdict stands (not in place of them).
TEXT_VERDICTS = frozenset({TEXT_MATCH, PARTIAL, NEAR_DUPLICATE})

# Verdicts a query "was trained on" by, as the exit code counts them.
FOUND = frozenset({IN_STREAM, TRAINED, TEXT_MATCH, PARTIAL, NEAR_DUPLICATE})
