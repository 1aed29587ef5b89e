"""`lineage ingest order open-transformers`: the Open-1B harness's recorded order.

The harness writes a `doc_map` Parquet (one row per segment of a training window),
token shards in Megatron's indexed-dataset layout (`.bin/.idx`) and a data manifest
(the run's settings; which corpus document each local document of a shard is). This
module checks them against each other and against the corpus (docs/importers.md lists
every rule), re-reads a sample of windows from the `.bin` files and compares them with
the corpus's own tokens, and stores the order through `store_order`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.corpora.manifest import NAME_RULE, is_valid_name
from lineage.errors import InputError, UnknownObjectError, UsageError
from lineage.ingest.orders.common import store_order
from lineage.ingest.orders.indexed import IndexedDataset, read_indexed
from lineage.ingest.orders.open_transformers_checks import check_layout, check_rows
from lineage.ingest.orders.open_transformers_manifest import HarnessManifest, read_manifest
from lineage.ingest.orders.open_transformers_reread import (
    reread_every_window,
    reread_windows,
)
from lineage.ingest.orders.reread_all import check_verify
from lineage.store.base import BaseStore
from lineage.store.part_select import part_files
from lineage.store.parts import Progress
from lineage.stream.imported import ImportedSpec
from lineage.stream.schedule import RankRule

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

DOC_MAP_COLUMNS = ("step", "window", "micro_batch", "slot", "rank", "source", "shard",
                   "local_doc", "token_start", "token_end")
_TEXT_COLUMNS = ("source", "shard")
SAMPLE_WINDOWS = 16


def ingest_open_transformers(
    store: BaseStore,
    doc_map: str | Path,
    *,
    manifest: str | Path,
    shards: str | Path,
    corpus: str,
    stream: str,
    tokenizer: str | Path | None = None,
    sample_windows: int = SAMPLE_WINDOWS,
    verify: str = "sample",
    progress: Progress = None,
) -> dict[str, Any]:
    """Check a harness run's order against its shards and the corpus; store it."""
    started = time.monotonic()
    doc_map, shards = Path(doc_map), Path(shards)
    if sample_windows < 0:
        raise UsageError("--sample-windows must be 0 or more")
    check_verify(verify)
    if not is_valid_name(stream):
        raise UsageError(f"--stream {stream!r}: {NAME_RULE}")
    run = read_manifest(Path(manifest))
    datasets = _load_shards(run, shards)
    manifest_hash, corpus_tokenizer, documents = _corpus(store, corpus)
    doc_ids, doc_tokens, rids = _documents(run, datasets, documents)
    del documents
    rows, doc_map_hash = _read_doc_map(doc_map)
    _check_rules(rows, run, datasets, doc_map)
    checked = reread_every_window(store, corpus, corpus_tokenizer, tokenizer, run, datasets,
                                  rows, doc_ids, doc_tokens, rids) if verify == "all" else \
        reread_windows(store, corpus, corpus_tokenizer, tokenizer, run, datasets, rows,
                       doc_ids, doc_tokens, sample_windows)
    spec = ImportedSpec(
        manifest_hash=manifest_hash, seq_len=run.seq_len, schedule=run.schedule,
        rank_rule=RankRule("micro-batches", run.micro_batch_size),
        framework="open-transformers", artifacts=_artifacts(run, datasets, doc_map_hash),
        settings={"manifest_format": "open-transformers/data-manifest/1", **run.run},
    )
    segments = _segments(rows, rids, doc_tokens)
    del rows, doc_ids, doc_tokens, rids, run, datasets  # the segments hold all store_order needs
    result = store_order(store, stream=stream, corpus=corpus, spec=spec, segments=segments,
                         origin=doc_map, progress=progress)
    return {**result, "checked": checked, "seconds": round(time.monotonic() - started, 3)}


