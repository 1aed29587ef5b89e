"""docs/manifest-spec.md's plain reference (tests/manifest_reference.py) against the code:
the manifest hash of random records, random folders as the ingest records them, the
spec's golden cases and the example corpus."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.corpora.manifest import ManifestHasher, manifest_hash_of_rows
from lineage.errors import InputError
from lineage.ingest import ingest_corpus

from . import manifest_reference as ref
from .conftest import Cli

SPEC_PAGE = Path(__file__).parents[1] / "docs" / "manifest-spec.md"

# The spec's golden cases and the hashes it states for them.
GOLDEN_RECORDS = [
    {"doc_id": "a", "source": "web", "n_bytes": 10, "n_tokens": 4,
     "content_hash": "0" * 64, "license": "MIT"},
    {"doc_id": "b", "source": "web", "n_bytes": 3, "n_tokens": 3,
     "content_hash": "a" * 64, "license": None},
]
GOLDEN_RECORDS_HASH = "blake3:6ba9bb5a154770b46e34d984a0cfd63adfc825c8238db29a548e40805fa70da0"
GOLDEN_FOLDER = {  # path -> bytes; None: a symbolic link to web/a.txt
    "notes.txt": b"top level\n",
    "web/a.txt": "héllo\n".encode(),
    "web/sub/b.txt": b"world\n",
    "web/empty.txt": b"",
    "web/.cache/c.txt": b"hidden folder\n",
    ".hidden.txt": b"hidden file\n",
    "code/main.py": b"print(1)\n",
    "link.txt": None,
}
GOLDEN_FOLDER_HASH = "blake3:6ea00fa06387d22be50333f882efb9406c9c48837d4b5b85a94306ac4db37c1c"


def make_folder(root: Path, files: dict[str, bytes | None]) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if data is None:
            os.symlink(root / "web" / "a.txt", path)
        else:
            path.write_bytes(data)
    return root


def _fresh_store(root: Path) -> Store:
    init_store(root)
    return open_store(root)


def _stored(store: Store, corpus: str) -> list[dict[str, Any]]:
    keys = ("doc_id", "source", "n_bytes", "n_tokens", "content_hash", "license")
    rows = store.sql(f"SELECT {', '.join(keys)} FROM documents WHERE corpus = '{corpus}' "
                     "ORDER BY doc_id").rows
    return [dict(zip(keys, row, strict=True)) for row in rows]


def test_the_golden_records_hash_as_the_spec_says() -> None:
    assert ref.manifest_hash(GOLDEN_RECORDS) == GOLDEN_RECORDS_HASH
    assert manifest_hash_of_rows(GOLDEN_RECORDS) == GOLDEN_RECORDS_HASH
    hasher = ManifestHasher()
    hasher.update(pa.Table.from_pylist(GOLDEN_RECORDS))
    assert hasher.manifest_hash() == GOLDEN_RECORDS_HASH
    assert GOLDEN_RECORDS_HASH in SPEC_PAGE.read_text(encoding="utf-8")


def test_the_golden_folder_becomes_the_records_and_hash_the_spec_gives(
        tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "corpus", GOLDEN_FOLDER)
    records, left_out = ref.folder_records(folder, licenses={"web": "CC-BY-4.0"})
    assert [(r["doc_id"], r["source"], r["license"]) for r in records] == [
        ("code/main.py", "code", None), ("notes.txt", "corpus", None),
        ("web/a.txt", "web", "CC-BY-4.0"), ("web/sub/b.txt", "web", "CC-BY-4.0")]
    assert left_out == {"hidden": 2, "links": 1, "followed": 0, "empty": 1}
    store = _fresh_store(tmp_path / "store")
    result = ingest_corpus(store, [folder], corpus="golden", license=["web=CC-BY-4.0"])
    assert _stored(store, "golden") == records
    assert (result.skipped_hidden, result.skipped_links, result.dropped_empty) == (2, 1, 1)
    assert result.manifest_hash == ref.manifest_hash(records) == GOLDEN_FOLDER_HASH
    assert GOLDEN_FOLDER_HASH in SPEC_PAGE.read_text(encoding="utf-8")


_name = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\"),
                min_size=1, max_size=8).filter(lambda n: n not in (".", ".."))


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.dictionaries(st.lists(_name, min_size=1, max_size=3).map("/".join),
                             st.binary(max_size=40), min_size=1, max_size=12),
       forced=st.none() | st.just("forced"))
def test_random_folders_are_recorded_as_the_spec_says(
        tmp_path_factory: pytest.TempPathFactory, fresh_store: Callable[[Path], Store],
        files: dict[str, bytes], forced: str | None) -> None:
    root = tmp_path_factory.mktemp("folder") / "top"
    try:
        make_folder(root, files)
    except (FileExistsError, NotADirectoryError, IsADirectoryError, OSError):
        return  # a name that is both a file and a folder: not a folder one can make
    records, left_out = ref.folder_records(root, source=forced)
    store = fresh_store(tmp_path_factory.mktemp("store") / "s")
    if not records:
        with pytest.raises(InputError, match="no documents to ingest"):
            ingest_corpus(store, [root], corpus="c", source=forced, workers=1)
        return
    result = ingest_corpus(store, [root], corpus="c", source=forced, workers=1)
    assert _stored(store, "c") == records
    assert result.manifest_hash == ref.manifest_hash(records)
    assert (result.skipped_hidden, result.dropped_empty) == (left_out["hidden"],
                                                             left_out["empty"])


_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)
_record = st.fixed_dictionaries({
    "doc_id": _text, "source": st.sampled_from(["web", "code", "ünïcode", "日本"]),
    "n_bytes": st.integers(1, 2**62), "n_tokens": st.integers(0, 2**62),
    "content_hash": st.binary(min_size=32, max_size=32).map(bytes.hex),
    "license": st.none() | st.sampled_from(["MIT", "CC-BY-4.0", "LicenseRef-Mine"]),
})


@settings(max_examples=200, deadline=None)
@given(st.lists(_record, min_size=1, max_size=30, unique_by=lambda r: r["doc_id"]))
def test_the_manifest_hash_of_random_records_follows_the_spec(records: list[dict]) -> None:
    expected = ref.manifest_hash(records)
    assert manifest_hash_of_rows(records) == expected
    ordered = sorted(records, key=lambda r: r["doc_id"].encode("utf-8"))
    hasher = ManifestHasher()
    hasher.update(pa.Table.from_pylist(ordered))
    assert hasher.manifest_hash() == expected


_stored_record = _record.map(lambda r: {**r, "n_bytes": max(r["n_bytes"] >> 22, 1),
                                          "n_tokens": r["n_tokens"] >> 22})  # sums fit BIGINT


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_stored_record, min_size=1, max_size=30, unique_by=lambda r: r["doc_id"]))
def test_a_ready_manifest_ingests_to_the_spec_hash(
        tmp_path_factory: pytest.TempPathFactory, fresh_store: Callable[[Path], Store],
        records: list[dict]) -> None:
    root = tmp_path_factory.mktemp("manifest")
    rows = [{**r, "uri": f"file:///{i}"} for i, r in enumerate(records)]
    pq.write_table(pa.Table.from_pylist(rows), root / "manifest.parquet")
    store = fresh_store(root / "store")
    result = ingest_corpus(store, [root / "manifest.parquet"], corpus="m", workers=1)
    assert result.manifest_hash == ref.manifest_hash(records)


def test_the_example_corpus_follows_the_spec(tmp_path: Path, example_corpus: Path) -> None:
    licenses = {"shakespeare": "LicenseRef-PublicDomain", "python-stdlib": "PSF-2.0",
                "debian-copyright": "NOASSERTION"}
    records, left_out = ref.folder_records(example_corpus, licenses=licenses)
    store = _fresh_store(tmp_path / "store")
    result = ingest_corpus(store, [example_corpus], corpus="example",
                           license=[f"{s}={lic}" for s, lic in licenses.items()])
    assert (len(records), left_out["empty"]) == (279, 3)
    assert _stored(store, "example") == records
    assert result.manifest_hash == ref.manifest_hash(records)
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    assert result.manifest_hash in readme


def test_a_fifo_in_a_corpus_folder_is_an_error_not_a_hang(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "corpus", {"web/a.txt": b"text\n"})
    os.mkfifo(folder / "web" / "pipe")
    with pytest.raises(ref.FolderError, match="not a regular file"):
        ref.folder_records(folder)
    store = _fresh_store(tmp_path / "store")
    result = Cli(store.root)("ingest", "corpus", str(folder), "--corpus", "c", code=2)
    assert re.fullmatch(r"error: .*/web/pipe: special-file: a FIFO, not a regular file or "
                        r"folder: reading it may never end \(move it out of the input\)\n",
                        result.stderr), result.stderr


_LINKS = {  # target -> what each --links mode makes of it: read, skipped, or a rule
    "inside": {"skip": "skipped", "follow": "read", "refuse": "skipped"},
    "outside": {"skip": "skipped", "follow": "read", "refuse": "symlink-outside"},
    "outside-folder": {"skip": "skipped", "follow": "read", "refuse": "symlink-outside"},
    "holding-folder": {"skip": "skipped", "follow": "symlink-loop", "refuse": "skipped"},
    "missing": dict.fromkeys(("skip", "follow", "refuse"), "unreadable"),
    "loop": dict.fromkeys(("skip", "follow", "refuse"), "symlink-loop"),
    "fifo": dict.fromkeys(("skip", "follow", "refuse"), "special-file"),
}


@pytest.mark.parametrize("mode", ["skip", "follow", "refuse"])
@pytest.mark.parametrize("target", sorted(_LINKS))
def test_each_links_mode_does_what_the_spec_says(tmp_path: Path, target: str, mode: str) -> None:
    folder = make_folder(tmp_path / "corpus", {"web/a.txt": b"text\n"})
    (tmp_path / "outside.txt").write_bytes(b"not in the corpus\n")
    make_folder(tmp_path / "elsewhere", {"deep/b.txt": b"elsewhere\n"})
    os.mkfifo(tmp_path / "pipe")
    link = folder / "web" / "link.txt"
    link.symlink_to({"inside": folder / "web" / "a.txt", "outside": tmp_path / "outside.txt",
                     "outside-folder": tmp_path / "elsewhere", "holding-folder": folder,
                     "missing": tmp_path / "gone", "loop": link, "fifo": tmp_path / "pipe",
                     }[target])
    store = _fresh_store(tmp_path / "store")
    expected = _LINKS[target][mode]
    if expected in ("read", "skipped"):
        records, left_out = ref.folder_records(folder, links=mode)
        result = ingest_corpus(store, [folder], corpus="c", links=mode)
        assert _stored(store, "c") == records
        assert result.manifest_hash == ref.manifest_hash(records)
        assert (result.skipped_links, result.followed_links) == \
            (left_out["links"], left_out["followed"]) == \
            ((0, 1) if expected == "read" else (1, 0))
        ids = [r["doc_id"] for r in records]
        assert ids == {"skipped": ["web/a.txt"], "read": sorted(
            ["web/a.txt", "web/link.txt" if target != "outside-folder"
             else "web/link.txt/deep/b.txt"])}[expected]
        return
    with pytest.raises(ref.FolderError, match=expected):
        ref.folder_records(folder, links=mode)
    with pytest.raises(InputError, match=f"link.txt: {expected}: "):
        ingest_corpus(store, [folder], corpus="c", links=mode)


_TARGETS = ("file", "folder", "outside", "outside-folder")


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.dictionaries(st.lists(_name, min_size=1, max_size=3).map("/".join),
                             st.binary(max_size=20), min_size=1, max_size=6),
       links=st.lists(st.tuples(_name, st.integers(0, 50), st.sampled_from(_TARGETS),
                                st.integers(0, 50)), min_size=1, max_size=3),
       holding=st.booleans(), mode=st.sampled_from(["skip", "follow", "refuse"]))
def test_random_folders_with_links_are_recorded_as_the_spec_says(
        tmp_path_factory: pytest.TempPathFactory, fresh_store: Callable[[Path], Store],
        files: dict[str, bytes], links: list[tuple[str, int, str, int]], holding: bool,
        mode: str) -> None:
    """Links to files and folders inside and outside (and with `holding`, one to a folder
    holding it), in every mode: the plain reference, listing folders in the file system's
    order, and the ingest agree on every record and count, or both refuse the folder."""
    base = tmp_path_factory.mktemp("links")
    root = base / "top"
    try:
        make_folder(root, files)
    except OSError:
        return  # a name that is both a file and a folder
    make_folder(base / "elsewhere", {"e.txt": b"elsewhere\n", "sub/f.txt": b"f\n"})
    folders = sorted({p for p in root.rglob("*") if p.is_dir()} | {root})
    regular = sorted(p for p in root.rglob("*") if p.is_file()) or [root / "none"]
    for name, where, kind, which in links:
        at = folders[where % len(folders)]
        apart = [f for f in folders if not at.is_relative_to(f)] or [base / "elsewhere"]
        target = {"file": regular[which % len(regular)], "folder": apart[which % len(apart)],
                  "outside": base / "elsewhere" / "e.txt",
                  "outside-folder": base / "elsewhere"}[kind]
        if not os.path.lexists(at / f"{name}-link"):
            (at / f"{name}-link").symlink_to(target)
    if holding:
        (folders[-1] / "holding-link").symlink_to(root)
    store = fresh_store(tmp_path_factory.mktemp("store") / "s")
    try:
        records, left_out = ref.folder_records(root, links=mode)
    except ref.FolderError:
        with pytest.raises(InputError):
            ingest_corpus(store, [root], corpus="c", links=mode, workers=1)
        return
    if not records:
        with pytest.raises(InputError, match="no documents to ingest"):
            ingest_corpus(store, [root], corpus="c", links=mode, workers=1)
        return
    result = ingest_corpus(store, [root], corpus="c", links=mode, workers=1)
    assert _stored(store, "c") == records
    assert result.manifest_hash == ref.manifest_hash(records)
    assert (result.skipped_hidden, result.skipped_links, result.followed_links,
            result.dropped_empty) == (left_out["hidden"], left_out["links"],
                                      left_out["followed"], left_out["empty"])


def test_names_that_are_not_utf8_stop_the_ingest_unless_skipped(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "corpus", {"web/a.txt": b"text\n"})
    hidden = os.path.join(os.fsencode(folder), b".hidden-\xff")
    with open(hidden, "wb") as handle:
        handle.write(b"skipped\n")
    records, left_out = ref.folder_records(folder)
    assert [r["doc_id"] for r in records] == ["web/a.txt"] and left_out["hidden"] == 1
    store = _fresh_store(tmp_path / "store")
    assert ingest_corpus(store, [folder], corpus="c").skipped_hidden == 1
    with open(os.path.join(os.fsencode(folder), b"web", b"caf\xe9.txt"), "wb") as handle:
        handle.write(b"latin-1 name\n")
    with pytest.raises(ref.FolderError, match="not valid UTF-8"):
        ref.folder_records(folder)
    with pytest.raises(InputError, match=r"caf.*\.txt: file name is not valid UTF-8"):
        ingest_corpus(store, [folder], corpus="d")


def test_folders_given_together_join_their_records(tmp_path: Path) -> None:
    first = make_folder(tmp_path / "one", {"web/a.txt": b"a\n"})
    second = make_folder(tmp_path / "two", {"code/b.py": b"b\n", "top.txt": b"t\n"})
    store = _fresh_store(tmp_path / "store")
    result = ingest_corpus(store, [first, second], corpus="both")
    records = ref.folder_records(first)[0] + ref.folder_records(second)[0]
    assert _stored(store, "both") == sorted(records, key=lambda r: r["doc_id"].encode())
    assert result.manifest_hash == ref.manifest_hash(records)
    clash = make_folder(tmp_path / "three", {"web/a.txt": b"other\n"})
    with pytest.raises(InputError, match="duplicate doc_id 'web/a.txt'"):
        ingest_corpus(store, [first, clash], corpus="clash")
