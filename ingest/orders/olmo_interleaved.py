"""OLMo-core's `NumpyInterleavedFSLDataset`: chunks of several documents, interleaved.

The dataset starts from the padded instances (olmo_padded.py: one document each). The
documents of files named exempt keep those instances, numbered first, in document order.
The others are shuffled once, by `np.random.Generator(PCG64(seed)).permutation`, and cut
into groups of `docs_per_instance` (a last incomplete group is dropped); instance
`exempt + j` is group j. Each document of a group is cut to its first
sequence_length // docs_per_instance tokens of its padded instance, its special tokens
(EOS, padding, BOS) are removed, and what is left is split into `chunks_per_doc` nearly
equal pieces (`tensor_split`: the first pieces one longer). The instance is chunk 0 of
every document in group order, then chunk 1 of each, and so on; then a BOS in front and
an EOS behind when there is room for each, and padding to sequence_length.

In lineage's terms each piece is a segment: its document's tokens from where the
previous piece of that document stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lineage.errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa

    from lineage.ingest.orders.olmo_tokens import Layout


@dataclass(frozen=True)
class Interleaving:
    """The settings of `NumpyInterleavedFSLDatasetConfig` that decide the instances."""

    docs_per_instance: int
    chunks_per_doc: int
    seed: int
    exempt_files: tuple[int, ...] = ()  # token files (by position) left out of interleaving

    def check(self, seq_len: int) -> None:
        if self.docs_per_instance < 1 or self.chunks_per_doc < 1:
            raise UsageError("--docs-per-instance and --chunks-per-doc must be at least 1")
        if seq_len % self.docs_per_instance or seq_len % self.chunks_per_doc:
            raise UsageError(f"--sequence-length {seq_len} must be a multiple of "
                             "--docs-per-instance and of --chunks-per-doc")

    def to_json(self) -> dict[str, object]:
        return {"docs_per_instance": self.docs_per_instance,
                "chunks_per_doc": self.chunks_per_doc, "seed": self.seed,
                "exempt_files": list(self.exempt_files)}


@dataclass(frozen=True)
class Interleaved:
    """The dataset's instances: the padded instances kept whole, then the groups."""

    exempt: np.ndarray  # padded instance numbers, in order
    groups: np.ndarray  # [instances, docs_per_instance] padded instance numbers

    @property
    def size(self) -> int:
        return len(self.exempt) + len(self.groups)


def interleave(file_instances: list[int], rule: Interleaving) -> Interleaved:
    """Which padded instances (one per document, numbered file after file) each
    interleaved instance holds."""
    firsts = np.concatenate(([0], np.cumsum(file_instances))).astype(np.int64)
    exempt = np.concatenate([np.arange(firsts[f], firsts[f + 1], dtype=np.int64)
                             for f in sorted(set(rule.exempt_files))] or
                            [np.zeros(0, dtype=np.int64)])
    rest = np.setdiff1d(np.arange(firsts[-1], dtype=np.int64), exempt)  # sorted, as OLMo's
    shuffled = np.random.Generator(np.random.PCG64(seed=rule.seed)).permutation(rest)
    whole = len(shuffled) // rule.docs_per_instance * rule.docs_per_instance
    return Interleaved(exempt, shuffled[:whole].reshape(-1, rule.docs_per_instance))


def interleaved_segments(order: np.ndarray, dataset: Interleaved, held: np.ndarray,
                         layout: Layout, rids: np.ndarray, seq_len: int, rule: Interleaving,
                         bos: bool = False) -> tuple[pa.Table, np.ndarray]:
    """The segments of each window (window w read instance order[w]), with each row's
    document's corpus row; and the layout's index of each row's document."""
    import pyarrow as pa

    lengths = layout.ends - layout.starts
    kept_of = seq_len // rule.docs_per_instance - int(bos)  # content left of a cut instance
    rows: list[tuple[int, int, int, int, int]] = []  # window, slot, doc, offset, n
    for window, instance in enumerate(np.asarray(order, dtype=np.int64).tolist()):
        if instance < len(dataset.exempt):  # a padded instance, whole
            doc = int(held[dataset.exempt[instance]])
            rows.append((window, int(bos), doc, 0, min(int(lengths[doc]), seq_len - int(bos))))
            continue
        docs = [int(held[i]) for i in dataset.groups[instance - len(dataset.exempt)]]
        kept = [min(int(lengths[doc]), kept_of) for doc in docs]
        pieces = [_split(n, rule.chunks_per_doc) for n in kept]
        slot = int(bos and sum(kept) < seq_len)  # a BOS in front when there is room
        done = [0] * len(docs)
        for chunk in range(rule.chunks_per_doc):
            for d, doc in enumerate(docs):
                n = pieces[d][chunk]
                rows.append((window, slot, doc, done[d], n))
                slot, done[d] = slot + n, done[d] + n
    table = np.array(rows, dtype=np.int64).reshape(-1, 5)
    table = table[table[:, 4] > 0]
    docs_read = table[:, 2]
    return pa.table({"window": table[:, 0], "slot": table[:, 1], "rid": rids[docs_read],
                     "doc_offset": table[:, 3], "n_tokens": table[:, 4]}), docs_read


def _split(n: int, parts: int) -> list[int]:
    """Sizes of `tensor_split(n, parts)`: the first n % parts one longer."""
    return [n // parts + (1 if k < n % parts else 0) for k in range(parts)]
