"""A second, deliberately plain implementation of docs/text-spec.md, from its text alone.

`lineage-text/1` (normalization, words, text hash) and `lineage-fingerprint/1` (k-gram
hashes, winnowing, fingerprints), one character, byte and window at a time. It shares no
code with lineage/: the tests compare the two on random and real text, and where they
disagree the spec text decides which one is wrong. It also writes the golden vectors of
tests/golden/text/.
"""

from __future__ import annotations

import unicodedata

import blake3

TEXT_SPEC = "lineage-text/1"
FINGERPRINT_SPEC = "lineage-fingerprint/1"
K = 5
W = 20

# §1 step 1: the invisible format characters, deleted.
INVISIBLE = {"\u00ad", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"}

P = 0x100000001B3


def fold(text: str) -> str:
    """§1 steps 1-2: delete the invisible characters, then NFKC, case fold, NFKC."""
    kept = "".join(ch for ch in text if ch not in INVISIBLE)
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", kept).casefold())


def is_word_character(ch: str) -> bool:
    """§1 step 3: general category L*, Nd, Nl or No, or a character with a numeric value."""
    category = unicodedata.category(ch)
    return (category.startswith("L") or category in ("Nd", "Nl", "No")
            or unicodedata.numeric(ch, None) is not None)


def words(text: str) -> list[str]:
    """§1 step 3: the maximal runs of word characters of the folded text."""
    found: list[str] = []
    current = ""
    for ch in fold(text):
        if is_word_character(ch):
            current += ch
        elif current:
            found.append(current)
            current = ""
    if current:
        found.append(current)
    return found


def located_words(text: str) -> list[tuple[str, int, int]]:
    """Each word with the character offsets of its whitespace-separated chunk (the
    offsets `query_chars` and `doc_chars` report): the chunks are the maximal runs of
    characters that are not whitespace (`str.isspace`), each normalized on its own."""
    found: list[tuple[str, int, int]] = []
    start = None
    for i, ch in enumerate(text + " "):
        if not ch.isspace() and start is None:
            start = i
        elif ch.isspace() and start is not None:
            found.extend((word, start, i) for word in words(text[start:i]))
            start = None
    return found


def normalized(text: str) -> str:
    """§1 step 4: the words joined by single spaces."""
    return " ".join(words(text))


def text_hash(text: str) -> str | None:
    """§1 step 4: BLAKE3-256 hex of the normalized text's UTF-8; None without words."""
    normal = normalized(text)
    if not normal:
        return None
    return blake3.blake3(normal.encode("utf-8")).hexdigest()


def gram_bytes(text_words: list[str], k: int = K) -> list[bytes]:
    """§2 step 1: gram i (0 <= i <= n - k) is words i..i+k-1 joined by spaces, as UTF-8."""
    return [" ".join(text_words[i:i + k]).encode("utf-8")
            for i in range(0, len(text_words) - k + 1)]


def gram_hash(data: bytes) -> int:
    """§2 step 2: sum of (b_j + 1) * P^j modulo 2^64, then the MurmurHash3 finalizer."""
    h, power = 0, 1  # power = P^j modulo 2^64
    for b in data:
        h = (h + (b + 1) * power) % 2**64
        power = (power * P) % 2**64
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) % 2**64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) % 2**64
    h ^= h >> 33
    return h


def gram_hashes(text_words: list[str], k: int = K) -> list[int]:
    return [gram_hash(g) for g in gram_bytes(text_words, k)]


def winnow(hashes: list[int], w: int = W) -> list[tuple[int, int]]:
    """§2 step 3: from every window of w consecutive grams the smallest hash, the
    rightmost one on ties; fewer than w grams (at least one) are a single window. The
    distinct selected positions, in position order, as (position, hash)."""
    m = len(hashes)
    if m == 0:
        return []
    windows = [range(0, m)] if m < w else [range(j, j + w) for j in range(0, m - w + 1)]
    selected = set()
    for window in windows:
        smallest = min(hashes[i] for i in window)
        selected.add(max(i for i in window if hashes[i] == smallest))
    return [(i, hashes[i]) for i in sorted(selected)]


def robust_winnow(hashes: list[int], w: int = W) -> list[tuple[int, int]]:
    """Schleimer, Wilkerson and Aiken's robust winnowing, which lineage-fingerprint/1 is
    NOT: on a tie a window keeps the position the previous window selected while it is
    still inside, else the rightmost minimum. Here to show where the two part."""
    m = len(hashes)
    if m == 0:
        return []
    windows = [range(0, m)] if m < w else [range(j, j + w) for j in range(0, m - w + 1)]
    selected: list[int] = []
    for window in windows:
        smallest = min(hashes[i] for i in window)
        previous = selected[-1] if selected else None
        if previous is not None and previous in window and hashes[previous] == smallest:
            continue
        selected.append(max(i for i in window if hashes[i] == smallest))
    return [(i, hashes[i]) for i in sorted(set(selected))]


def fingerprints(text: str) -> list[tuple[int, int]]:
    """(position, fingerprint) of a text: its words' grams, winnowed."""
    return winnow(gram_hashes(words(text)))
