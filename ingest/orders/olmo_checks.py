"""Checks of an OLMo-core order against the corpus: every document's token count, and a
sample of documents re-read from the token files and compared, token for token, with
the corpus text tokenized again by the corpus's own tokenizer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lineage.corpora.corpus_tokens import (
    Encoder,
    corpus_encoder,
    corpus_tokenizer_of,
)
from lineage.corpora.doc_text import document_texts
from lineage.errors import InputError
from lineage.ingest.orders.common import corpus_rows
from lineage.ingest.orders.reread_all import TokenFiles, reread_all
from lineage.store.base import BaseStore
from lineage.store.part_select import part_files

if TYPE_CHECKING:
    import pyarrow as pa

    from lineage.ingest.orders.olmo_tokens import Layout, TokenFile

SAMPLE = 16  # documents re-read and re-tokenized


def check_lengths(store: BaseStore, corpus: str, doc_ids: pa.ChunkedArray, lengths: np.ndarray,
                  place: Callable[[int], str]) -> np.ndarray:
    """Each document of the token files is a corpus document with that many tokens: its
    row in the corpus (rid), for each."""
    with store.reader(views=False) as con:
        files = part_files(con, store, "documents", corpus)
    if files:
        rids, counted = corpus_rows(files, doc_ids)
    else:
        rids = counted = np.full(len(doc_ids), -1, dtype=np.int64)
    wrong = np.flatnonzero(counted != lengths)[:3 if files else 1]
    if len(wrong):
        k = int(wrong[0])
        doc_id = doc_ids[k].as_py()
        rule = (f"{doc_id!r} is not a document of corpus {corpus!r}" if counted[k] < 0
                else f"{doc_id!r} holds {int(lengths[k])} tokens here, the corpus "
                f"counted {int(counted[k])}")
        raise InputError(place(k), f"{rule} ({len(wrong)}+ documents differ; nothing "
                         "stored)")
    return rids


def check_sample(store: BaseStore, corpus: str, files: list[TokenFile], layout: Layout,
                 docs_read: np.ndarray, tokenizer: Path | None) -> dict[str, Any]:
    """Re-read up to SAMPLE of the documents the run read; what was checked."""
    checked: dict[str, Any] = {"documents": len(layout.doc_ids), "token_counts": "all"}
    encode, why = _encoder(store, corpus, tokenizer)
    if encode is None:
        return {**checked, "re_read": 0, "re_read_skipped": why}
    unique = np.unique(docs_read)
    picks = unique[np.linspace(0, len(unique) - 1, min(SAMPLE, len(unique))).astype(int)] \
        if len(unique) else unique
    texts = document_texts(store, corpus, {layout.doc_ids[int(k)].as_py() for k in picks})
    for k in (int(k) for k in picks):
        doc_id = layout.doc_ids[k].as_py()
        f, d = layout.where(k)
        base = int(layout.bases[f])
        stored = files[f].tokens()[layout.starts[k] - base:layout.ends[k] - base]
        expected = encode(texts[doc_id])
        if len(stored) != len(expected) or (stored != expected).any():
            at = _first_difference(stored, expected)
            raise InputError(files[f].path, f"document {d} ({doc_id!r}) holds other "
                             f"tokens than its corpus text, from token {at} on (nothing stored)")
    return {**checked, "re_read": len(picks)}


def _first_difference(stored: np.ndarray, expected: np.ndarray) -> int:
    common = min(len(stored), len(expected))
    differ = np.flatnonzero(stored[:common] != expected[:common])
    return int(differ[0]) if len(differ) else common


def _encoder(store: BaseStore, corpus: str, tokenizer: Path | None
             ) -> tuple[Encoder | None, str]:
    """How the corpus counted its tokens, as a function of a document's bytes, or why
    the documents cannot be re-read."""
    identity = corpus_tokenizer_of(store, corpus)
    if identity != "bytes" and not identity.startswith("tokenizer.json:"):
        return None, f"the corpus was counted by {identity!r}, not a tokenizer lineage runs"
    if identity != "bytes" and tokenizer is None:
        return None, "give --tokenizer (the corpus's tokenizer.json) to re-read documents"
    return corpus_encoder(identity, tokenizer), ""



def check_all(store: BaseStore, corpus: str, files: list[TokenFile], layout: Layout,
              segments: pa.Table, docs_read: np.ndarray, rids: np.ndarray,
              tokenizer: Path | None) -> dict[str, Any]:
    """`--verify all`: every document the windows read, whole, against the corpus."""
    checked: dict[str, Any] = {"documents": len(layout.doc_ids), "token_counts": "all"}
    encode, why = _encoder(store, corpus, tokenizer)
    if encode is None:
        return {**checked, "re_read": 0, "re_read_skipped": why}
    read = np.unique(docs_read)
    which = np.searchsorted(layout.firsts, read, side="right") - 1
    tokens = TokenFiles([f.path for f in files], [f.dtype for f in files], which,
                        layout.starts[read] - layout.bases[which], rids[read],
                        layout.ends[read] - layout.starts[read])
    window = segments.column("window").to_numpy()
    offset = segments.column("doc_offset").to_numpy()
    width = segments.column("n_tokens").to_numpy()

    def locate(k: int, positions: np.ndarray) -> str | None:
        mine = np.flatnonzero(docs_read == read[k])
        start, stop = offset[mine], offset[mine] + width[mine]
        covers = ((positions[None, :] >= start[:, None])
                  & (positions[None, :] < stop[:, None])).any(axis=1)
        if not covers.any():
            return None
        f, d = layout.where(int(read[k]))
        return (f"window {int(window[mine[covers]].min())}: document {d} "
                f"({layout.doc_ids[int(read[k])].as_py()!r})")

    done = reread_all(store, corpus, encode, tokens, locate)
    return {**checked, "re_read": done["documents"], "re_read_tokens": done["tokens"],
            "verify": "all"}