def _load_shards(run: HarnessManifest, shards: Path) -> list[IndexedDataset]:
    if not shards.is_dir():
        raise UsageError(f"--shards {shards}: not a directory")
    import numpy as np

    datasets = []
    for shard in run.shards:
        dataset = read_indexed(shards / shard.shard)
        if dataset.sequences != len(shard.doc_ids):
            raise InputError(dataset.idx, f"{dataset.sequences} documents, but the manifest "
                             f"names {len(shard.doc_ids)} for shard {shard.shard!r}")
        if not np.array_equal(dataset.document_indices, np.arange(dataset.sequences + 1)):
            raise InputError(dataset.idx, "the harness writes one sequence per document; "
                             "this index groups several sequences into a document")
        datasets.append(dataset)
    return datasets


def _corpus(store: BaseStore, corpus: str) -> tuple[str, str, pa.Table]:
    """(manifest hash, tokenizer identity, doc_id and n_tokens of every document)."""
    with store.reader(views=False) as con:
        row = con.execute("SELECT manifest_hash, tokenizer FROM corpora WHERE name = ?",
                          [corpus]).fetchone()
        if row is None:
            raise UnknownObjectError(f"no corpus named {corpus!r}: `lineage corpus list` "
                                     "shows them")
        files = part_files(con, store, "documents", corpus)
        table = con.sql("SELECT doc_id, n_tokens FROM read_parquet(?)",
                        params=[files]).to_arrow_table()
    return str(row[0]), str(row[1]), table


def _documents(run: HarnessManifest, datasets: list[IndexedDataset], documents: pa.Table
               ) -> tuple[pa.ChunkedArray, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The manifest's documents in shard order (global index = shard's first + local
    document): their doc_ids, their token counts (checked against the .idx lengths) and
    their rows in the corpus (rids, doc_id order)."""
    import numpy as np
    import pyarrow as pa

    doc_ids = pa.chunked_array([shard.doc_ids for shard in run.shards])  # not copied
    where = _corpus_rows(doc_ids, documents.column("doc_id"))
    unknown = np.flatnonzero(where < 0)
    if len(unknown):
        named = ", ".join(repr(doc_ids[int(i)].as_py()) for i in unknown[:3])
        raise InputError(run.path, f"doc_id(s) {named} are not in the corpus "
                         f"({len(unknown)} unknown)")
    doc_tokens = documents.column("n_tokens").to_numpy()[where]
    lengths = np.concatenate([d.sequence_lengths for d in datasets]).astype(np.int64)
    expected = doc_tokens + (1 if run.append_eod else 0)
    wrong = np.flatnonzero(lengths != expected)
    if len(wrong):
        first = int(wrong[0])
        shard, local = _locate(datasets, first)
        raise InputError(datasets[shard].idx, f"document {local} ({doc_ids[first].as_py()!r}) "
                         f"has {int(lengths[first])} tokens; the corpus counts "
                         f"{int(doc_tokens[first])}" + (" + 1 end-of-document token"
                                                        if run.append_eod else "")
                         + f" ({len(wrong)} documents differ; was the corpus ingested with "
                         "the harness's tokenizer?)")
    return doc_ids, doc_tokens, where


def _corpus_rows(doc_ids: pa.ChunkedArray, corpus_ids: pa.ChunkedArray
                 ) -> np.ndarray[Any, Any]:
    """Each doc_id's row in the corpus (-1: not there). Shards written in the corpus's
    own order (doc_id order) are recognised by one comparison instead of a hash lookup
    of every doc_id (10M: 0.07 s instead of 3.4 s)."""
    import numpy as np
    import pyarrow.compute as pc

    if len(doc_ids) == len(corpus_ids) and corpus_ids.equals(doc_ids):
        return np.arange(len(doc_ids), dtype=np.int64)
    found = pc.index_in(doc_ids, value_set=corpus_ids)
    return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)  # type: ignore[no-any-return]


def _locate(datasets: list[IndexedDataset], index: int) -> tuple[int, int]:
    for shard, dataset in enumerate(datasets):
        if index < dataset.sequences:
            return shard, index
        index -= dataset.sequences
    raise IndexError(index)


def _read_doc_map(path: Path) -> tuple[dict[str, Any], str]:
    """The doc_map's columns as numpy arrays (the two text columns as arrow arrays),
    and the file's hash; the file must not change while read."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lineage.ingest.input_rules import check_unchanged, hash_regular, stat_of

    if not path.exists():
        raise InputError(path, "no such file")
    before = stat_of(path)
    digest = "blake3:" + str(hash_regular(path, keep=False)[0])
    try:
        # ParquetFile, not read_table: that one imports pyarrow.dataset (and pandas), ~1.5 s
        table = pq.ParquetFile(path).read(columns=list(DOC_MAP_COLUMNS))
    except (pa.ArrowInvalid, OSError, KeyError) as exc:
        raise InputError(path, f"not a doc_map Parquet with columns "
                         f"{', '.join(DOC_MAP_COLUMNS)} ({str(exc).splitlines()[0]})") from exc
    check_unchanged(path, before)
    rows: dict[str, Any] = {}
    for name in DOC_MAP_COLUMNS:
        column = table.column(name)
        if column.null_count:
            raise InputError(path, f"column {name!r} has missing values")
        if name in _TEXT_COLUMNS:
            if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
                    or pa.types.is_dictionary(column.type)):
                raise InputError(path, f"column {name!r} holds {column.type}, expected string")
            text = column.combine_chunks()
            # a dictionary stays one: not a string per row (14.5M rows: ~0.4 GB less)
            rows[name] = text.cast(pa.dictionary(text.type.index_type, pa.string())
                                   if pa.types.is_dictionary(text.type) else pa.string())
        else:
            if not pa.types.is_integer(column.type):
                raise InputError(path, f"column {name!r} holds {column.type}, expected int64")
            rows[name] = np.asarray(column.to_numpy(), dtype=np.int64)  # no copy if int64
    return rows, digest


