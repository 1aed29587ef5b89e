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

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import blake3

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

TEXT_SPEC = "lineage-text/1"
# NFKC, case folding and the letter/number classes come from this Unicode version
# (Python 3.11: 14.0.0, 3.12: 15.0.0, 3.13: 15.1.0); characters assigned in a later
# version normalize differently, so every text index records it.
UNICODE_VERSION = unicodedata.unidata_version

INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\ufeff"
_INVISIBLE = re.compile(f"[{INVISIBLE}]")
_WORD = re.compile(r"[^\W_]+")  # Python's \w is alnum plus '_'; '_' separates words
# ASCII text is already NFKC and folds by lower(): every non-alphanumeric character
# becomes a space and split() finds the same words as the general path, several times
# faster (a property test holds the two paths equal).
_ASCII_SEPARATORS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})


def fold(text: str) -> str:
    """Steps 1-2: invisible characters dropped, NFKC, case folded, NFKC again."""
    # A pattern finds them ten times faster than str.translate with a table that is not
    # ASCII to ASCII (7 ms of a 112 KB text), and most texts hold none at all.
    if any(invisible in text for invisible in INVISIBLE):
        text = _INVISIBLE.sub("", text)
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


@dataclass(frozen=True, eq=False)
class LocatedWords:
    """A text's normalized words with where each came from in the original text: word i
    came from the chunk (a maximal run of non-whitespace) from `starts[i]` to `ends[i]`
    (character offsets; lists, or arrays for an ASCII text)."""

    words: list[str]
    starts: Sequence[int] | npt.NDArray[np.int64]
    ends: Sequence[int] | npt.NDArray[np.int64]

    def char_span(self, first_word: int, end_word: int) -> tuple[int, int]:
        """Original character offsets covering words [first_word, end_word)."""
        return int(self.starts[first_word]), int(self.ends[end_word - 1])


def located_words(text: str) -> LocatedWords:
    """Words with offsets into `text`, for showing a match where the reader typed it.

    Folding is done per whitespace-separated chunk, so every word maps back to the chunk
    it came from (folding never joins characters across whitespace, so the words are
    the same as `words(text)`; a property test holds this). A chunk such as "don't"
    gives two words that share its span.

    A document matched against a query is located whole, so the chunks are found in
    arrays, not one by one: an ASCII chunk's words are its runs of ASCII letters and
    digits, counted there; only a chunk holding another character is folded on its own.
    A 116 KB play takes 3 ms instead of 33 (a property test holds this to the plain
    reference of tests/text_reference.py).
    """
    import numpy as np

    found = words(text)
    space_table, alnum_table = _character_classes()
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    edge = np.zeros(1, bool)  # a run can start at the first character and end at the last
    chunk = np.concatenate((edge, ~space_table[np.minimum(codes, len(space_table) - 1)], edge))
    chunk_edges = np.flatnonzero(chunk[1:] != chunk[:-1])  # each chunk's start, then end
    chunk_starts, chunk_ends = chunk_edges[0::2], chunk_edges[1::2]
    alnum = np.concatenate((edge, alnum_table[np.minimum(codes, len(alnum_table) - 1)]))
    run_starts = np.flatnonzero(alnum[1:] > alnum[:-1])  # whitespace ends every run
    counts = np.searchsorted(run_starts, chunk_ends) - np.searchsorted(run_starts, chunk_starts)
    other = np.flatnonzero(codes >= 128)  # not ASCII: their chunks are folded one by one
    after = np.searchsorted(chunk_starts, other, side="right") - 1  # the chunk before each
    other, after = other[after >= 0], after[after >= 0]
    for i in np.unique(after[other < chunk_ends[after]]).tolist():
        counts[i] = len(_WORD.findall(fold(text[chunk_starts[i]:chunk_ends[i]])))
    if int(counts.sum()) != len(found):  # folding joined or split across whitespace
        raise AssertionError("the words of a text's chunks are not the text's words")
    return LocatedWords(found, np.repeat(chunk_starts, counts), np.repeat(chunk_ends, counts))


@functools.cache
def _character_classes() -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Whitespace (`str.isspace`, indexed by code point up to the last whitespace, U+3000;
    the entry past it stands for every later one) and ASCII letters and digits (indexed
    up to 127; entry 128 stands for every other character). Made on first use, so that
    importing this module does not import numpy."""
    import numpy as np

    spaces = [c for c in range(0x3001) if chr(c).isspace()]
    space = np.zeros(spaces[-1] + 2, bool)
    space[spaces] = True
    return space, np.array([c < 128 and chr(c).isalnum() for c in range(129)])
