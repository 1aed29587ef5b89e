"""Folders with links: a real documentation tree copied with its links, and Hugging Face
dataset cache snapshots laid out by huggingface_hub's own functions."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import blake3
import pytest
from huggingface_hub import scan_cache_dir

from lineage.api import Store
from lineage.errors import InputError
from lineage.ingest import ingest_corpus

from .conftest import Cli, write_jsonl
from .test_hf_cache import put_in_cache

SYSTEM_DOCS = Path("/usr/share/doc")


# --- a documentation tree, copied with its links -----------------------------------------


def _links_below(root: Path) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(root):  # never into a linked folder
        found += [Path(folder) / name for name in dirs + files
                  if (Path(folder) / name).is_symlink()]
    return sorted(found)


def _copy_with_targets(source_share: Path, share: Path, rel: str) -> None:
    """Copy /usr/share/<rel> (links as links), then whatever its links lead to in
    /usr/share, so that every link resolves in the copy as it does on the system."""
    pending = [rel]
    while pending:
        item = pending.pop()
        origin, copy = source_share / item, share / item
        if os.path.lexists(copy) or not os.path.lexists(origin):
            continue
        copy.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_symlink():
            os.symlink(os.readlink(origin), copy)
            links = [origin]
        elif origin.is_dir():
            shutil.copytree(origin, copy, symlinks=True)
            links = _links_below(origin)
        else:
            shutil.copy2(origin, copy)
            links = []
        for link in links:
            lexical = Path(os.path.normpath(link.parent / os.readlink(link)))
            if lexical.is_relative_to(source_share):
                pending.append(lexical.relative_to(source_share).as_posix())


@pytest.fixture(scope="module")
def doc_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packages of the system's documentation tree that hold links or are linked to,
    copied into share/doc with their links, and what those links reach in share/."""
    links = _links_below(SYSTEM_DOCS)
    packages = set()
    for link in links:
        packages.add(link.relative_to(SYSTEM_DOCS).parts[0])
        lexical = Path(os.path.normpath(link.parent / os.readlink(link)))
        if lexical.is_relative_to(SYSTEM_DOCS):
            packages.add(lexical.relative_to(SYSTEM_DOCS).parts[0])
    share = tmp_path_factory.mktemp("system") / "share"
    for package in sorted(packages):
        _copy_with_targets(SYSTEM_DOCS.parent, share, f"doc/{package}")
    tree = share / "doc"
    kinds = _link_kinds(tree)
    assert all(kinds.values()), f"{SYSTEM_DOCS} lacks a kind of link this test needs: {kinds}"
    return tree


def _link_kinds(tree: Path) -> dict[str, int]:
    kinds = {"folder inside": 0, "file inside": 0, "leaving": 0}
    for link in _links_below(tree):
        real = Path(os.path.realpath(link))
        if not real.is_relative_to(tree.resolve()):
            kinds["leaving"] += 1
        else:
            kinds["folder inside" if real.is_dir() else "file inside"] += 1
    return kinds


def _expected(tree: Path, *, follow: bool) -> dict[str, str]:
    """doc_id -> BLAKE3 of every non-empty, non-hidden file, by os.walk (links followed
    or not), independently of lineage's walk."""
    found = {}
    for folder, dirs, files in os.walk(tree, followlinks=follow):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            path = Path(folder) / name
            if name.startswith(".") or (path.is_symlink() and not follow):
                continue
            data = path.read_bytes()
            if data:
                found[path.relative_to(tree).as_posix()] = blake3.blake3(data).hexdigest()
    return found


def _stored(store: Store, corpus: str) -> dict[str, str]:
    rows = store.sql(f"SELECT doc_id, content_hash FROM documents WHERE corpus = '{corpus}'")
    return dict(rows.rows)


def test_a_documentation_tree_ingests_with_its_links_skipped_by_default(
        doc_tree: Path, store: Store) -> None:
    result = ingest_corpus(store, [doc_tree], corpus="docs", fingerprints=False)
    assert _stored(store, "docs") == _expected(doc_tree, follow=False)
    assert result.skipped_links == len(_links_below(doc_tree)) > 0
    assert result.followed_links == 0


