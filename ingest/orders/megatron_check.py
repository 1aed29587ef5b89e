"""Sampled windows re-read from the `.bin` and compared with the corpus's own tokens.

For corpora counted with the byte tokenizer the corpus's tokens of a document are its
UTF-8 bytes (re-read from where they were ingested and checked against their hash), so
every part of a sampled window must hold exactly those bytes in the `.bin`. Other
tokenizers are not re-run here: the token counts of every document were already
compared with the `.idx`.
"""

from __future__ import annotations

import numpy as np

from lineage.corpora.doc_text import read_checked
from lineage.errors import InputError
from lineage.ingest.orders.megatron_docs import Dataset
from lineage.ingest.orders.megatron_files import read_document
from lineage.ingest.orders.megatron_segments import Parts
from lineage.store.base import BaseStore
from lineage.store.parts import part_files

SAMPLED_WINDOWS = 32


def sampled_windows(windows: int, count: int = SAMPLED_WINDOWS) -> list[int]:
    """Up to `count` windows spread evenly from the first to the last."""
    return sorted({int(w) for w in np.linspace(0, windows - 1, min(count, windows))})


def check_tokens(store: BaseStore, corpus: str, datasets: list[Dataset], parts: Parts,
                 windows: int) -> int:
    """Compare the sampled windows' parts with the corpus; the windows re-read."""
    with store.reader(views=False) as con:
        row = con.execute("SELECT tokenizer FROM corpora WHERE name = ?", [corpus]).fetchone()
        if row is None or row[0] != "bytes":
            return 0
        chosen = sampled_windows(windows)
        rows = np.flatnonzero(np.isin(parts.window, chosen))
        texts = _texts(con, store, corpus, datasets, parts.document[rows])
    for row in rows.tolist():
        dataset, document = _untag(int(parts.document[row]))
        member = datasets[dataset]
        start = int(parts.doc_offset[row])
        stop = start + int(parts.n_tokens[row])
        stored = read_document(member.data, document, start, stop)
        text = texts[member.doc_ids[document]]
        expected = np.frombuffer(text[start:min(stop, len(text))], dtype=np.uint8)
        if not np.array_equal(stored[:len(expected)], expected):
            raise InputError(member.data.bin, f"window {int(parts.window[row])}: tokens "
                             f"[{start}, {stop}) of document {document} differ from the "
                             f"bytes of {member.doc_ids[document]!r}")
    return len(chosen)


def _untag(tag: int) -> tuple[int, int]:
    return tag >> 47, tag & ((1 << 47) - 1)


def _texts(con: object, store: BaseStore, corpus: str, datasets: list[Dataset],
           tags: np.ndarray) -> dict[str, bytes]:
    wanted = sorted({datasets[d].doc_ids[i] for d, i in map(_untag, set(tags.tolist()))})
    files = part_files(con, store, "documents", corpus)
    found = con.execute(  # type: ignore[attr-defined]
        "SELECT doc_id, content_hash, origin, record FROM read_parquet(?) "
        "WHERE doc_id IN (SELECT unnest(?))", [files, wanted]).fetchall()
    return {doc_id: read_checked(con, doc_id, content_hash, origin, record)
            for doc_id, content_hash, origin, record in found}
