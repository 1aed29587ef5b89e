"""`lineage export croissant` on real stores: the demo's corpus of examples/corpus (three
sources, three licences) and the sonnets shard (no uri, one licence). Every export is
loaded by the real validator, mlcroissant, with no errors; its records, read through
mlcroissant from the files the distribution names, are the store's documents; the
distribution's sizes and SHA-256 are the files'; the same store gives the same bytes;
and docs/exports.md's example is the demo corpus's export."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import mlcroissant as mlc
import pytest

from lineage.api import Store, init_store, open_store
from lineage.exports.croissant import CONTEXT, CROISSANT_SPEC, croissant, license_value
from lineage.ingest import ingest_corpus

from .conftest import EXAMPLES, REPO, Cli, write_jsonl

# mlcroissant's use of rdflib and pandas draws their deprecation warnings; none is lineage's.
pytestmark = [
    pytest.mark.filterwarnings("ignore:ConjunctiveGraph is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:The inplace keyword:pandas.errors.Pandas4Warning"),
]
DEMO_LICENSES = ["shakespeare=LicenseRef-PublicDomain", "python-stdlib=PSF-2.0",
                 "debian-copyright=NOASSERTION"]  # as examples/demo.sh ingests them
# What the store does not record, and mlcroissant recommends: left out, never made up.
RECOMMENDED_ABSENT = {"citeAs", "datePublished", "version"}
DOCUMENT_COLUMNS = ("doc_id", "source", "uri", "n_bytes", "n_tokens", "content_hash",
                    "license")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root = tmp_path_factory.mktemp("croissant")
    init_store(root / "store")
    store = open_store(root / "store")
    ingest_corpus(store, [EXAMPLES / "corpus"], corpus="example", license=DEMO_LICENSES,
                  fingerprints=False)
    ingest_corpus(store, [EXAMPLES / "shards" / "sonnets.jsonl.gz"], corpus="sonnets",
                  license="CC0-1.0", fingerprints=False)
    return store


def export_to(store: Store, corpus: str, path: Path) -> dict[str, Any]:
    document = croissant(store, corpus)
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return document


def load(path: Path, caplog: pytest.LogCaptureFixture) -> mlc.Dataset:
    """mlcroissant's Dataset; its validation errors raise, its warnings are returned."""
    with caplog.at_level(logging.WARNING):
        return mlc.Dataset(path)


def warned_properties(dataset: mlc.Dataset) -> set[str]:
    issues = dataset.metadata.ctx.issues
    assert not issues.errors
    return {w.split('Property "', 1)[1].split('"', 1)[0].rsplit("/", 1)[-1]
            for w in issues.warnings}


def store_rows(store: Store, corpus: str) -> list[tuple[Any, ...]]:
    with store.reader() as con:
        return con.execute(f"SELECT {', '.join(DOCUMENT_COLUMNS)} FROM documents "
                           "WHERE corpus = ? ORDER BY doc_id", [corpus]).fetchall()


def croissant_rows(dataset: mlc.Dataset, record_set: str) -> list[tuple[Any, ...]]:
    def value(v: Any) -> Any:
        return v.decode("utf-8") if isinstance(v, bytes) else v

    return [tuple(value(r[f"{record_set}/{c}"]) for c in DOCUMENT_COLUMNS)
            for r in dataset.records(record_set)]