def test_followed_links_are_documents_named_by_their_path_in_the_tree(
        doc_tree: Path, store: Store) -> None:
    result = ingest_corpus(store, [doc_tree], corpus="docs", links="follow",
                           fingerprints=False)
    expected = _expected(doc_tree, follow=True)
    assert _stored(store, "docs") == expected
    assert len(expected) > len(_expected(doc_tree, follow=False))
    assert result.skipped_links == 0 and result.followed_links >= len(_links_below(doc_tree))
    # A link leaving the tree is read as the file it leads to, named by its own path.
    leaving = next(link for link in _links_below(doc_tree) if link.is_file() and not
                   Path(os.path.realpath(link)).is_relative_to(doc_tree.resolve()))
    rel = leaving.relative_to(doc_tree).as_posix()
    assert expected[rel] == blake3.blake3(Path(os.path.realpath(leaving)).read_bytes()) \
        .hexdigest()


def test_refuse_stops_at_a_link_leaving_the_tree_and_nothing_is_written(
        doc_tree: Path, store: Store) -> None:
    result = Cli(store.root)("ingest", "corpus", str(doc_tree), "--corpus", "docs",
                             "--links", "refuse", code=2)
    assert "symlink-outside: a link to " in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert store.sql("SELECT count(*) FROM corpora").rows == [(0,)]


def test_the_command_line_says_what_was_skipped_and_followed(
        doc_tree: Path, store: Store) -> None:
    cli = Cli(store.root)
    links = len(_links_below(doc_tree))
    shown = cli("ingest", "corpus", str(doc_tree), "--corpus", "skip", "--no-fingerprints")
    assert f"; skipped {links:,} links (--links follow reads them)" in shown.stdout
    answer = cli.json("ingest", "corpus", str(doc_tree), "--corpus", "follow-json",
                      "--links", "follow", "--no-fingerprints")
    assert answer["skipped_links"] == 0 and answer["followed_links"] >= links
    shown = cli("ingest", "corpus", str(doc_tree), "--corpus", "follow", "--links", "follow",
                "--no-fingerprints")
    assert f"; followed {answer['followed_links']:,} links" in shown.stdout
    recorded = dict(store.sql("SELECT target, parameters FROM ingests").rows)
    assert '"links": "skip"' in recorded["skip"] and '"links": "follow"' in recorded["follow"]


def test_links_mode_is_checked(doc_tree: Path, store: Store) -> None:
    result = Cli(store.root)("ingest", "corpus", str(doc_tree), "--corpus", "d", "--links",
                             "maybe", code=2)
    assert "--links must be one of skip, follow, refuse, not 'maybe'" in result.stderr


# --- Hugging Face dataset snapshots --------------------------------------------------------


@pytest.fixture
def dataset_source(tmp_path: Path) -> Path:
    """A dataset repository's files: JSONL shards sent to LFS, a README kept in Git."""
    source = tmp_path / "repo"
    (source / "data").mkdir(parents=True)
    (source / ".gitattributes").write_text("*.jsonl filter=lfs diff=lfs merge=lfs -text\n")
    (source / "README.md").write_text("---\nlicense: mit\n---\n# A small set\n")
    write_jsonl(source / "data" / "train-00000-of-00002.jsonl",
                [{"text": f"first shard, record {i}"} for i in range(3)])
    write_jsonl(source / "data" / "train-00001-of-00002.jsonl",
                [{"id": f"doc-{i}", "text": f"second shard, record {i}"} for i in range(2)])
    write_jsonl(source / "data" / "test-00000-of-00001.jsonl", [{"text": "held out"}])
    return source


