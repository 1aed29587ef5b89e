"""Sampled windows re-read from the `.bin` and compared with the corpus's own tokens.

The windows are spread evenly over the run, the first and the last among them. The
corpus's tokens of a document come from its bytes (re-read from where they were
ingested and checked against their hash): the bytes themselves for the byte tokenizer,
the text encoded by `--tokenizer` for a corpus counted with a tokenizer.json (as the
harness importer does). A corpus whose text cannot be re-tokenized is not compared and
the answer says so; every document's token count was compared with the `.idx` anyway.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from lineage.corpora.corpus_tokens import corpus_encoder
from lineage.corpora.doc_text import document_texts
from lineage.errors import InputError
from lineage.ingest.orders.megatron_docs import Dataset, untag, untag_all
from lineage.ingest.orders.megatron_files import read_document
from lineage.ingest.orders.megatron_segments import Parts
from lineage.ingest.orders.reread_all import Locate, TokenFiles, reread_all
from lineage.store.base import BaseStore


def sampled_windows(windows: int, count: int) -> np.ndarray[Any, Any]:
    """Up to `count` windows spread evenly from the first to the last."""
    if not count or not windows:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.linspace(0, windows - 1, min(count, windows)).round().astype(np.int64))


def check_tokens(store: BaseStore, corpus: str, datasets: list[Dataset], parts: Parts,
                 windows: int, *, sample: int, tokenizer: Path | None,
                 verify: str = "sample") -> dict[str, Any]:
    """Compare the sampled windows' parts (or, with `verify` "all", every document the
    windows read, whole) with the corpus: what was re-read."""
    with store.reader(views=False) as con:
        row = con.execute("SELECT tokenizer FROM corpora WHERE name = ?", [corpus]).fetchone()
    encode = corpus_encoder(str(row[0]) if row else "", tokenizer)
    if verify == "all":
        if encode is None:
            return {"windows": "all", "tokens": 0, "status": "not re-read: the corpus's "
                    f"tokens cannot be re-derived (tokenizer {row[0] if row else None})"}
        done = reread_all(store, corpus, encode, _token_files(datasets, parts),
                          _locator(datasets, parts))
        return {"windows": "all", **done, "status": "equal to the corpus's tokens"}
    picked = sampled_windows(windows, sample)
    if encode is None or not len(picked):
        reason = "no windows asked for" if not len(picked) else (
            f"the corpus's tokens cannot be re-derived (tokenizer {row[0] if row else None})")
        return {"windows": [], "tokens": 0, "status": f"not re-read: {reason}"}
    rows = np.flatnonzero(np.isin(parts.window, picked))
    named = {int(tag): _doc_id(datasets, int(tag)) for tag in set(parts.document[rows].tolist())}
    texts = document_texts(store, corpus, set(named.values()))
    encoded = {doc_id: encode(text) for doc_id, text in texts.items()}
    compared = 0
    for index in rows.tolist():
        dataset, document = untag(int(parts.document[index]))
        member, doc_id = datasets[dataset], named[int(parts.document[index])]
        start = int(parts.doc_offset[index])
        stop = start + int(parts.n_tokens[index])
        expected = encoded[doc_id][start:stop].astype(np.int64)
        found = read_document(member.data, document, start, start + len(expected))
        if not np.array_equal(found, expected):
            raise InputError(member.data.bin, f"window {int(parts.window[index])}: tokens "
                             f"[{start}, {stop}) of document {document} ({doc_id!r}) differ "
                             "from the corpus document's (nothing stored)")
        compared += len(expected)
    return {"windows": [int(w) for w in picked], "tokens": compared,
            "status": "equal to the corpus's tokens"}


def _doc_id(datasets: list[Dataset], tag: int) -> str:
    dataset, document = untag(tag)
    return datasets[dataset].doc_ids[document]


def _token_files(datasets: list[Dataset], parts: Parts) -> TokenFiles:
    """Every document the windows read, in its dataset's `.bin`."""
    tags = np.unique(parts.document)
    dataset, document = untag_all(tags)
    starts = np.zeros(len(tags), dtype=np.int64)
    rids, n_tokens = (np.zeros(len(tags), dtype=np.int64) for _ in range(2))
    for number, member in enumerate(datasets):
        mine = dataset == number
        first_sequence = member.data.document_indices[document[mine]]
        itemsize = np.dtype(member.data.dtype).itemsize
        starts[mine] = member.data.sequence_pointers[first_sequence] // itemsize
        rids[mine] = member.corpus_rows[document[mine]]
        n_tokens[mine] = member.corpus_tokens[document[mine]]
    return TokenFiles([d.data.bin for d in datasets],
                      [np.dtype(d.data.dtype) for d in datasets], dataset, starts, rids,
                      n_tokens)


def _locator(datasets: list[Dataset], parts: Parts) -> Locate:
    """The first window that reads one of the given tokens of document k (the k-th of
    the documents read, in tag order)."""
    tags = np.unique(parts.document)

    def locate(k: int, positions: np.ndarray[Any, Any]) -> str | None:
        rows = np.flatnonzero(parts.document == tags[k])
        start, stop = parts.doc_offset[rows], parts.doc_offset[rows] + parts.n_tokens[rows]
        covers = ((positions[None, :] >= start[:, None])
                  & (positions[None, :] < stop[:, None])).any(axis=1)
        if not covers.any():
            return None
        window = int(parts.window[rows[covers]].min())
        dataset, document = untag(int(tags[k]))
        return (f"window {window}: document {document} "
                f"({datasets[dataset].doc_ids[document]!r})")

    return locate
