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
    document's corpus row; and the layout's index of each row's document. On whole
    columns: a run reads millions of windows, each of K x C pieces."""
    import pyarrow as pa

    order = np.asarray(order, dtype=np.int64)
    lengths = layout.ends - layout.starts
    exempt_count = len(dataset.exempt)
    whole = np.flatnonzero(order < exempt_count)  # windows of a padded instance, whole
    whole_doc = held[dataset.exempt[order[whole]]] if len(whole) else whole
    mixed = np.flatnonzero(order >= exempt_count)
    docs = held[dataset.groups[order[mixed] - exempt_count]]  # [windows, K]
    kept = np.minimum(lengths[docs], seq_len // rule.docs_per_instance - int(bos))
    chunks = np.arange(rule.chunks_per_doc)
    sizes = kept[:, :, None] // rule.chunks_per_doc + (
        chunks[None, None, :] < kept[:, :, None] % rule.chunks_per_doc)  # [windows, K, C]
    offsets = np.cumsum(sizes, axis=2) - sizes  # where each piece starts in its document
    laid = sizes.transpose(0, 2, 1).reshape(len(mixed), -1)  # piece order: chunk, then doc
    front = (bos & (kept.sum(axis=1) < seq_len)).astype(np.int64)  # a BOS when there is room
    slots = np.cumsum(laid, axis=1) - laid + front[:, None]
    columns = {
        "window": np.concatenate((whole, np.repeat(mixed, laid.shape[1]))),
        "slot": np.concatenate((np.full(len(whole), int(bos)), slots.reshape(-1))),
        "doc": np.concatenate((whole_doc, np.repeat(docs[:, None, :], rule.chunks_per_doc,
                                                    axis=1).reshape(-1))),
        "doc_offset": np.concatenate((np.zeros(len(whole), dtype=np.int64),
                                      offsets.transpose(0, 2, 1).reshape(-1))),
        "n_tokens": np.concatenate((np.minimum(lengths[whole_doc], seq_len - int(bos)),
                                    laid.reshape(-1))),
    }
    rank = np.lexsort((columns["slot"], columns["window"]))
    rank = rank[columns["n_tokens"][rank] > 0]
    doc = columns["doc"][rank].astype(np.int64)
    return pa.table({"window": columns["window"][rank].astype(np.int64),
                     "slot": columns["slot"][rank].astype(np.int64), "rid": rids[doc],
                     "doc_offset": columns["doc_offset"][rank].astype(np.int64),
                     "n_tokens": columns["n_tokens"][rank].astype(np.int64)}), doc