@pytest.mark.parametrize("corpus", ["example", "sonnets"])
def test_mlcroissant_loads_it_and_reads_the_stores_documents(
        demo: Store, corpus: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    export_to(demo, corpus, tmp_path / "croissant.json")
    dataset = load(tmp_path / "croissant.json", caplog)
    assert warned_properties(dataset) == RECOMMENDED_ABSENT
    assert dataset.metadata.name == corpus
    assert croissant_rows(dataset, "documents") == store_rows(demo, corpus)


def test_sources_record_set_is_the_corpus_sources(
        demo: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    export_to(demo, "example", tmp_path / "croissant.json")
    records = list(load(tmp_path / "croissant.json", caplog).records("sources"))
    with demo.reader() as con:
        expected = con.execute("SELECT source, documents, tokens, bytes, licenses FROM "
                               "corpus_sources WHERE corpus = 'example' ORDER BY source"
                               ).fetchall()
    got = [(r["sources/source"], r["sources/documents"], r["sources/tokens"],
            r["sources/bytes"], r["sources/licenses"]) for r in records]
    assert sorted(got) == [(s, d, t, b, list(lic)) for s, d, t, b, lic in expected]


def test_distribution_states_each_parts_size_and_sha256(demo: Store) -> None:
    document = croissant(demo, "example")
    files = document["distribution"]
    with demo.reader() as con:
        registered = con.execute("SELECT count(*) FROM parquet_files WHERE owner = 'example'"
                                 " AND table_name = 'documents'").fetchone()[0]
    assert len(files) == registered >= 1
    for item in files:
        data = Path(item["contentUrl"]).read_bytes()
        assert Path(item["contentUrl"]).is_relative_to(demo.root.resolve())
        assert item["sha256"] == hashlib.sha256(data).hexdigest()
        assert item["contentSize"] == f"{len(data)} B"
        assert item["encodingFormat"] == "application/x-parquet"


def test_manifest_hash_licences_and_conformance(demo: Store) -> None:
    document = croissant(demo, "example")
    corpus = demo.corpus("example")
    assert document["@context"] == CONTEXT
    assert document["conformsTo"] == CROISSANT_SPEC == "http://mlcommons.org/croissant/1.1"
    assert document["identifier"] == {"@type": "sc:PropertyValue",
                                      "propertyID": "lineage-manifest/1",
                                      "value": corpus.manifest_hash}
    assert corpus.manifest_hash in document["description"]
    assert document["license"] == [
        {"@type": "sc:CreativeWork", "name": "LicenseRef-PublicDomain"},
        {"@type": "sc:CreativeWork", "name": "NOASSERTION"},
        "https://spdx.org/licenses/PSF-2.0.html"]
    assert croissant(demo, "sonnets")["license"] == ["https://spdx.org/licenses/CC0-1.0.html"]


@pytest.mark.parametrize(("name", "value"), [
    ("MIT", "https://spdx.org/licenses/MIT.html"),
    ("CC-BY-4.0", "https://spdx.org/licenses/CC-BY-4.0.html"),
    ("LicenseRef-Mine", {"@type": "sc:CreativeWork", "name": "LicenseRef-Mine"}),
    ("MIT OR Apache-2.0", {"@type": "sc:CreativeWork", "name": "MIT OR Apache-2.0"}),
    ("NONE", {"@type": "sc:CreativeWork", "name": "NONE"})])
def test_license_value(name: str, value: Any) -> None:
    assert license_value(name) == value


def test_corpus_without_licences_states_none(tmp_path: Path, example_shards: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    init_store(tmp_path / "store")
    store = open_store(tmp_path / "store")
    ingest_corpus(store, [example_shards / "poems.parquet"], corpus="poems",
                  fingerprints=False)
    document = export_to(store, "poems", tmp_path / "croissant.json")
    assert "license" not in document
    assert warned_properties(load(tmp_path / "croissant.json", caplog)) == \
        RECOMMENDED_ABSENT | {"license"}


def test_a_corpus_of_several_parts_has_a_record_set_per_part(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    import lineage.store.parts as parts

    monkeypatch.setattr(parts, "PART_ROWS", 100)  # 279 documents: three parts
    monkeypatch.setattr(parts, "ROW_GROUP_ROWS", 50)
    init_store(tmp_path / "store")
    store = open_store(tmp_path / "store")
    ingest_corpus(store, [EXAMPLES / "corpus"], corpus="example", fingerprints=False)
    document = export_to(store, "example", tmp_path / "croissant.json")
    dataset = load(tmp_path / "croissant.json", caplog)
    names = [r["@id"] for r in document["recordSet"]]
    assert names == ["documents-0", "documents-1", "documents-2", "sources"]
    assert len(document["distribution"]) == 3
    rows = [row for name in names[:-1] for row in croissant_rows(dataset, name)]
    assert rows == store_rows(store, "example")


def test_cli_prints_and_writes_the_same_bytes_every_time(demo: Store, tmp_path: Path) -> None:
    cli = Cli(demo.root)
    printed = cli("export", "croissant", "--corpus", "example").stdout
    cli("export", "croissant", "--corpus", "example", "-o", str(tmp_path / "a.json"))
    written = cli("export", "croissant", "--corpus", "example", "-o", str(tmp_path / "b.json"),
                  "--json")
    assert (tmp_path / "a.json").read_text() == printed == (tmp_path / "b.json").read_text()
    assert written.stdout == printed
    assert json.loads(printed) == croissant(demo, "example")


def test_cli_unknown_corpus_is_an_error(demo: Store) -> None:
    result = Cli(demo.root)("export", "croissant", "--corpus", "nope", code=2)
    assert result.stdout == ""
    assert result.stderr.strip() == \
        "error: no corpus named 'nope' (known: example, sonnets)"


def test_docs_example_is_the_demo_corpus(demo: Store) -> None:
    """The page shows the demo corpus's export with the store's path and the part's
    SHA-256 (which depend on where the repository is checked out) as placeholders."""
    page = (REPO / "docs" / "exports.md").read_text(encoding="utf-8")
    section = page.split("\n## Croissant\n", 1)[1]
    example = section.split("\n```json\n", 1)[1].split("```\n", 1)[0]
    document = croissant(demo, "example")
    for item in document["distribution"]:
        item["contentUrl"] = item["contentUrl"].replace(str(demo.root.resolve()), "STORE")
        item["sha256"] = "SHA256_OF_THE_PART"
        item["contentSize"] = "SIZE_OF_THE_PART B"
    assert json.loads(example) == document


def test_a_source_with_several_licences_lists_each(tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    init_store(tmp_path / "store")
    store = open_store(tmp_path / "store")
    rows = [{"doc_id": f"d{i}", "source": "code", "uri": None, "n_bytes": 10, "n_tokens": 3,
             "content_hash": f"{i:064x}", "license": lic}
            for i, lic in enumerate(["MIT OR Apache-2.0", "MIT", "MIT", None])]
    write_jsonl(tmp_path / "manifest.jsonl", rows)
    ingest_corpus(store, [tmp_path / "manifest.jsonl"], corpus="code")
    document = export_to(store, "code", tmp_path / "croissant.json")
    assert document["license"] == ["https://spdx.org/licenses/MIT.html",
                                   {"@type": "sc:CreativeWork", "name": "MIT OR Apache-2.0"}]
    records = list(load(tmp_path / "croissant.json", caplog).records("sources"))
    assert [r["sources/licenses"] for r in records] == [["MIT", "MIT OR Apache-2.0"]]
