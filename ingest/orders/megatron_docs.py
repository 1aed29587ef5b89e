"""Megatron document i of an indexed dataset -> the corpus document it was tokenized from.

Megatron's preprocessing writes one document per line of its JSONL input, in order, so
document i is line i (blank lines are not records). The mapping is that JSONL itself or
a text file of doc_ids, one per line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lineage.errors import InputError
from lineage.ingest.orders.indexed import IndexedDataset
from lineage.ingest.orders.json_input import parse_json
from lineage.ingest.orders.megatron_files import document_tokens, documents

_SHIFT = 47  # documents below 2^47; the dataset's number above


def tag(dataset: np.ndarray, document: np.ndarray) -> np.ndarray:
    """(dataset of the blend, Megatron document) packed in one int64."""
    return (dataset.astype(np.int64) << _SHIFT) | document  # type: ignore[no-any-return]


def untag(value: int) -> tuple[int, int]:
    return value >> _SHIFT, value & ((1 << _SHIFT) - 1)


def untag_all(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return values >> _SHIFT, values & ((1 << _SHIFT) - 1)


@dataclass(frozen=True)
class Dataset:
    """One dataset of the blend, its documents mapped to the corpus."""

    data: IndexedDataset
    doc_ids: list[str]
    corpus_tokens: np.ndarray  # n_tokens of each Megatron document's corpus document
    corpus_rows: np.ndarray  # its row in the corpus (rid, doc_id order)
    append_eod: bool  # the .idx holds one more token (the EOD) per non-empty document


def read_doc_ids(path: Path) -> list[str]:
    """Megatron document i -> doc_id: the JSONL given to preprocessing (its `id`, else
    `<file name>#<line>`, as `lineage ingest corpus` names JSONL records) or a text file
    with one doc_id per line."""
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line]
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read the document list ({exc})") from exc
    if not path.name.endswith(".jsonl"):
        return lines
    ids = []
    for number, line in enumerate(lines, 1):
        try:
            value = parse_json(path, line, where=f"line {number}").get("id")
        except (ValueError, AttributeError) as exc:
            raise InputError(path, f"line {number} is not a JSON object") from exc
        if isinstance(value, bool) or not isinstance(value, str | int | type(None)):
            raise InputError(path, f"line {number}: `id` must be a string or an integer")
        ids.append(f"{path.name}#{number}" if value is None else str(value))
    return ids


# doc_ids -> (n_tokens, rids), -1 if unknown
TokenLookup = Callable[[list[str]], tuple[np.ndarray, np.ndarray]]


def map_dataset(data: IndexedDataset, docs: Path, tokens_of: TokenLookup) -> Dataset:
    """Map documents to the corpus; their .idx lengths must be the corpus's n_tokens,
    all plus one (an appended EOD) or all exactly."""
    doc_ids = read_doc_ids(docs)
    if len(doc_ids) != documents(data):
        raise InputError(docs, f"lists {len(doc_ids)} documents, {data.idx.name} holds "
                         f"{documents(data)}")
    corpus_tokens, corpus_rows = tokens_of(doc_ids)
    unknown = np.flatnonzero(corpus_tokens < 0)
    if len(unknown):
        raise InputError(docs, f"doc_id {doc_ids[int(unknown[0])]!r} is not in the corpus "
                         f"({len(unknown)} unknown)")
    idx_tokens = document_tokens(data)
    # Megatron's preprocessing appends the EOD to every document (--append-eod) or to
    # none: the lengths say which, and a document that agrees with neither is named.
    append_eod = int((idx_tokens == corpus_tokens + 1).sum()) > int(
        (idx_tokens == corpus_tokens).sum())
    wrong = np.flatnonzero(idx_tokens != corpus_tokens + int(append_eod))
    if len(wrong):
        i = int(wrong[0])
        raise InputError(data.idx, f"document {i} ({doc_ids[i]!r}) holds "
                         f"{int(idx_tokens[i])} tokens; the corpus counts "
                         f"{int(corpus_tokens[i])}{' + 1 appended EOD' if append_eod else ''}")
    return Dataset(data, doc_ids, corpus_tokens, corpus_rows, append_eod)
