"""Corpora: manifests and their hashes, token counting, and questions about recorded corpora.

`manifest` and `digest` define the manifest hash (docs/manifest-spec.md), `token_count`
the tokenizers, `doc_text` reads a document's bytes back from where it was ingested and
checks them, `query` lists and shows corpora.

Layer 3. May import: lineage.store, lineage.formats, lineage.errors.
"""
