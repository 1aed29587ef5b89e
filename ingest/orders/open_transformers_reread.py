"""Re-read a sample of a harness run's windows from its `.bin` shards and compare them,
token for token, with the corpus documents they claim to hold.

The windows read are spread evenly over the run, the first and the last always among
them. The corpus's tokens come from its documents' bytes (checked against their content
hash): with the byte tokenizer they are the bytes; with a tokenizer.json, the text
encoded by that tokenizer (no special tokens), which `--tokenizer` must give (its hash
must be the one the corpus recorded). A corpus whose text is not available (a ready
manifest, counts from the input) cannot be compared: the answer says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.corpora.corpus_tokens import corpus_encoder
from lineage.corpora.doc_text import document_texts
from lineage.errors import InputError
from lineage.ingest.orders.indexed import IndexedDataset
from lineage.ingest.orders.open_transformers_manifest import HarnessManifest
from lineage.ingest.orders.reread_all import TokenFiles, reread_all
from lineage.store.base import BaseStore

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa


def reread_windows(
    store: BaseStore, corpus: str, corpus_tokenizer: str, tokenizer: str | Path | None,
    run: HarnessManifest, datasets: list[IndexedDataset], rows: dict[str, Any],
    doc_ids: pa.ChunkedArray, doc_tokens: np.ndarray[Any, Any], sample: int,
) -> dict[str, Any]:
    """What was re-read: {"windows": [...], "tokens": n, "status": "..."}."""
    import numpy as np

    windows = int(rows["window"][-1]) + 1
    picked = np.unique(np.linspace(0, windows - 1, min(sample, windows)).round()
                       .astype(np.int64)) if sample else np.zeros(0, dtype=np.int64)
    encode = corpus_encoder(corpus_tokenizer, tokenizer)
    if encode is None or not len(picked):
        reason = "no windows asked for" if not len(picked) else (
            f"the corpus's tokens cannot be re-derived (tokenizer {corpus_tokenizer})")
        return {"windows": [], "tokens": 0, "status": f"not re-read: {reason}"}
    chosen = np.flatnonzero(np.isin(rows["window"], picked))
    texts = document_texts(store, corpus, {doc_ids[int(g)].as_py() for g in
                                   rows["global_doc"][chosen]})
    compared = 0
    cache: dict[str, np.ndarray[Any, Any]] = {}
    for i in chosen:
        glob, local = int(rows["global_doc"][i]), int(rows["local_doc"][i])
        start, end = int(rows["token_start"][i]), int(rows["token_end"][i])
        doc_id = doc_ids[glob].as_py()
        dataset = datasets[_shard_of(run, rows["shard"][int(i)].as_py())]
        if doc_id not in cache:
            cache[doc_id] = encode(texts[doc_id])
        expected = _expected(cache[doc_id], int(doc_tokens[glob]), start, end, run.eod_token)
        found = dataset.tokens(local, start, end)
        if len(found) != len(expected) or not np.array_equal(found, expected):
            differs = int(np.flatnonzero(found[:len(expected)] != expected[:len(found)])[0]) \
                if len(found) == len(expected) else 0
            raise InputError(dataset.bin, f"window {int(rows['window'][i])} slot "
                             f"{int(rows['slot'][i])}: tokens [{start}, {end}) of local "
                             f"document {local} ({doc_id!r}) differ from the corpus "
                             f"document's, first at token {start + differs} (nothing stored)")
        compared += end - start
    return {"windows": [int(w) for w in picked], "tokens": compared,
            "status": "equal to the corpus's tokens"}


def _expected(tokens: np.ndarray[Any, Any], n_tokens: int, start: int, end: int,
              eod: int | None) -> np.ndarray[Any, Any]:
    import numpy as np

    if len(tokens) != n_tokens:
        raise InputError("corpus", f"a document re-tokenizes to {len(tokens)} tokens, "
                         f"not the {n_tokens} recorded")
    body = tokens[start:min(end, n_tokens)].astype(np.int64)
    if end > n_tokens and eod is not None:
        body = np.concatenate((body, np.array([eod], dtype=np.int64)))
    return body


def _shard_of(run: HarnessManifest, name: str) -> int:
    return next(i for i, shard in enumerate(run.shards) if shard.shard == name)


def reread_every_window(
    store: BaseStore, corpus: str, corpus_tokenizer: str, tokenizer: str | Path | None,
    run: HarnessManifest, datasets: list[IndexedDataset], rows: dict[str, Any],
    doc_ids: pa.ChunkedArray, doc_tokens: np.ndarray[Any, Any], rids: np.ndarray[Any, Any],
) -> dict[str, Any]:
    """`--verify all`: every document the windows read, whole (its end-of-document
    token too), against the corpus; what was compared."""
    import numpy as np

    encode = corpus_encoder(corpus_tokenizer, tokenizer)
    if encode is None:
        return {"windows": "all", "tokens": 0, "status": "not re-read: the corpus's "
                f"tokens cannot be re-derived (tokenizer {corpus_tokenizer})"}
    read = np.unique(rows["global_doc"])
    firsts = np.cumsum([0] + [d.sequences for d in datasets])
    shard = np.searchsorted(firsts, read, side="right") - 1
    pointers = np.concatenate([d.sequence_pointers for d in datasets])
    sizes = np.array([np.dtype(d.dtype).itemsize for d in datasets])
    files = TokenFiles([d.bin for d in datasets], [np.dtype(d.dtype) for d in datasets],
                       shard, pointers[read] // sizes[shard], rids[read], doc_tokens[read],
                       run.eod_token if run.append_eod else None)

    def locate(k: int, positions: np.ndarray[Any, Any]) -> str | None:
        mine = np.flatnonzero(rows["global_doc"] == read[k])
        start, end = rows["token_start"][mine], rows["token_end"][mine]
        covers = ((positions[None, :] >= start[:, None])
                  & (positions[None, :] < end[:, None])).any(axis=1)
        if not covers.any():
            return None
        glob = int(read[k])
        return (f"window {int(rows['window'][mine[covers]].min())}: local document "
                f"{glob - int(firsts[shard[k]])} ({doc_ids[glob].as_py()!r})")

    done = reread_all(store, corpus, encode, files, locate)
    return {"windows": "all", **done, "status": "equal to the corpus's tokens"}
