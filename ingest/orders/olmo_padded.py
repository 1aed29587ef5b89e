"""OLMo-core's `NumpyPaddedFSLDataset`: one instance per document, padded to length.

Instance i of a token file is its i-th document as OLMo-core's
`segment_documents_into_instances` cuts it: the document's tokens and the EOS that closes
it, at most `sequence_length` of them (a longer document keeps its head; its tail is never
read), the rest of the instance filled with the pad token. OLMo-core finds the documents
of a local file by its EOS tokens, numbers the instances file after file, and its data
loader shuffles and batches them as it does fixed-length instances. Tokens after a file's
last EOS belong to no instance.

In lineage's terms each window holds one segment from slot 0 (slot 1 after a BOS): the
document's first min(length, sequence_length) tokens (one fewer after a BOS); the BOS,
the closing EOS and the padding hold no document's token, as a separator does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lineage.errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa

    from lineage.ingest.orders.olmo_tokens import Layout, TokenFile


def padded_instances(files: list[TokenFile], layout: Layout, closings: list[np.ndarray],
                     bos: bool = False) -> tuple[list[tuple[int, int]], np.ndarray]:
    """(file, instances) of each file, in the dataset's order, and the layout's document
    that each instance holds, from each file's closing EOS positions (`closing_eos`). The
    documents lineage maps to the corpus (from the sidecar, when there is one) must be the
    ones those EOS tokens close."""
    entries: list[tuple[int, int]] = []
    held: list[np.ndarray] = []
    bounds = [*map(int, layout.firsts), len(layout.starts)]
    opener = int(bos)  # a document's BOS comes before its content
    for f, (file, closing) in enumerate(zip(files, closings, strict=True)):
        first, end = bounds[f], bounds[f + 1]
        starts = layout.starts[first:end] - layout.bases[f] - opener
        ends = layout.ends[first:end] - layout.bases[f]
        count = len(closing)
        opening = np.concatenate(([0], closing[:-1] + 1)).astype(np.int64)
        listed = min(count, len(ends))
        differ = np.flatnonzero((starts[:listed] != opening[:listed])
                                | (ends[:listed] != closing[:listed]))
        tail_only = len(ends) == count or (len(ends) == count + 1
                                            and ends[-1] == file.n_tokens)
        if len(differ) or not tail_only:
            d = int(differ[0]) if len(differ) else listed
            raise InputError(file.path, f"document {d}: the documents listed for the file "
                             "are not the ones its EOS tokens close, which "
                             "NumpyPaddedFSLDataset makes its instances of (nothing stored)")
        entries.append((f, count))
        held.append(np.arange(first, first + count, dtype=np.int64))
    return entries, np.concatenate(held) if held else np.zeros(0, dtype=np.int64)


def padded_segments(order: np.ndarray, held: np.ndarray, layout: Layout, rids: np.ndarray,
                    seq_len: int, bos: bool = False) -> tuple[pa.Table, np.ndarray]:
    """Window w (the w-th instance read) as its one segment, with its document's corpus
    row; with them, the layout's index of each row's document (as `segments_of`). With a
    BOS, the content starts at slot 1."""
    import pyarrow as pa

    doc = held[np.asarray(order, dtype=np.int64)]
    n_tokens = np.minimum(layout.ends[doc] - layout.starts[doc], seq_len - int(bos))
    keep = n_tokens > 0  # an empty document's instance is its EOS (and BOS) alone
    window = np.arange(len(doc), dtype=np.int64)[keep]
    zeros = np.zeros(len(window), dtype=np.int64)
    table = pa.table({"window": window, "slot": zeros + int(bos), "rid": rids[doc[keep]],
                      "doc_offset": zeros, "n_tokens": n_tokens[keep]})
    return table, doc[keep]
