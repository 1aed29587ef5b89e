"""Directory ingest on real text: the example corpus and a slice of the standard library."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import blake3
import pytest

from lineage.api import Store
from lineage.errors import InputError, UsageError
from lineage.ingest import ingest_corpus


def _files(root: Path) -> list[Path]:
    return sorted(
        p for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def test_example_corpus_is_recorded_file_by_file(store: Store, example_corpus: Path) -> None:
    result = ingest_corpus(store, [example_corpus], corpus="example", license="NOASSERTION")
    files = _files(example_corpus)
    non_empty = [p for p in files if p.stat().st_size > 0]
    assert result.status == "added"
    assert result.documents == len(non_empty)
    assert result.dropped_empty == len(files) - len(non_empty) > 0
    assert result.bytes == result.tokens == sum(p.stat().st_size for p in non_empty)
    assert {s["source"] for s in result.sources} == {
        p.name for p in example_corpus.iterdir() if p.is_dir()
    }
    rows = store.sql("SELECT doc_id, source, content_hash, n_bytes FROM documents").rows
    by_id = {doc_id: (source, digest, size) for doc_id, source, digest, size in rows}
    for path in non_empty:
        rel = path.relative_to(example_corpus).as_posix()
        source, digest, size = by_id[rel]
        assert source == rel.split("/")[0]
        assert digest == blake3.blake3(path.read_bytes()).hexdigest()
        assert size == path.stat().st_size


def test_reingest_is_a_no_op_that_says_so(store: Store, example_corpus: Path) -> None:
    first = ingest_corpus(store, [example_corpus], corpus="example")
    before = store.sql("SELECT path, sha256 FROM parquet_files ORDER BY path").rows
    again = ingest_corpus(store, [example_corpus], corpus="example", workers=1)
    assert again.status == "unchanged"
    assert again.manifest_hash == first.manifest_hash
    assert store.sql("SELECT path, sha256 FROM parquet_files ORDER BY path").rows == before
    assert store.sql("SELECT count(*) FROM ingests").rows == [(1,)]


def test_other_content_under_a_taken_name_is_refused(store: Store, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.txt").write_text("one")
    ingest_corpus(store, [tmp_path / "a"], corpus="c")
    (tmp_path / "a" / "one.txt").write_text("changed")
    with pytest.raises(Exception, match="already holds other content"):
        ingest_corpus(store, [tmp_path / "a"], corpus="c")


def test_sources_come_from_subfolders_or_the_forced_name(store: Store, tmp_path: Path) -> None:
    root = tmp_path / "mycorpus"
    (root / "news").mkdir(parents=True)
    (root / "news" / "deep").mkdir()
    (root / "news" / "deep" / "a.txt").write_text("alpha")
    (root / "top.txt").write_text("top level")
    (root / ".hidden").write_text("skipped")
    (root / "link.txt").symlink_to(root / "top.txt")
    result = ingest_corpus(store, [root], corpus="c")
    rows = dict(store.sql("SELECT doc_id, source FROM documents").rows)
    assert rows == {"news/deep/a.txt": "news", "top.txt": "mycorpus"}
    assert (result.skipped_hidden, result.skipped_links) == (1, 1)
    forced = ingest_corpus(store, [root], corpus="c2", source="web")
    assert [s["source"] for s in forced.sources] == ["web"]


def test_non_utf8_file_is_a_document_for_bytes_but_named_for_a_tokenizer(
    store: Store, tmp_path: Path, tokenizer_json: Path
) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "latin1.txt").write_bytes("café crème".encode("latin-1"))
    (root / "ok.txt").write_text("plain words here")
    assert ingest_corpus(store, [root], corpus="bytes").documents == 2
    with pytest.raises(InputError, match=r"latin1\.txt: not valid UTF-8 at byte 3"):
        ingest_corpus(store, [root], corpus="tok", tokenizer=str(tokenizer_json))


def test_real_tokenizer_counts_tokens_and_is_recorded_by_hash(
    store: Store, tmp_path: Path, tokenizer_json: Path
) -> None:
    import tokenizers

    root = tmp_path / "corpus"
    root.mkdir()
    text = "Shall I compare thee to a summer's day?"
    (root / "s18.txt").write_text(text)
    result = ingest_corpus(store, [root], corpus="c", tokenizer=str(tokenizer_json))
    expected = len(tokenizers.Tokenizer.from_file(str(tokenizer_json))
                   .encode(text, add_special_tokens=False).ids)
    assert result.tokens == expected != len(text)
    assert result.tokenizer == (
        "tokenizer.json:blake3:" + blake3.blake3(tokenizer_json.read_bytes()).hexdigest()
    )


def test_stdlib_sources_ingest_with_ranges_not_exact_counts(store: Store) -> None:
    root = Path(sysconfig.get_paths()["stdlib"]) / "json"
    result = ingest_corpus(store, [root], corpus="stdlib-json", license="PSF-2.0")
    assert 4 <= result.documents <= 40
    assert {s["source"] for s in result.sources} >= {"json"}
    assert store.corpus("stdlib-json")["licenses"] == ["PSF-2.0"]


def test_parallel_and_serial_hashing_agree(store: Store, example_corpus: Path) -> None:
    serial = ingest_corpus(store, [example_corpus], corpus="serial", workers=1)
    parallel = ingest_corpus(store, [example_corpus], corpus="parallel", workers=4)
    assert serial.manifest_hash == parallel.manifest_hash


def test_licences_per_source_then_default(store: Store, example_corpus: Path) -> None:
    ingest_corpus(
        store, [example_corpus], corpus="c",
        license=["python-stdlib=PSF-2.0", "shakespeare=LicenseRef-PublicDomain", "NOASSERTION"],
    )
    shown = {s["source"]: s["licenses"] for s in store.corpus("c")["sources"]}
    assert shown == {
        "debian-copyright": ["NOASSERTION"],
        "python-stdlib": ["PSF-2.0"],
        "shakespeare": ["LicenseRef-PublicDomain"],
    }
    with pytest.raises(UsageError, match="no document has source 'nope'"):
        ingest_corpus(store, [example_corpus], corpus="d", license=["nope=MIT"])


def test_bad_names_and_missing_paths_are_usage_errors(store: Store, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--corpus"):
        ingest_corpus(store, [tmp_path], corpus="../escape")
    with pytest.raises(InputError, match="no such file"):
        ingest_corpus(store, [tmp_path / "missing"], corpus="c")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "blank.txt").write_text("")
    with pytest.raises(InputError, match="no documents to ingest"):
        ingest_corpus(store, [empty], corpus="c")
    assert store.corpora() == []
    assert not [p for p in (store.root / "tables").rglob("*") if p.is_file()]


def test_unreadable_file_is_named(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Root (as in CI) reads any file whatever its mode, so the refusal is simulated at the
    # one call that opens input files.
    from lineage.ingest import input_rules

    root = tmp_path / "c"
    root.mkdir()
    (root / "locked.txt").write_text("x")
    real_open = input_rules.open_fd

    def refuse(path: str, flags: int) -> int:
        if str(path).endswith("locked.txt"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags)

    monkeypatch.setattr(input_rules, "open_fd", refuse)
    with pytest.raises(InputError,
                       match="locked.txt: unreadable: cannot be read \\(Permission denied\\)"):
        ingest_corpus(store, [root], corpus="c")
    assert store.corpora() == []
