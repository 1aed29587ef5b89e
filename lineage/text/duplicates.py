"""Copies inside a corpus: clusters of exact, text-identical and near-duplicate documents.

From the stored tables alone, no text read again:

- `exact`: documents with one content hash (the same bytes; `documents`);
- `text`: documents with one normalized-text hash but more than one content hash
  (re-wrapped, re-encoded, re-cased copies; `text_documents`);
- `near`: documents whose `lineage-near/1` signatures agree on at least `min_shared`
  of the 42 bands (`near_bands`), joined transitively, when the documents of the
  cluster do not all have one text hash. Two texts of shingle Jaccard J share a band
  with probability J^3, so b shared bands estimate J as (b / 42)^(1/3); a threshold J
  asks for at least ceil(42 J^3) shared bands (docs/near-spec.md §8).

The band table is sorted by key, so the documents sharing a key are one run of rows:
it is read part by part, in key order, and pairs are made within each run. A key held by
more than `MAX_RUN` documents makes no pairs (a band of common words' minima shared
by thousands of short texts; true copies that many are exact or text clusters anyway).
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lineage.corpora.query import get_corpus
from lineage.errors import UsageError
from lineage.store.base import BaseStore
from lineage.store.part_select import part_files
from lineage.text.answers import CorpusDuplicates, DuplicateCluster, DuplicateDocument
from lineage.text.minhash import BANDS, NEAR_SPEC

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

DEFAULT_THRESHOLD = 0.4  # shingle Jaccard: 3 shared bands; a 20 % copy's median is 0.53
MAX_RUN = 1_000  # documents sharing one band key, beyond which the key makes no pairs
SPILL_CODES = 1 << 24  # pair codes held in memory (128 MiB) before they go to staging files
PARTITIONS = 64  # staging files of pair codes, by their first document's range
GROUPING_MEMORY = "2GB"  # DuckDB's bound for the exact and text groups (it spills past it)


def min_shared_bands(threshold: float) -> int:
    """The shared bands whose estimate (b / 42)^(1/3) reaches the threshold (at least 1)."""
    return max(1, math.ceil(BANDS * threshold ** 3 - 1e-9))


def corpus_duplicates(store: BaseStore, corpus: str, *,
                      threshold: float | None = None) -> CorpusDuplicates:
    """The clusters of copies in `corpus`, largest first (then exact, text, near)."""
    threshold = DEFAULT_THRESHOLD if threshold is None else threshold
    if not 0.0 < threshold <= 1.0:
        raise UsageError(f"--threshold {threshold}: a Jaccard similarity, above 0 and at "
                         "most 1")
    info = get_corpus(store, corpus)  # UnknownObjectError for a corpus the store lacks
    needed = min_shared_bands(threshold)
    with store.reader(views=False) as con:
        files = {table: part_files(con, store, table, corpus)
                 for table in ("documents", "text_documents")}
        with _grouping(store) as grouping:
            clusters = _exact(grouping, files["documents"]) + _text(grouping,
                                                                    files["text_documents"])
        near_files = part_files(con, store, "near_bands", corpus)
        if near_files:
            clusters += _near(con, store, corpus, near_files, needed, info.documents)
    order = {"exact": 0, "text": 1, "near": 2}
    clusters.sort(key=lambda c: (-c.size, order[c.kind], c.documents[0].doc_id))
    counts = {kind: sum(c.kind == kind for c in clusters) for kind in order}
    return CorpusDuplicates(
        corpus=corpus, documents=info.documents,
        near_index=bool(near_files), near_spec=NEAR_SPEC, threshold=threshold,
        min_shared_bands=needed, max_run=MAX_RUN,
        clusters_by_kind=counts,
        documents_in_clusters=sum(c.size for c in clusters),
        clusters=tuple(clusters),
    )


@contextmanager
def _grouping(store: BaseStore) -> Iterator[Any]:
    """A DuckDB connection of its own for grouping a corpus's hashes, its memory bounded
    and its spill in the store's staging (the readers' shared instance has no bound: at
    10M documents these groups took 2.3 GB there)."""
    from lineage.store.scratch import new_staging_dir, spilling_connection

    folder = new_staging_dir(store.staging_dir)
    try:
        con = spilling_connection(folder, GROUPING_MEMORY)
        try:
            yield con
        finally:
            con.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _exact(con: Any, files: list[str]) -> list[DuplicateCluster]:
    return [DuplicateCluster(kind="exact", size=len(members), content_hash=digest,
                             text_hash=None, shared_bands=None, documents=members)
            for digest, members in _sharing(con, files, "content_hash", "count(*) > 1")]


def _text(con: Any, files: list[str]) -> list[DuplicateCluster]:
    return [DuplicateCluster(kind="text", size=len(members), content_hash=None,
                             text_hash=digest, shared_bands=None, documents=members)
            for digest, members in _sharing(con, files, "text_hash",
                                            "count(DISTINCT content_hash) > 1")]


def _sharing(con: Any, files: list[str], column: str, having: str
             ) -> list[tuple[str, tuple[DuplicateDocument, ...]]]:
    """Each value of `column` whose documents meet `having` (a condition on their group),
    with those documents by doc_id. The values are found first, from their own column:
    listing every group's members and then dropping the single ones cost 30 s for the
    content hashes of 10M documents."""
    if not files:
        return []
    rows = con.execute(
        f"""SELECT {column}, list(struct_pack(doc_id, source, content_hash) ORDER BY doc_id)
            FROM read_parquet($files) WHERE {column} IN (
                SELECT {column} FROM read_parquet($files) GROUP BY {column} HAVING {having})
            GROUP BY {column}""",
        {"files": files}).fetchall()
    return [(value, tuple(DuplicateDocument(**member) for member in members))
            for value, members in rows]


def _near(con: Any, store: BaseStore, corpus: str, files: list[str],
          needed: int, documents: int) -> list[DuplicateCluster]:
    """Clusters of documents joined by pairs sharing at least `needed` band keys."""
    import numpy as np

    counter = PairCounter(store.staging_dir, documents)
    try:
        pairs, shared = _pairs(files, needed, counter)
    finally:
        counter.close()
    if not len(pairs):
        return []
    docs = np.unique(pairs)
    root = _components(docs, pairs)
    info = _document_info(con, store, corpus, docs.tolist())
    groups: dict[int, list[int]] = {}
    for doc, top in zip(docs.tolist(), root.tolist(), strict=True):
        groups.setdefault(top, []).append(doc)
    bands: dict[int, list[int]] = {}
    for (a, _), count in zip(pairs.tolist(), shared.tolist(), strict=True):
        bands.setdefault(int(root[np.searchsorted(docs, a)]), []).append(count)
    clusters = []
    for top, members in groups.items():
        rows = [info[doc] for doc in members]
        if len({row.text_hash for row in rows}) < 2:
            continue  # one text: an exact or text cluster already says so
        rows.sort(key=lambda row: row.doc_id)
        clusters.append(DuplicateCluster(
            kind="near", size=len(rows), content_hash=None, text_hash=None,
            shared_bands=(min(bands[top]), max(bands[top])),
            documents=tuple(row.document for row in rows)))
    return clusters


def _pairs(files: list[str], needed: int, counter: PairCounter,
           ) -> tuple[np.ndarray, np.ndarray]:
    """(document pairs (a < b) sharing at least `needed` band keys, how many each), read
    part by part in key order; a run of one key may continue into the next part."""
    import numpy as np
    import pyarrow.parquet as pq

    carry_keys = np.empty(0, np.uint64)
    carry_docs = np.empty(0, np.uint32)
    for path in files:  # one owner's parts, in path order: in key order
        table = pq.read_table(path, columns=["band_key", "doc"])
        keys = np.concatenate([carry_keys, table["band_key"].to_numpy()])
        docs = np.concatenate([carry_docs, table["doc"].to_numpy().astype(np.uint32)])
        last = len(keys) if not len(keys) else int(np.searchsorted(keys, keys[-1]))
        counter.add(_run_pairs(keys[:last], docs[:last]))
        carry_keys, carry_docs = keys[last:], docs[last:]
    counter.add(_run_pairs(carry_keys, carry_docs))
    unique, counts = counter.counted(needed)
    pairs = np.stack([(unique >> np.uint64(32)).astype(np.int64),
                      (unique & np.uint64(0xFFFFFFFF)).astype(np.int64)], axis=1)
    return pairs, counts


class PairCounter:
    """The pair codes (a << 32 | b) of every run, counted: each code's number of runs.

    Held in memory while they are few (`SPILL_CODES`); past that, dealt to `PARTITIONS`
    staging files by their first document (a range of document numbers a file) and
    counted one file at a time, so memory stays bounded whatever the corpus holds (10M
    documents of the Open-1B shape make 79M codes; counting them at once took 3.8 GB).
    The files' ranges ascend, so the codes come out in the same order either way."""

    def __init__(self, staging_root: Path, documents: int) -> None:
        self._staging_root = staging_root
        self._documents = max(documents, 1)
        self._held: list[np.ndarray] = []
        self._count = 0
        self._folder: Path | None = None

    def add(self, codes: np.ndarray) -> None:
        if not len(codes):
            return
        self._held.append(codes)
        self._count += len(codes)
        if self._count >= SPILL_CODES:
            self._spill()

    def _spill(self) -> None:
        import numpy as np

        from lineage.store.scratch import new_staging_dir

        if self._folder is None:
            self._folder = new_staging_dir(self._staging_root)
        if not self._held:
            return
        codes = np.concatenate(self._held)
        self._held, self._count = [], 0
        part = np.minimum((codes >> np.uint64(32)) * np.uint64(PARTITIONS)
                          // np.uint64(self._documents), PARTITIONS - 1).astype(np.int64)
        order = np.argsort(part, kind="stable")
        codes, part = codes[order], part[order]
        bounds = np.searchsorted(part, np.arange(PARTITIONS + 1))
        for p in range(PARTITIONS):
            if bounds[p] < bounds[p + 1]:
                with (self._folder / f"{p:04d}.codes").open("ab") as out:
                    codes[bounds[p]:bounds[p + 1]].tofile(out)

    def counted(self, needed: int) -> tuple[np.ndarray, np.ndarray]:
        """The codes found at least `needed` times, ascending, with their counts."""
        import numpy as np

        if self._folder is None:
            return _at_least(np.concatenate(self._held) if self._held
                             else np.empty(0, np.uint64), needed)
        self._spill()
        found = [_at_least(np.fromfile(path, np.uint64), needed)
                 for path in sorted(self._folder.glob("*.codes"))]
        return (np.concatenate([np.empty(0, np.uint64), *(codes for codes, _ in found)]),
                np.concatenate([np.empty(0, np.int64), *(counts for _, counts in found)]))

    def close(self) -> None:
        """Remove the staging files (the counts are kept)."""
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
        self._held = []


def _at_least(codes: np.ndarray, needed: int) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    unique, counts = np.unique(codes, return_counts=True)
    keep = counts >= needed
    return unique[keep], counts[keep]


def _run_pairs(keys: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Each pair of documents within a run of equal keys, as a << 32 | b (a < b). The
    rows come sorted by (key, doc), so a run's documents ascend; runs of one size are
    paired together, one array operation a size (at 10M documents, 650,000 runs of 3 to
    1,000 documents: one at a time took most of a minute)."""
    import numpy as np

    if len(keys) < 2:
        return np.empty(0, np.uint64)
    fresh = np.concatenate([[True], (keys[1:] != keys[:-1]) | (docs[1:] != docs[:-1])])
    keys, docs = keys[fresh], docs[fresh].astype(np.uint64)  # a document once a run
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    sizes = np.diff(np.append(starts, len(keys)))
    out = [np.empty(0, np.uint64)]
    for size in np.unique(sizes[(sizes >= 2) & (sizes <= MAX_RUN)]).tolist():
        members = docs[starts[sizes == size][:, None] + np.arange(size)]  # a run a row
        first, second = np.triu_indices(size, k=1)
        out.append((members[:, first] << np.uint64(32) | members[:, second]).ravel())
    return np.concatenate(out)


def _components(docs: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """The smallest document of each document's connected component, by union-find."""
    import numpy as np

    parent = list(range(len(docs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    index = np.searchsorted(docs, pairs)
    for i, j in index.tolist():
        a, b = find(i), find(j)
        if a != b:
            parent[max(a, b)] = min(a, b)  # the smaller index roots: doc order, not chance
    return docs[[find(i) for i in range(len(docs))]]


@dataclass(frozen=True)
class _NearMember:
    """A document of a near cluster: the listed document, and its text hash (the cluster
    is kept only when its documents have more than one)."""

    document: DuplicateDocument
    text_hash: str

    @property
    def doc_id(self) -> str:
        return self.document.doc_id


def _document_info(con: Any, store: BaseStore, corpus: str,
                   docs: list[int]) -> dict[int, _NearMember]:
    """doc_id, source, content and text hash of these document numbers."""
    import pyarrow as pa

    files = part_files(con, store, "text_documents", corpus, any_of=("doc", docs))
    con.register("wanted_docs", pa.table({"doc": pa.array(docs, pa.uint32())}))
    try:
        rows = con.execute(
            "SELECT doc, doc_id, source, content_hash, text_hash FROM read_parquet(?) "
            "SEMI JOIN wanted_docs USING (doc)", [files]).fetchall()
    finally:
        con.unregister("wanted_docs")
    return {int(doc): _NearMember(DuplicateDocument(doc_id=doc_id, source=source,
                                                    content_hash=content), text)
            for doc, doc_id, source, content, text in rows}
