"""OLMo-core's `NumpyPackedFSLDataset`: whole documents packed into instances, best fit.

The dataset packs the documents of each group of `source_group_size` consecutive token
files (1 by default: each file alone) with the Optimized Best-Fit Decreasing algorithm of
"Fewer Truncations Improve Language Modeling" (OLMo-core's `pack_documents_into_instances`):

- the documents are the file's spans up to and including each closing EOS (as
  olmo_tokens.closing_eos finds them, with the BOS opening the next), longer than the
  sequence length L cut to their first L tokens (`truncate`, the default) or into pieces
  of L (`fragment`);
- they are taken longest first (numpy's `argsort` of the negated lengths, as OLMo-core
  calls it: equal lengths come in the order that sort leaves them);
- each goes into the instance whose free space is the smallest that holds it, the
  earliest made of those, or a new instance when none does;
- an instance is its documents in the order they went in, padded to L.

Instances are numbered in the order they were made, group after group. In lineage's
terms every document in an instance is a segment: its content (without the BOS and EOS)
from the slot where it lands.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lineage.errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa

    from lineage.ingest.orders.olmo_tokens import Layout

LONG_DOCUMENTS = ("truncate", "fragment")


@dataclass(frozen=True)
class Packing:
    """The settings of `NumpyPackedFSLDatasetConfig` that decide the instances."""

    long_doc_strategy: str = "truncate"
    source_group_size: int = 1

    def check(self, seq_len: int) -> None:
        if self.long_doc_strategy not in LONG_DOCUMENTS:
            raise UsageError(f"--long-doc-strategy {self.long_doc_strategy!r}: expected one "
                             f"of {', '.join(LONG_DOCUMENTS)}")
        if self.source_group_size < 1:
            raise UsageError("--source-group-size must be at least 1")
        if seq_len & (seq_len - 1):
            raise UsageError(f"--sequence-length {seq_len}: packing needs a power of 2")

    def to_json(self) -> dict[str, object]:
        return {"long_doc_strategy": self.long_doc_strategy,
                "source_group_size": self.source_group_size}


@dataclass(frozen=True)
class Packed:
    """Every packed instance's pieces: spans [start, end) in the layout's coordinate."""

    first: np.ndarray  # [instances + 1]: instance i holds pieces first[i]..first[i+1]-1
    start: np.ndarray  # each piece, in instance order
    end: np.ndarray

    @property
    def size(self) -> int:
        return len(self.first) - 1


def pack(closing: list[np.ndarray], bases: np.ndarray, seq_len: int, rule: Packing) -> Packed:
    """The instances of every group of files, as OLMo-core packs them, from each file's
    closing EOS positions (`closing_eos`) and where each file starts in the layout."""
    firsts, starts, ends = [0], [], []
    for group in range(0, len(closing), rule.source_group_size):
        members = range(group, min(group + rule.source_group_size, len(closing)))
        spans = np.concatenate([_spans(closing[f], int(bases[f]), seq_len, rule)
                                for f in members])
        order = np.argsort(-1 * (spans[:, 1] - spans[:, 0]).astype(np.int64))
        spans = np.take(spans, order, axis=0)
        for instance in _best_fit(spans[:, 1] - spans[:, 0], seq_len):
            starts.extend(spans[instance, 0].tolist())
            ends.extend(spans[instance, 1].tolist())
            firsts.append(len(starts))
    return Packed(np.array(firsts, dtype=np.int64), np.array(starts, dtype=np.int64),
                  np.array(ends, dtype=np.int64))


def _spans(closing: np.ndarray, base: int, seq_len: int, rule: Packing) -> np.ndarray:
    """A file's documents, EOS included, cut as the long-document strategy says."""
    begin = np.concatenate(([0], closing[:-1] + 1)).astype(np.int64)[:len(closing)]
    end = closing + 1
    if rule.long_doc_strategy == "truncate":
        end = np.minimum(end, begin + seq_len)
        pieces = np.stack((begin, end), axis=1)
    else:
        counts = -(-(end - begin) // seq_len)
        which = np.repeat(np.arange(len(begin)), counts)
        step = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        lo = begin[which] + step * seq_len
        pieces = np.stack((lo, np.minimum(end[which], lo + seq_len)), axis=1)
    return pieces.reshape(-1, 2) + base


def _best_fit(lengths: np.ndarray, seq_len: int) -> list[list[int]]:
    """The pieces (by position in `lengths`, longest first) of each instance made."""
    instances: list[list[int]] = []
    free: list[int] = []  # the free spaces some instance has, sorted; seq_len: a new one
    waiting: dict[int, deque[int]] = {}  # free space -> instances with it, oldest first
    for piece, length in enumerate(lengths.tolist()):
        at = bisect_left(free, length)
        if at == len(free):  # no instance has room: a new one
            instances.append([])
            chosen, space = len(instances) - 1, seq_len
        else:
            space = free[at]
            chosen = waiting[space].popleft()
            if not waiting[space]:
                del free[at], waiting[space]
        instances[chosen].append(piece)
        left = space - length
        if left > 0:
            if left not in waiting:
                waiting[left] = deque()
                insort(free, left)
            waiting[left].append(chosen)
    return instances


def packed_segments(order: np.ndarray, packed: Packed, layout: Layout, rids: np.ndarray,
                    bos: bool = False) -> tuple[pa.Table, np.ndarray]:
    """The segments of each window (window w read instance order[w]): each piece's
    document content, from the slot where the piece lands; and each row's document."""
    import pyarrow as pa

    order = np.asarray(order, dtype=np.int64)
    counts = packed.first[order + 1] - packed.first[order]
    window = np.repeat(np.arange(len(order), dtype=np.int64), counts)
    piece = np.repeat(packed.first[order], counts) + (
        np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts))
    start, end = packed.start[piece], packed.end[piece]
    slot = np.cumsum(end - start) - (end - start)
    slot -= np.repeat(slot[np.cumsum(counts) - counts] if len(slot) else slot, counts)
    doc = np.searchsorted(layout.starts, start + int(bos), side="right") - 1  # its document
    lo = np.maximum(start, layout.starts[doc])  # a piece holds its BOS, EOS: no content
    hi = np.minimum(end, layout.ends[doc])
    keep = hi > lo
    table = pa.table({"window": window[keep], "slot": (slot + lo - start)[keep],
                      "rid": rids[doc[keep]], "doc_offset": (lo - layout.starts[doc])[keep],
                      "n_tokens": (hi - lo)[keep]})
    return table, doc[keep]
