"""`lineage ingest corpus CROISSANT.json`: the Croissant file's distribution says where the
documents are, and the existing readers ingest them. A corpus exported with `lineage
export croissant` comes back into a new store with the same manifest hash (for the
demo's folder corpus, a JSONL shard corpus, and random manifests); Croissant files
written by hand (each loaded by mlcroissant first, so they are real Croissant) give the
same manifest as ingesting their files directly; whatever would need a download, an
archive or a format lineage does not read is refused, naming the entry, with nothing
written."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlcroissant as mlc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.exports.croissant import CONTEXT, croissant
from lineage.ingest import ingest_corpus

from .conftest import EXAMPLES, Cli, write_jsonl, write_parquet
from .test_croissant import DEMO_LICENSES, store_rows

pytestmark = [
    pytest.mark.filterwarnings("ignore:ConjunctiveGraph is deprecated:DeprecationWarning"),
]
SONNETS = EXAMPLES / "shards" / "sonnets.jsonl.gz"


def new_store(path: Path) -> Store:
    init_store(path)
    return open_store(path)


def manifest_hash(store: Store, corpus: str) -> str:
    return store.corpus(corpus).manifest_hash


def write_croissant(path: Path, distribution: list[dict[str, Any]],
                    caplog: pytest.LogCaptureFixture | None = None) -> Path:
    """A Croissant 1.1 file with this distribution; checked by mlcroissant when `caplog`
    is given (files that need a download are not loaded)."""
    document = {"@context": CONTEXT, "@type": "sc:Dataset",
                "conformsTo": "http://mlcommons.org/croissant/1.1", "name": "handmade",
                "description": "Written by a test.", "license": "https://spdx.org/licenses/MIT.html",
                "url": "https://example.org/handmade", "distribution": distribution}
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    if caplog is not None:
        with caplog.at_level(logging.WARNING):
            assert not mlc.Dataset(path).metadata.ctx.issues.errors
    return path


def file_object(name: str, url: str, fmt: str, data: bytes | None = None,
                **extra: Any) -> dict[str, Any]:
    entry = {"@type": "cr:FileObject", "@id": name, "name": name, "contentUrl": url,
             "encodingFormat": fmt, **extra}
    if data is not None:
        entry |= {"sha256": hashlib.sha256(data).hexdigest(), "contentSize": f"{len(data)} B"}
    return entry


def file_set(name: str, fmt: str, includes: list[str], **extra: Any) -> dict[str, Any]:
    return {"@type": "cr:FileSet", "@id": name, "name": name, "encodingFormat": fmt,
            "includes": includes, **extra}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = new_store(tmp_path_factory.mktemp("croissant-in") / "store")
    ingest_corpus(store, [EXAMPLES / "corpus"], corpus="example", license=DEMO_LICENSES,
                  fingerprints=False)
    ingest_corpus(store, [SONNETS], corpus="sonnets", license="CC0-1.0", fingerprints=False)
    return store


@pytest.mark.parametrize("corpus", ["example", "sonnets"])
def test_export_then_ingest_gives_the_same_manifest(demo: Store, corpus: str,
                                                     tmp_path: Path) -> None:
    exported = tmp_path / "dataset.json"
    Cli(demo.root)("export", "croissant", "--corpus", corpus, "-o", str(exported))
    target = new_store(tmp_path / "store")
    answer = Cli(target.root).json("ingest", "corpus", str(exported), "--corpus", corpus)
    assert answer["status"] == "added"
    assert answer["manifest_hash"] == manifest_hash(demo, corpus)
    assert answer["tokenizer"] == "manifest"  # the counts are the manifest's, not re-made
    assert store_rows(target, corpus) == store_rows(demo, corpus)


manifest_rows = st.lists(
    st.fixed_dictionaries({
        "doc_id": st.text(string.ascii_letters + "/-._é", min_size=1, max_size=12),
        "source": st.sampled_from(["web", "books", "code"]),
        "uri": st.one_of(st.none(), st.just("https://example.org/x")),
        "n_bytes": st.integers(1, 10**9), "n_tokens": st.integers(0, 10**9),
        "content_hash": st.text("0123456789abcdef", min_size=64, max_size=64),
        "license": st.one_of(st.none(), st.sampled_from(["MIT", "LicenseRef-X"]))}),
    min_size=1, max_size=20, unique_by=lambda r: r["doc_id"])


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=manifest_rows)
def test_round_trip_keeps_any_manifest(rows: list[dict[str, Any]],
                                       tmp_path_factory: pytest.TempPathFactory,
                                       fresh_store: Callable[[Path], Store]) -> None:
    root = tmp_path_factory.mktemp("trip")
    first = fresh_store(root / "first")
    write_jsonl(root / "manifest.jsonl", rows)
    ingest_corpus(first, [root / "manifest.jsonl"], corpus="c")
    (root / "c.json").write_text(json.dumps(croissant(first, "c")), encoding="utf-8")
    second = fresh_store(root / "second")
    ingest_corpus(second, [root / "c.json"], corpus="c")
    assert manifest_hash(second, "c") == manifest_hash(first, "c")
    assert store_rows(second, "c") == store_rows(first, "c")


def test_jsonl_file_object_is_the_shard(tmp_path: Path,
                                        caplog: pytest.LogCaptureFixture) -> None:
    shutil.copy(SONNETS, tmp_path / "sonnets.jsonl.gz")
    described = write_croissant(tmp_path / "metadata", [file_object(  # no suffix: by content
        "sonnets", "sonnets.jsonl.gz", "application/jsonlines", SONNETS.read_bytes())],
        caplog)
    direct, via = new_store(tmp_path / "a"), new_store(tmp_path / "b")
    ingest_corpus(direct, [SONNETS], corpus="s", license="CC0-1.0")
    ingest_corpus(via, [described], corpus="s", license="CC0-1.0")
    assert manifest_hash(via, "s") == manifest_hash(direct, "s")
    with via.reader() as con:
        inputs = json.loads(con.execute("SELECT inputs FROM ingests").fetchone()[0])
    assert inputs == [{"kind": "jsonl", "path": str((tmp_path / "sonnets.jsonl.gz").resolve()),
                       "bytes": SONNETS.stat().st_size, "croissant": str(described.resolve())}]


def test_file_set_of_shards_takes_includes_minus_excludes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    data.mkdir()
    texts = {f"d{i}": f"Document number {i}. " * (i + 1) for i in range(6)}
    ids = sorted(texts)
    write_parquet(data / "part-0.parquet", {"id": ids[:3], "text": [texts[i] for i in ids[:3]]})
    write_parquet(data / "part-1.parquet", {"id": ids[3:], "text": [texts[i] for i in ids[3:]]})
    write_parquet(data / "skip.parquet", {"id": ["x"], "text": ["excluded"]})
    (data / "deeper").mkdir()
    write_jsonl(data / "deeper" / "more.jsonl", [{"id": "j1", "text": "From JSON lines."}])
    described = write_croissant(tmp_path / "croissant.json", [
        file_set("parquet", "application/x-parquet", ["data/*.parquet"],
                 excludes=["data/skip.parquet"]),
        file_set("jsonl", "application/jsonlines", ["data/*.jsonl"])], caplog)  # * crosses /
    direct, via = new_store(tmp_path / "a"), new_store(tmp_path / "b")
    ingest_corpus(direct, [data / "part-0.parquet", data / "part-1.parquet",
                           data / "deeper" / "more.jsonl"], corpus="c")
    ingest_corpus(via, [described], corpus="c")
    assert manifest_hash(via, "c") == manifest_hash(direct, "c")
    with via.reader() as con:
        got = [r[0] for r in con.execute("SELECT doc_id FROM documents ORDER BY doc_id").fetchall()]
    assert got == [*ids, "j1"]


def make_folder(root: Path) -> Path:
    """docs/manifest-spec.md's golden folder, without its link."""
    for name, text in {"notes.txt": "top level\n", "web/a.txt": "héllo\n",
                       "web/sub/b.txt": "world\n", "web/empty.txt": "",
                       "web/.cache/c.txt": "hidden folder\n", ".hidden.txt": "hidden file\n",
                       "code/main.py": "print(1)\n"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_text_file_set_is_a_folder_of_documents(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    folder = make_folder(tmp_path / "corpus")
    everything = write_croissant(tmp_path / "all.json", [
        file_set("texts", "text/plain", ["corpus/*"])], caplog)
    via = new_store(tmp_path / "via")
    ingest_corpus(via, [everything], corpus="c", license="web=CC-BY-4.0")
    # docs/manifest-spec.md's golden hash for this folder, ingested as a folder
    assert manifest_hash(via, "c") == ("blake3:6ea00fa06387d22be50333f882efb9406c9c48837d4b"
                                       "5b85a94306ac4db37c1c")
    only_text = write_croissant(tmp_path / "text.json", [
        file_set("texts", "text/plain", ["corpus/*.txt"], excludes=["corpus/web/sub/*"])],
        caplog)
    ingest_corpus(via, [only_text], corpus="t")
    with via.reader() as con:
        got = con.execute("SELECT doc_id, source FROM documents WHERE corpus = 't' "
                          "ORDER BY doc_id").fetchall()
    assert got == [("notes.txt", "corpus"), ("web/a.txt", "web")]  # not main.py, not sub/
    with via.reader() as con:
        inputs = json.loads(con.execute("SELECT inputs FROM ingests WHERE target = 't'")
                            .fetchone()[0])
    assert inputs == [{"kind": "files", "path": str(folder.resolve()), "includes": ["*.txt"],
                       "excludes": ["web/sub/*"], "croissant": str(only_text.resolve())}]


def test_text_file_object_is_one_document(tmp_path: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    make_folder(tmp_path / "corpus")
    data = (tmp_path / "corpus" / "web" / "a.txt").read_bytes()
    described = write_croissant(tmp_path / "one.json", [
        file_object("a", "corpus/web/a.txt", "text/plain", data)], caplog)
    store = new_store(tmp_path / "store")
    ingest_corpus(store, [described], corpus="one")
    with store.reader() as con:
        rows = con.execute("SELECT doc_id, source, n_bytes FROM documents").fetchall()
    assert rows == [("a.txt", "web", len(data))]


def test_generated_doc_ids_name_the_shard_as_the_croissant_file_does(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    data = write_jsonl(tmp_path / "sub" / "x.jsonl", [{"text": "hello there"}]).read_bytes()
    outside = write_jsonl(tmp_path.parent / f"{tmp_path.name}-y.jsonl", [{"text": "hi"}])
    described = write_croissant(tmp_path / "d.json", [
        file_object("x", "sub/x.jsonl", "application/jsonlines", data),
        file_object("y", str(outside), "application/jsonlines", outside.read_bytes())])
    store = new_store(tmp_path / "store")
    ingest_corpus(store, [described], corpus="c")
    with store.reader() as con:
        got = [r[0] for r in con.execute("SELECT doc_id FROM documents ORDER BY 1").fetchall()]
    assert got == sorted([f"{outside.name}#1", "sub/x.jsonl#1"])


def test_absolute_paths_and_file_uris_are_local(tmp_path: Path) -> None:
    shutil.copy(SONNETS, tmp_path / "s.jsonl.gz")
    for url in (str(tmp_path / "s.jsonl.gz"), (tmp_path / "s.jsonl.gz").as_uri()):
        described = write_croissant(tmp_path / "d.json", [
            file_object("s", url, "application/jsonlines", SONNETS.read_bytes())])
        store = new_store(tmp_path / f"store-{len(url)}")
        assert Cli(store.root).json("ingest", "corpus", str(described),
                                    "--corpus", "s")["documents"] == 154


def refused(tmp_path: Path, distribution: list[dict[str, Any]], name: str = "bad") -> str:
    """Ingest a Croissant file that must be refused: exit 2, one line, nothing written."""
    described = write_croissant(tmp_path / f"{name}.json", distribution)
    store = new_store(tmp_path / f"store-{name}")
    result = Cli(store.root)("ingest", "corpus", str(described), "--corpus", "c", code=2)
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert store.corpora() == []
    return result.stderr.strip()


def test_a_url_is_never_fetched(tmp_path: Path) -> None:
    message = refused(tmp_path, [file_object(
        "remote", "https://example.org/data.jsonl", "application/jsonlines",
        sha256="0" * 64)])
    assert message == (f"error: {tmp_path / 'bad.json'}: croissant-remote: distribution "
                       "remote: https://example.org/data.jsonl would need a download, and "
                       "lineage never fetches: download it and give its local path as the "
                       "contentUrl")


def test_a_hugging_face_repository_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, [
        file_object("repo", "https://huggingface.co/datasets/x/y/tree/refs%2Fconvert%2Fparquet",
                    "git+https", sha256="https://github.com/mlcommons/croissant/issues/80"),
        file_set("parquet-files", "application/x-parquet", ["default/*/*.parquet"],
                 containedIn={"@id": "repo"})])
    assert "croissant-remote: distribution repo is an archive or repository" in message


@pytest.mark.parametrize(("entry", "rule"), [
    (file_object("z", "data.zip", "application/zip", b"PK"), "croissant-remote"),
    (file_object("t", "table.csv", "text/csv", b"a,b\n"), "croissant-format"),
    (file_set("inner", "text/plain", ["*.txt"], containedIn={"@id": "z"}), "croissant-remote"),
])
def test_archives_and_other_formats_are_refused(tmp_path: Path, entry: dict[str, Any],
                                                rule: str) -> None:
    (tmp_path / "data.zip").write_bytes(b"PK")
    (tmp_path / "table.csv").write_bytes(b"a,b\n")
    assert f": {rule}: distribution " in refused(tmp_path, [entry])


def test_checksum_and_size_are_checked(tmp_path: Path) -> None:
    shutil.copy(SONNETS, tmp_path / "s.jsonl.gz")
    good = file_object("s", "s.jsonl.gz", "application/jsonlines", SONNETS.read_bytes())
    wrong_sha = {**good, "sha256": hashlib.sha256(b"other").hexdigest()}
    message = refused(tmp_path, [wrong_sha])
    assert message.startswith(f"error: {tmp_path / 's.jsonl.gz'}: croissant-checksum: "
                              f"distribution s states sha256 {wrong_sha['sha256']}, the "
                              f"file's is {good['sha256']}")
    wrong_size = {**good, "contentSize": "12 B"}
    assert "croissant-checksum: distribution s states 12 bytes, the file has" in \
        refused(tmp_path, [wrong_size], "size")


def test_md5_is_checked_and_other_schemes_are_never_fetched(tmp_path: Path) -> None:
    shutil.copy(SONNETS, tmp_path / "s.jsonl.gz")
    entry = file_object("s", "s.jsonl.gz", "application/x-ndjson", md5="0" * 32)
    assert f"croissant-checksum: distribution s states md5 {'0' * 32}, the file's is " \
        f"{hashlib.md5(SONNETS.read_bytes()).hexdigest()}" in refused(tmp_path, [entry])
    for url in ("s3://bucket/s.jsonl.gz", "file://otherhost/s.jsonl.gz"):
        remote = file_object("s", url, "application/jsonlines", sha256="0" * 64)
        assert "croissant-remote: distribution s: " in refused(tmp_path, [remote], url[:2])
    good = {**entry, "md5": hashlib.md5(SONNETS.read_bytes()).hexdigest()}
    store = new_store(tmp_path / "store")
    ingest_corpus(store, [write_croissant(tmp_path / "good.json", [good])], corpus="s")
    assert store.corpus("s").documents == 154


def test_missing_file_and_empty_distribution(tmp_path: Path) -> None:
    message = refused(tmp_path, [file_object("gone", "gone.jsonl", "application/jsonlines",
                                             sha256="0" * 64)])
    assert message == (f"error: {tmp_path / 'gone.jsonl'}: no such file (named by "
                       f"distribution gone of {tmp_path / 'bad.json'})")
    assert refused(tmp_path, [], "empty").endswith(
        "croissant-distribution: no distribution: nothing says where the documents are")
    assert "croissant-distribution: distribution none: no file matches ['*.parquet']" in \
        refused(tmp_path, [file_set("none", "application/x-parquet", ["*.parquet"])], "none")


def test_a_fifo_or_folder_named_as_a_file_is_refused(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "pipe.jsonl")
    (tmp_path / "folder").mkdir()
    pipe = refused(tmp_path, [file_object("p", "pipe.jsonl", "application/jsonlines",
                                          sha256="0" * 64)], "pipe")
    assert pipe.startswith(f"error: {tmp_path / 'pipe.jsonl'}: special-file: ")
    folder = refused(tmp_path, [file_object("f", "folder", "application/jsonlines",
                                            sha256="0" * 64)], "folder")
    assert folder == (f"error: {tmp_path / 'folder'}: croissant-distribution: distribution "
                      "f names a folder: describe its files with a FileSet")


def test_json_nested_too_deep_is_refused(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "deep.json").write_text('{"@context": {}, "conformsTo": '
                                        f'"http://mlcommons.org/croissant/1.1", "x": {deep}}}')
    store = new_store(tmp_path / "store")
    result = Cli(store.root)("ingest", "corpus", str(tmp_path / "deep.json"), "--corpus", "c",
                             code=2)
    assert result.stderr == (f"error: {tmp_path / 'deep.json'}: nesting-depth: JSON nested "
                             "too deep to parse\n")


def test_a_big_file_is_not_taken_for_a_croissant_file(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import lineage.ingest.readers.croissant as reader

    shutil.copy(SONNETS, tmp_path / "s.jsonl.gz")
    described = write_croissant(tmp_path / "d.json", [file_object(
        "s", "s.jsonl.gz", "application/jsonlines", SONNETS.read_bytes())])
    assert reader.looks_like_croissant(described)
    monkeypatch.setattr(reader, "MAX_CROISSANT_BYTES", described.stat().st_size - 1)
    assert not reader.looks_like_croissant(described)


def test_a_json_file_that_is_not_croissant_is_not_taken_for_one(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text(json.dumps({"@context": "https://schema.org/",
                                                     "@type": "Dataset"}), encoding="utf-8")
    store = new_store(tmp_path / "store")
    result = Cli(store.root)("ingest", "corpus", str(tmp_path / "other.json"), "--corpus", "c",
                             code=2)
    assert "unknown shard type" in result.stderr

