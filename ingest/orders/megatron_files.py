"""Where Megatron's sequences sit inside its documents (over `indexed.IndexedDataset`).

A document of Megatron's preprocessing is one JSON line of its input; with sentence
splitting it has several sequences, without it one. GPTDataset shuffles and packs
*sequences*, so a sample's part names a sequence; these arrays turn that into a
document and an offset inside it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lineage.ingest.orders.indexed import IndexedDataset

Array = np.ndarray[Any, Any]


def documents(data: IndexedDataset) -> int:
    return len(data.document_indices) - 1


def document_of_sequence(data: IndexedDataset) -> Array:
    """For each sequence, the document that holds it."""
    sequences = np.arange(data.sequences, dtype=np.int64)
    return np.searchsorted(data.document_indices, sequences, side="right") - 1


def _token_starts(data: IndexedDataset) -> Array:
    return np.concatenate(([0], np.cumsum(data.sequence_lengths, dtype=np.int64)))


def sequence_base(data: IndexedDataset) -> Array:
    """For each sequence, its first token's offset inside its document."""
    starts = _token_starts(data)
    first_of_document = data.document_indices[document_of_sequence(data)]
    return starts[:-1] - starts[first_of_document]  # type: ignore[no-any-return]


def document_tokens(data: IndexedDataset) -> Array:
    """Tokens per document (the sum of its sequences)."""
    starts = _token_starts(data)
    return starts[data.document_indices[1:]] - starts[data.document_indices[:-1]]  # type: ignore[no-any-return]


def read_document(data: IndexedDataset, document: int, start: int, stop: int) -> Array:
    """Tokens [start, stop) of one document (its sequences lie back to back)."""
    return data.tokens(int(data.document_indices[document]), start, stop)
