"""Word-level alignment of a query with a document: the words they share.

A near-copy keeps most of its words in their order, with words replaced, deleted or
inserted between them, and sometimes its sentences in another order. The alignment
finds them in time linear in the two texts (no quadratic edit distance):

1. anchors: each query word 2-gram found in the document pairs with the document's
   positions of it (the first `MAX_POSITIONS`, so a refrain repeated thousands of times
   costs a bounded amount);
2. the longest chain of anchors increasing on both sides (patience sorting,
   O(P log P) for P <= MAX_POSITIONS * n pairs) gives the aligned word pairs;
3. gaps of at most `GAP_WORDS` words on both sides between aligned words are aligned
   word by word (a longest common subsequence of at most GAP_WORDS^2 cells), which
   recovers a word standing alone between two edits. Wider gaps stay unaligned: two
   unrelated texts leave wide gaps, and aligning them would find common words by chance.
4. moved passages: steps 1-3 run again over the words still unaligned on both sides, at
   most `MAX_MOVES` times, each pass keeping only the regions of at least `MOVED_WORDS`
   aligned words (a sentence moved elsewhere, not chance 2-grams); the first pass that
   keeps none ends it.

The result is a list of blocks of equal words in query order (no word aligned twice on
either side); `regions` groups them into the stretches where the texts run side by side
(blocks at most GAP_WORDS apart on both sides, going forwards in both).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple

MAX_POSITIONS = 8  # document positions paired with each query 2-gram
GAP_WORDS = 8  # a gap this wide on both sides is aligned word by word; a wider one ends a region
MOVED_WORDS = 8  # a passage aligned out of order counts from this many aligned words
MAX_MOVES = 32  # passes looking for moved passages (a 350-word text has about 25 sentences)


class Block(NamedTuple):
    """query[query:query + size] == doc[doc:doc + size]."""

    query: int
    doc: int
    size: int


class Region(NamedTuple):
    """A stretch where the texts run side by side: words [start, end) on each side, and
    how many of the query's words in it are aligned."""

    query: tuple[int, int]
    doc: tuple[int, int]
    aligned: int


def align(query: Sequence[str], doc: Sequence[str]) -> list[Block]:
    """The aligned words of `query` and `doc`, as blocks in increasing query order (no
    word aligned twice on either side): those in order first, then moved passages."""
    width = 2 if len(query) >= 2 and len(doc) >= 2 else 1
    anchors = _anchors(query, doc, width)
    pairs = _with_gaps(query, doc, _word_pairs(_chain(anchors), width))
    blocks = _blocks(pairs)
    taken_query, taken_doc = {q for q, _ in pairs}, {d for _, d in pairs}
    for _ in range(MAX_MOVES if width == 2 else 0):
        anchors = [(q, d) for q, d in anchors
                   if not {q, q + 1} & taken_query and not {d, d + 1} & taken_doc]
        found = [(q, d) for q, d in _with_gaps(query, doc, _word_pairs(_chain(anchors), width))
                 if q not in taken_query and d not in taken_doc]
        moved = [block for region in _regions_of(_blocks(found))
                 if region[1] >= MOVED_WORDS for block in region[0]]
        if not moved:
            break
        blocks += moved
        for block in moved:
            taken_query.update(range(block.query, block.query + block.size))
            taken_doc.update(range(block.doc, block.doc + block.size))
    return sorted(blocks)


def aligned_words(blocks: Sequence[Block]) -> int:
    return sum(block.size for block in blocks)


def regions(blocks: Sequence[Block]) -> list[Region]:
    """Blocks (in query order) grouped into regions: a gap wider than GAP_WORDS on either
    side, or a step back in the document, starts a new one."""
    found: list[Region] = []
    for group, aligned in _regions_of(blocks):
        first, last = group[0], group[-1]
        found.append(Region((first.query, last.query + last.size),
                            (first.doc, last.doc + last.size), aligned))
    return found


