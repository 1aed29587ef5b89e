"""How documents are counted in tokens.

`bytes` (the default) is one token per UTF-8 byte of the text, or per byte of a file: it
needs no vocabulary and every reader can re-derive it. A `tokenizer.json` is run through
the `tokenizers` library (no special tokens added) and recorded by its BLAKE3 hash.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import blake3

from lineage.errors import InputError, UsageError

if TYPE_CHECKING:
    import tokenizers

BYTES = "bytes"
FROM_INPUT = "input"


@dataclass(frozen=True)
class TokenizerSpec:
    """What the user asked for: `bytes`, `input` (token_count column) or a tokenizer.json."""

    kind: str  # "bytes" | "input" | "file"
    path: str | None = None
    digest: str | None = None

    @property
    def identity(self) -> str:
        """The recorded name: every later answer cites it."""
        if self.kind == "file":
            return f"tokenizer.json:blake3:{self.digest}"
        if self.kind == FROM_INPUT:
            return "input:token_count"
        return BYTES

    def load(self) -> tokenizers.Tokenizer:
        import tokenizers

        assert self.path is not None
        try:
            return tokenizers.Tokenizer.from_file(self.path)
        except Exception as exc:  # the library raises a bare Exception on bad files
            raise InputError(self.path, f"not a usable tokenizer.json ({exc})") from exc


def parse_tokenizer(value: str | None) -> TokenizerSpec:
    """`bytes`, `input`, or the path of a tokenizer.json (or a folder holding one)."""
    if value in (None, "", BYTES):
        return TokenizerSpec(BYTES)
    if value == FROM_INPUT:
        return TokenizerSpec(FROM_INPUT)
    path = Path(value)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise UsageError(f"--tokenizer: {value} is neither 'bytes', 'input' nor a tokenizer.json")
    digest = blake3.blake3(path.read_bytes()).hexdigest()
    return TokenizerSpec("file", str(path.resolve()), digest)


def count_tokens(tokenizer: tokenizers.Tokenizer, texts: list[str]) -> list[int]:
    """Token counts of `texts`, encoded in parallel by the library, no special tokens."""
    encodings = tokenizer.encode_batch_fast(texts, add_special_tokens=False)
    return [len(encoding.ids) for encoding in encodings]