def _check_rules(rows: dict[str, Any], run: HarnessManifest, datasets: list[IndexedDataset],
                 doc_map: Path) -> None:
    """Each row on its own first: the layout checks index by the rows' documents."""
    problems = check_rows(rows, run, datasets) or check_layout(rows, run)
    if problems:
        raise InputError(doc_map, "; ".join(problems) + " (nothing stored)")


def _artifacts(run: HarnessManifest, datasets: list[IndexedDataset], doc_map_hash: str
               ) -> dict[str, str]:
    """The files that fix the order: the doc_map, the manifest, every .idx and doc_ids
    file. The .bin
    files hold the tokens, not the order: a sample of them is re-read instead."""
    found = {"doc_map": doc_map_hash, "manifest": run.digest}
    for shard, dataset in zip(run.shards, datasets, strict=True):
        found[f"{shard.shard}.idx"] = dataset.idx_hash
        if shard.doc_ids_hash is not None:
            found[f"{shard.shard}.doc_ids"] = shard.doc_ids_hash
    return found


def _segments(rows: dict[str, Any], rids: np.ndarray[Any, Any],
              doc_tokens: np.ndarray[Any, Any]) -> pa.Table:
    """The segment rows store_order takes, each with its document's corpus row (rid: no
    doc_id looked up again): end-of-document tokens the harness appended belong to no
    corpus document and are left out (a segment of them alone vanishes). `rows` is
    emptied on the way: each doc_map column goes once its segment column is made."""
    import numpy as np
    import pyarrow as pa

    glob = rows.pop("global_doc")
    start = rows.pop("token_start")
    end = np.minimum(rows.pop("token_end"), doc_tokens[glob])
    keep = end > start
    columns = {"rid": pa.array(rids[glob[keep]]), "doc_offset": pa.array(start[keep]),
               "n_tokens": pa.array((end - start)[keep])}
    del glob, start, end
    columns["window"] = pa.array(rows.pop("window")[keep])
    columns["slot"] = pa.array(rows.pop("slot")[keep])
    rows.clear()
    return pa.table(columns)