@pytest.fixture
def dataset_snapshot(dataset_source: Path, tmp_path: Path) -> Path:
    snapshot = put_in_cache(dataset_source, tmp_path / "hub", repo_id="org/small-set",
                            repo_type="dataset")
    (revision,) = next(iter(scan_cache_dir(tmp_path / "hub").repos)).revisions
    assert len(revision.files) == 5  # the hub library sees the snapshot it wrote
    assert all(os.readlink(f).startswith("../../") for f in (snapshot / "data").iterdir())
    return snapshot


@pytest.mark.parametrize("fmt", ["jsonl", "files"])
@pytest.mark.parametrize("links", ["skip", "follow", "refuse"])
def test_a_dataset_snapshot_ingests_as_the_files_it_links_to(
        dataset_source: Path, dataset_snapshot: Path, store: Store, fmt: str,
        links: str) -> None:
    """Shards named by their path in the snapshot, bytes from the blobs: the same manifest
    as the repository's own folder, in every --links mode."""
    source = ingest_corpus(store, [dataset_source], corpus="source", fmt=fmt, source="set")
    cached = ingest_corpus(store, [dataset_snapshot], corpus="cached", fmt=fmt, links=links,
                           source="set")
    assert cached.manifest_hash == source.manifest_hash
    assert _stored(store, "cached") == _stored(store, "source")
    assert (cached.skipped_links, cached.followed_links) == (0, 3 if fmt == "jsonl" else 4)
    ids = sorted(_stored(store, "cached"))
    if fmt == "jsonl":
        assert "data/train-00000-of-00002.jsonl#1" in ids and "doc-1" in ids
        origins = store.sql("SELECT DISTINCT origin FROM documents WHERE corpus = 'cached'")
        assert all("/blobs/" in origin for (origin,) in origins.rows)
    else:
        assert ids == ["README.md", "data/test-00000-of-00001.jsonl",
                       "data/train-00000-of-00002.jsonl", "data/train-00001-of-00002.jsonl"]


def test_a_snapshot_link_out_of_its_repository_meets_the_mode(
        dataset_snapshot: Path, store: Store, tmp_path: Path) -> None:
    """Only links into the repository's own blobs are the snapshot's files: a link
    elsewhere is skipped by default and refused with --links refuse."""
    stray = write_jsonl(tmp_path / "stray.jsonl", [{"text": "not from the hub"}])
    (dataset_snapshot / "data" / "extra.jsonl").symlink_to(stray)
    result = ingest_corpus(store, [dataset_snapshot], corpus="c", fmt="jsonl")
    assert (result.skipped_links, result.followed_links) == (1, 3)
    assert not any(d.startswith("data/extra") for d in _stored(store, "c"))
    with pytest.raises(InputError, match="extra.jsonl: symlink-outside: "):
        ingest_corpus(store, [dataset_snapshot], corpus="d", fmt="jsonl", links="refuse")


def test_a_snapshot_blob_that_is_missing_stops_the_ingest(
        dataset_snapshot: Path, store: Store) -> None:
    """Never skipped, whatever the mode: the snapshot would silently lack a shard."""
    shard = dataset_snapshot / "data" / "train-00001-of-00002.jsonl"
    (shard.parent / os.readlink(shard)).unlink()  # an interrupted download
    with pytest.raises(InputError, match="train-00001-of-00002.jsonl: unreadable: a link "
                                         "whose target does not exist"):
        ingest_corpus(store, [dataset_snapshot], corpus="c", fmt="jsonl")


def test_repair_rebuilds_a_followed_tree_with_its_links_followed(
        doc_tree: Path, store: Store) -> None:
    """The ingest records --links, so a lost part is rebuilt from the same files."""
    from lineage.ingest.repair import repair_store

    ingest_corpus(store, [doc_tree], corpus="docs", links="follow", fingerprints=False)
    before = _stored(store, "docs")
    for part in (store.root / "tables" / "documents").glob("docs-*.parquet"):
        part.unlink()
    report = repair_store(store)
    assert report.ok, report.to_dict()
    assert [a.action for a in report.actions].count("rebuilt") >= 1
    assert _stored(store, "docs") == before
