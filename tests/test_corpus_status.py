"""`corpus status`: a local copy against the recorded corpus, or a published manifest, on
the example corpus (real files), with edits a user makes: a file changed, one removed, one
added, an empty one and a hidden one (neither is a document), and nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import blake3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.ingest import corpus_status, ingest_corpus

from .conftest import Cli


def _copy(example_corpus: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(example_corpus, copy)
    return copy


def _store_files(store: Store) -> dict[str, bytes]:
    """Every file of the store but the staging folder, with its bytes."""
    return {str(p.relative_to(store.root)): p.read_bytes() for p in sorted(
        store.root.rglob("*")) if p.is_file() and "staging" not in p.parts}


def test_an_untouched_copy_is_in_sync(store: Store, example_corpus: Path,
                                      tmp_path: Path) -> None:
    copy = _copy(example_corpus, tmp_path)
    recorded = ingest_corpus(store, [copy], corpus="example", license="NOASSERTION")
    before = _store_files(store)
    # no PATH: the folders the ingest recorded
    answer = corpus_status(store, "example", [])
    assert answer.in_sync and answer.paths == (str(copy.resolve()),)
    assert answer.recorded == answer.local == answer.unchanged == recorded.documents
    assert (answer.new, answer.changed, answer.missing) == (0, 0, 0)
    # read as the ingest reads, with its licence: the same manifest hash
    assert answer.local_hash == answer.reference_hash == recorded.manifest_hash
    assert _store_files(store) == before  # nothing written
    assert not any((store.root / "staging").rglob("*.parquet"))


def test_edits_are_named_and_the_command_exits_1(store: Store, example_corpus: Path,
                                                 tmp_path: Path) -> None:
    ingest_corpus(store, [example_corpus], corpus="example", license="NOASSERTION")
    copy = _copy(example_corpus, tmp_path)
    files = sorted(p for p in copy.rglob("*") if p.is_file() and p.stat().st_size
                   and not any(part.startswith(".") for part in p.relative_to(copy).parts))
    changed, removed = files[3], files[10]
    changed.write_bytes(changed.read_bytes().replace(b"e", b"E", 1))
    removed.unlink()
    (copy / "shakespeare" / "a-new-poem.txt").write_text("Shall I compare thee?\n")
    (copy / "shakespeare" / "empty.txt").write_bytes(b"")  # empty: never a document
    (copy / "shakespeare" / ".hidden.txt").write_text("hidden files are skipped\n")
    cli = Cli(store.root)
    done = cli("corpus", "status", "example", str(copy), "--json", code=1)
    answer = json.loads(done.stdout)
    rel = lambda p: p.relative_to(copy).as_posix()  # noqa: E731
    assert answer["in_sync"] is False
    assert (answer["new"], answer["changed"], answer["missing"]) == (1, 1, 1)
    assert answer["new_documents"] == ["shakespeare/a-new-poem.txt"]
    assert answer["missing_documents"] == [rel(removed)]
    assert answer["changed_documents"] == [{
        "doc_id": rel(changed),
        "recorded": blake3.blake3((example_corpus / rel(changed)).read_bytes()).hexdigest(),
        "local": blake3.blake3(changed.read_bytes()).hexdigest()}]
    assert answer["unchanged"] == answer["recorded"] - 2 == answer["local"] - 2
    assert answer["skipped_hidden"] >= 1 and answer["local_hash"] != answer["reference_hash"]
    human = cli("corpus", "status", "example", str(copy), code=1).stdout.splitlines()
    assert human[0].startswith("corpus example (blake3:") and human[0].endswith(": differs")
    assert f"  missing  {rel(removed)}" in human and "  new      shakespeare/a-new-poem.txt" \
        in human
    assert any(line.startswith(f"  changed  {rel(changed)} (") for line in human)
    # --limit keeps the counts and lists fewer
    limited = json.loads(cli("corpus", "status", "example", str(copy), "--limit", "0",
                             "--json", code=1).stdout)
    assert limited["new_documents"] == [] and limited["new"] == 1


def test_against_a_published_manifest_without_a_store(example_corpus: Path,
                                                      tmp_path: Path) -> None:
    """The manifest someone published, written here from the files' own bytes (BLAKE3 by
    the `blake3` package, not by lineage): the copy matches it until a file changes."""
    files = sorted(p for p in example_corpus.rglob("*") if p.is_file() and p.stat().st_size
                   and not any(part.startswith(".")
                               for part in p.relative_to(example_corpus).parts))
    manifest = tmp_path / "published.jsonl"
    with manifest.open("w") as out:
        for path in files:
            doc_id = path.relative_to(example_corpus).as_posix()
            data = path.read_bytes()
            out.write(json.dumps({
                "doc_id": doc_id, "source": doc_id.split("/")[0], "uri": f"https://x/{doc_id}",
                "n_bytes": len(data), "n_tokens": len(data),
                "content_hash": blake3.blake3(data).hexdigest(), "license": "NOASSERTION"}) + "\n")
    cli = Cli(tmp_path / "no-store-here")
    answer = json.loads(cli("corpus", "status", "--manifest", str(manifest),
                            str(example_corpus), "--json").stdout)
    assert answer["in_sync"] and answer["recorded"] == answer["local"] == len(files)
    assert answer["reference"] == str(manifest.resolve())
    assert not (tmp_path / "no-store-here").exists()
    copy = _copy(example_corpus, tmp_path)
    (copy / files[0].relative_to(example_corpus)).write_text("replaced\n")
    answer = json.loads(cli("corpus", "status", "--manifest", str(manifest), str(copy),
                            "--json", code=1).stdout)
    assert answer["changed"] == 1 and answer["unchanged"] == len(files) - 1


def test_bad_calls_get_one_line_and_exit_2(store: Store, tmp_path: Path) -> None:
    cli = Cli(store.root)
    for args in (("corpus", "status"), ("corpus", "status", "nothing-here", str(tmp_path))):
        done = cli(*args, code=2)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "no corpus named 'nothing-here'" in cli("corpus", "status", "nothing-here",
                                                     str(tmp_path), code=2).stderr


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(recorded=st.dictionaries(st.sampled_from("abcdefgh"), st.binary(min_size=1, max_size=9),
                                min_size=1),
       local=st.dictionaries(st.sampled_from("abcdefgh"), st.binary(min_size=1, max_size=9),
                             min_size=1))
def test_the_counts_are_the_set_arithmetic(store: Store, tmp_path_factory,
                                           recorded: dict[str, bytes],
                                           local: dict[str, bytes]) -> None:
    root = tmp_path_factory.mktemp("status")
    for side, files in (("then", recorded), ("now", local)):
        for name, data in files.items():
            (root / side / "src").mkdir(parents=True, exist_ok=True)
            (root / side / "src" / f"{name}.txt").write_bytes(data)
    corpus = root.name.replace("_", "-")[-40:].strip("-") or "c"
    ingest_corpus(store, [root / "then"], corpus=corpus)
    answer = corpus_status(store, corpus, [root / "now"])
    both = recorded.keys() & local.keys()
    assert answer.new == len(local.keys() - recorded.keys())
    assert answer.missing == len(recorded.keys() - local.keys())
    assert answer.changed == sum(recorded[k] != local[k] for k in both)
    assert answer.unchanged == sum(recorded[k] == local[k] for k in both)
    assert answer.in_sync == (recorded == local)


def test_against_a_published_croissant_file(store: Store, example_corpus: Path,
                                            tmp_path: Path) -> None:
    """What `lineage export croissant` publishes (the manifest's parts, with their SHA-256)
    is a reference too: a copy is checked against it with no store of its own, and a part
    whose bytes differ from what the file says is refused."""
    ingest_corpus(store, [example_corpus], corpus="example", license="NOASSERTION")
    published = tmp_path / "dataset.json"
    Cli(store.root)("export", "croissant", "--corpus", "example", "-o", str(published))
    cli = Cli(tmp_path / "no-store-here")
    answer = json.loads(cli("corpus", "status", "--manifest", str(published),
                            str(example_corpus), "--json").stdout)
    assert answer["in_sync"] and answer["unchanged"] == answer["recorded"] > 200
    copy = _copy(example_corpus, tmp_path)
    (copy / "shakespeare" / "added.txt").write_text("Not in the published corpus.\n")
    answer = json.loads(cli("corpus", "status", "--manifest", str(published), str(copy),
                            "--json", code=1).stdout)
    assert answer["new_documents"] == ["shakespeare/added.txt"]
    listed = json.loads(published.read_text())
    part = next(Path(entry["contentUrl"]) for entry in listed["distribution"]
                if entry.get("encodingFormat") == "application/x-parquet")
    part = part if part.is_absolute() else published.parent / part
    part.chmod(0o644)
    part.write_bytes(part.read_bytes()[:-1] + b"!")
    done = cli("corpus", "status", "--manifest", str(published), str(copy), code=2)
    assert "croissant-checksum" in done.stderr or "sha256" in done.stderr.lower()