def _regions_of(blocks: Sequence[Block]) -> list[tuple[list[Block], int]]:
    """Blocks grouped as `regions` groups them, each group with its aligned words."""
    found: list[tuple[list[Block], int]] = []
    for block in blocks:
        if found:
            group, aligned = found[-1]
            last = group[-1]
            if (0 <= block.query - (last.query + last.size) <= GAP_WORDS
                    and 0 <= block.doc - (last.doc + last.size) <= GAP_WORDS):
                group.append(block)
                found[-1] = (group, aligned + block.size)
                continue
        found.append(([block], block.size))
    return found


def _anchors(query: Sequence[str], doc: Sequence[str], n: int) -> list[tuple[int, int]]:
    """(query, document) positions of equal word n-grams (2-grams; words, for a one-word
    text), at most MAX_POSITIONS document positions per query position."""
    where: dict[tuple[str, ...], list[int]] = {}
    for d in range(len(doc) - n + 1):
        found = where.setdefault(tuple(doc[d:d + n]), [])
        if len(found) < MAX_POSITIONS:
            found.append(d)
    pairs = []
    for q in range(len(query) - n + 1):
        for d in where.get(tuple(query[q:q + n]), ()):
            pairs.append((q, d))
    return pairs


def _chain(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest chain of pairs strictly increasing in both positions (the first such
    chain patience sorting finds: the result depends on the pairs alone)."""
    # Query ascending, document descending: two pairs of one query position never chain.
    ordered = sorted(pairs, key=lambda p: (p[0], -p[1]))
    tails: list[int] = []  # document position ending the best chain of each length
    ends: list[int] = []  # index in `ordered` of that chain's last pair
    before = [-1] * len(ordered)
    for i, (_, d) in enumerate(ordered):
        at = bisect.bisect_left(tails, d)
        before[i] = ends[at - 1] if at else -1
        if at == len(tails):
            tails.append(d)
            ends.append(i)
        else:
            tails[at], ends[at] = d, i
    chain = []
    i = ends[-1] if ends else -1
    while i >= 0:
        chain.append(ordered[i])
        i = before[i]
    return chain[::-1]


def _word_pairs(anchors: list[tuple[int, int]], width: int) -> list[tuple[int, int]]:
    """The aligned words the anchors name (every word of each n-gram), kept strictly
    increasing on both sides."""
    pairs: list[tuple[int, int]] = []
    for q, d in anchors:
        for step in range(width):
            if not pairs or (q + step > pairs[-1][0] and d + step > pairs[-1][1]):
                pairs.append((q + step, d + step))
    return pairs


def _with_gaps(query: Sequence[str], doc: Sequence[str],
               pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`pairs` with the words of each narrow gap between them aligned too."""
    if not pairs:
        return pairs
    out: list[tuple[int, int]] = []
    previous = (-1, -1)
    for pair in [*pairs, (len(query), len(doc))]:
        q0, d0 = previous[0] + 1, previous[1] + 1
        if 0 < pair[0] - q0 <= GAP_WORDS and 0 < pair[1] - d0 <= GAP_WORDS:
            out.extend(_common(query, doc, q0, pair[0], d0, pair[1]))
        if pair[0] < len(query):
            out.append(pair)
        previous = pair
    return out


def _common(query: Sequence[str], doc: Sequence[str], q0: int, q1: int, d0: int,
            d1: int) -> list[tuple[int, int]]:
    """A longest common subsequence of query[q0:q1] and doc[d0:d1], as word pairs."""
    rows, cols = q1 - q0, d1 - d0
    table = [[0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(rows - 1, -1, -1):
        for j in range(cols - 1, -1, -1):
            table[i][j] = (table[i + 1][j + 1] + 1 if query[q0 + i] == doc[d0 + j]
                           else max(table[i + 1][j], table[i][j + 1]))
    found, i, j = [], 0, 0
    while i < rows and j < cols:
        if query[q0 + i] == doc[d0 + j]:
            found.append((q0 + i, d0 + j))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return found


def _blocks(pairs: list[tuple[int, int]]) -> list[Block]:
    blocks: list[Block] = []
    for q, d in pairs:
        if blocks:
            last = blocks[-1]
            if q == last.query + last.size and d == last.doc + last.size:
                blocks[-1] = Block(last.query, last.doc, last.size + 1)
                continue
        blocks.append(Block(q, d, 1))
    return blocks
