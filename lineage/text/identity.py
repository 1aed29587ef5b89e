"""Text identity (`lineage-text/1`): the same words, whatever the bytes around them.

A web corpus holds a rights holder's article re-wrapped, re-encoded, with its case or
its quotes changed. Normalizing both sides to the same word sequence makes those copies
equal. The rules, in order (docs/text-spec.md states them for re-implementers):

1. decode UTF-8; drop the invisible format characters in `INVISIBLE` (soft hyphen,
   zero-width space and joiners, word joiner, byte-order mark);
2. Unicode NFKC, then full case folding (`str.casefold`), then NFKC again;
3. words are the maximal runs of letters and numbers (`str.isalnum()`); everything
   else (whitespace, punctuation, symbols, combining marks, controls) separates words;
4. the normalized text is the words joined by single spaces, and the text hash is
   BLAKE3-256 of its UTF-8 bytes. A text without words has no text identity.

Steps 2 and 3 read the Unicode character database of the running Python
(`UNICODE_VERSION`); a text index records the version it was built under, and lineage
never mixes indexes or queries of different versions.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import blake3

TEXT_SPEC = "lineage-text/1"
# NFKC, case folding and the letter/number classes come from this Unicode version
# (Python 3.11: 14.0.0, 3.12: 15.0.0, 3.13: 15.1.0); characters assigned in a later
# version normalize differently, so every text index records it.
UNICODE_VERSION = unicodedata.unidata_version

INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\ufeff"
_DROP_INVISIBLE = str.maketrans(dict.fromkeys(INVISIBLE))
_WORD = re.compile(r"[^\W_]+")  # Python's \w is alnum plus '_'; '_' separates words
# ASCII text is already NFKC and folds by lower(): every non-alphanumeric character
# becomes a space and split() finds the same words as the general path, several times
# faster (a property test holds the two paths equal).
_ASCII_SEPARATORS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})
_CHUNK = re.compile(r"\S+")


def fold(text: str) -> str:
    """Steps 1-2: invisible characters dropped, NFKC, case folded, NFKC again."""
    text = text.translate(_DROP_INVISIBLE)
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def words(text: str) -> list[str]:
    """The normalized words of a text, in order."""
    if text.isascii():
        return text.lower().translate(_ASCII_SEPARATORS).split()
    return _WORD.findall(fold(text))


def normalize(text: str) -> str:
    """The normalized text: its words joined by single spaces."""
    return " ".join(words(text))


def text_hash(text: str) -> str | None:
    """BLAKE3-256 hex of the normalized text, or None for a text without words."""
    normal = normalize(text)
    return blake3.blake3(normal.encode("utf-8")).hexdigest() if normal else None


@dataclass(frozen=True)
class LocatedWords:
    """A text's normalized words with where each came from in the original text."""

    words: list[str]
    starts: list[int]  # character offset in the original text where the word's chunk starts
    ends: list[int]  # ... and one past where it ends

    def char_span(self, first_word: int, end_word: int) -> tuple[int, int]:
        """Original character offsets covering words [first_word, end_word)."""
        return self.starts[first_word], self.ends[end_word - 1]


def located_words(text: str) -> LocatedWords:
    """Words with offsets into `text`, for showing a match where the reader typed it.

    Folding is done per whitespace-separated chunk, so every word maps back to the chunk
    it came from (folding never joins characters across whitespace, so the words are
    the same as `words(text)`; a property test holds this). A chunk such as "don't"
    gives two words that share its span.
    """
    found: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for chunk in _CHUNK.finditer(text):
        pieces = _WORD.findall(fold(chunk.group()))
        found.extend(pieces)
        starts.extend([chunk.start()] * len(pieces))
        ends.extend([chunk.end()] * len(pieces))
    return LocatedWords(found, starts, ends)
