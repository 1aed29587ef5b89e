"""Map tasks that an executor other than the local one runs (ingest/engine.py).

The local ingest stages a folder's files in one thread pool and loads ready manifests
inside the reduce's own DuckDB session; on a cluster both become independent calls, each
writing one staged part that the reduce reads like a text shard's:

* `stage_files`: one chunk of a folder's sorted listing, hashed by `stage_directory`;
* `stage_manifest`: one ready manifest loaded by `load_manifests` into a DuckDB session
  of its own, its rows staged as they would enter the reduce's table.

Rows are sorted in the reduce, so how the work was cut changes no byte of the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lineage.corpora.token_count import TokenizerSpec
from lineage.ingest.corpus_reduce import STAGED_TABLE, memory_limit
from lineage.ingest.inputs import ShardInput
from lineage.ingest.readers.directory import DirectoryListing, FileEntry, stage_directory
from lineage.ingest.readers.manifests import load_manifests
from lineage.ingest.staging import ShardSummary
from lineage.store.base import sql_text

FILES_PER_TASK = 4096  # a task hashes this many files of a folder


@dataclass(frozen=True)
class FilesTask:
    root: str
    files: tuple[FileEntry, ...]
    part: str
    tokenizer: TokenizerSpec
    fingerprints: bool


def files_tasks(root: Path, files: list[FileEntry], staging: Path, first: int, *,
                tokenizer: TokenizerSpec, fingerprints: bool) -> list[FilesTask]:
    """A folder's listing cut into tasks; their parts are numbered from `first`."""
    return [FilesTask(str(root), tuple(files[start:start + FILES_PER_TASK]),
                      str(staging / f"dir-{first + n:05d}.parquet"), tokenizer, fingerprints)
            for n, start in enumerate(range(0, len(files), FILES_PER_TASK))]


def stage_files(task: FilesTask) -> ShardSummary:
    """Hash one chunk of a folder's files into its staged part (one thread: the cluster
    runs a task per core)."""
    listing = DirectoryListing(list(task.files))
    return stage_directory(Path(task.root), listing, Path(task.part).parent,
                           tokenizer=task.tokenizer, workers=1,
                           fingerprints=task.fingerprints, part=Path(task.part))


@dataclass(frozen=True)
class ManifestTask:
    shard: ShardInput
    part: str


def manifest_tasks(manifests: list[ShardInput], staging: Path) -> list[ManifestTask]:
    """JSONL manifests first, then Parquet ones, as `load_manifests` reads them: the
    first bad file named is the one the local engine names."""
    ordered = ([m for m in manifests if m.kind == "manifest-jsonl"]
               + [m for m in manifests if m.kind != "manifest-jsonl"])
    return [ManifestTask(shard, str(staging / f"manifest-{n:05d}.parquet"))
            for n, shard in enumerate(ordered)]


def stage_manifest(task: ManifestTask) -> ShardSummary:
    """Load and stage one ready manifest's rows (checked in the reduce, with the rest)."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        con.execute("SET preserve_insertion_order = true")
        con.execute("SET memory_limit = ?", [memory_limit()])
        con.execute("SET temp_directory = ?", [f"{task.part}.spill"])
        con.execute(STAGED_TABLE)
        load_manifests(con, [task.shard], table="docs")
        rows = int(con.execute("SELECT count(*) FROM docs").fetchall()[0][0])
        con.execute(f"COPY docs TO {sql_text(task.part)} (FORMAT parquet)")
    finally:
        con.close()
    return ShardSummary(task.part, rows, 0)
