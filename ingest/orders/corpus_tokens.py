"""A corpus document's tokens as the corpus counted them, for re-reading an imported
order's windows against the corpus (every importer samples windows this way)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lineage.errors import UsageError
from lineage.store.base import BaseStore

Encoder = Callable[[bytes], np.ndarray[Any, Any]]


def corpus_encoder(corpus_tokenizer: str, tokenizer: str | Path | None) -> Encoder | None:
    """bytes -> token ids, as the corpus counted them; None when that cannot be done
    (counts from the input, or a tokenizer.json corpus without `--tokenizer`). A given
    tokenizer must be the one the corpus recorded (by its hash)."""
    if corpus_tokenizer == "bytes":
        return lambda data: np.frombuffer(data, dtype=np.uint8)
    if not corpus_tokenizer.startswith("tokenizer.json:") or tokenizer is None:
        return None
    from lineage.corpora.token_count import parse_tokenizer

    spec = parse_tokenizer(str(tokenizer))
    if spec.identity != corpus_tokenizer:
        raise UsageError(f"--tokenizer {tokenizer} is {spec.identity}; the corpus was "
                         f"counted with {corpus_tokenizer}")
    loaded = spec.load()

    def encode(data: bytes) -> np.ndarray[Any, Any]:
        ids = loaded.encode(data.decode("utf-8"), add_special_tokens=False).ids
        return np.array(ids, dtype=np.int64)

    return encode


def corpus_tokenizer_of(store: BaseStore, corpus: str) -> str:
    """What counted the corpus's tokens ('bytes', 'tokenizer.json:blake3:...', ...)."""
    with store.reader(views=False) as con:
        row = con.execute("SELECT tokenizer FROM corpora WHERE name = ?", [corpus]).fetchone()
    return str(row[0]) if row else ""
