"""A corpus document's tokens as the corpus counted them: for a trainer reading its
windows from the store (`StreamReader.windows`) and for re-reading an imported order's
windows against the corpus (every importer samples windows this way)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lineage.errors import UsageError
from lineage.store.base import BaseStore

if TYPE_CHECKING:
    import tokenizers

Encoder = Callable[[bytes], np.ndarray[Any, Any]]


def corpus_encoder(corpus_tokenizer: str, tokenizer: str | Path | None) -> Encoder | None:
    """bytes -> token ids, as the corpus counted them; None when that cannot be done
    (counts from the input, or a tokenizer.json corpus without `--tokenizer`). A given
    tokenizer must be the one the corpus recorded (by its hash)."""
    if corpus_tokenizer == "bytes":
        return lambda data: np.frombuffer(data, dtype=np.uint8)
    loaded = counted_with(corpus_tokenizer, tokenizer)
    return None if loaded is None else text_encoder(loaded)


def counted_with(corpus_tokenizer: str, tokenizer: str | Path | None
                 ) -> tokenizers.Tokenizer | None:
    """The tokenizer.json the corpus was counted with, loaded from `tokenizer`; None for a
    corpus counted otherwise or when no tokenizer is given. UsageError when `tokenizer` is
    not the one the corpus recorded (by its hash)."""
    if not corpus_tokenizer.startswith("tokenizer.json:") or tokenizer is None:
        return None
    from lineage.corpora.token_count import parse_tokenizer

    spec = parse_tokenizer(str(tokenizer))
    if spec.identity != corpus_tokenizer:
        raise UsageError(f"--tokenizer {tokenizer} is {spec.identity}; the corpus was "
                         f"counted with {corpus_tokenizer}")
    return spec.load()


def text_encoder(loaded: tokenizers.Tokenizer) -> Encoder:
    """A document's token ids as the ingest counted them: its bytes decoded as UTF-8,
    encoded without special tokens."""
    def encode(data: bytes) -> np.ndarray[Any, Any]:
        ids = loaded.encode(data.decode("utf-8"), add_special_tokens=False).ids
        return np.array(ids, dtype=np.int64)

    return encode


def corpus_tokenizer_of(store: BaseStore, corpus: str) -> str:
    """What counted the corpus's tokens ('bytes', 'tokenizer.json:blake3:...', ...)."""
    with store.reader(views=False) as con:
        row = con.execute("SELECT tokenizer FROM corpora WHERE name = ?", [corpus]).fetchone()
    return str(row[0]) if row else ""
