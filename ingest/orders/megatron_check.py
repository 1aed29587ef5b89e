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

from lineage.corpora.doc_text import document_texts
from lineage.errors import InputError
from lineage.ingest.orders.corpus_tokens import corpus_encoder
from lineage.ingest.orders.megatron_docs import Dataset, untag
from lineage.ingest.orders.megatron_files import read_document
from lineage.ingest.orders.megatron_segments import Parts
from lineage.store.base import BaseStore


def sampled_windows(windows: int, count: int) -> np.ndarray[Any, Any]:
    """Up to `count` windows spread evenly from the first to the last."""
    if not count or not windows:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.linspace(0, windows - 1, min(count, windows)).round().astype(np.int64))


def check_tokens(store: BaseStore, corpus: str, datasets: list[Dataset], parts: Parts,
                 windows: int, *, sample: int, tokenizer: Path | None) -> dict[str, Any]:
    """Compare the sampled windows' parts with the corpus: what was re-read."""
    with store.reader(views=False) as con:
        row = con.execute("SELECT tokenizer FROM corpora WHERE name = ?", [corpus]).fetchone()
    encode = corpus_encoder(str(row[0]) if row else "", tokenizer)
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
