"""The Open-1B harness importer: a harness run's order stored as a stream, checked
against its shards and the corpus, and read back token for token as the harness fed it."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lineage.api import Store
from lineage.errors import InputError
from lineage.ingest.orders.open_transformers import ingest_open_transformers
from lineage.stream.reader import StreamReader

from .conftest import HARNESS

_spec = importlib.util.spec_from_file_location("make_harness_run",
                                               Path(__file__).with_name("make_harness_run.py"))
assert _spec is not None and _spec.loader is not None
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)


def _import(store: Store, run: Path, stream: str = "h", **options: Any) -> dict[str, Any]:
    return ingest_open_transformers(
        store, run / "doc_map.parquet", manifest=run / "manifest.json",
        shards=run / "shards", corpus="shakespeare", stream=stream, **options)


def _harness_windows(step: int, rank: int) -> list[list[int]]:
    """What the harness fed rank `rank` at step `step`: its doc_map rows' tokens, from
    the generator's own tokenization of the text (not from lineage's reader)."""
    tokens = {shard: [make.tokenize(text) for _, text in docs]
              for shard, docs in make.corpus_records().items()}
    rows = pq.read_table(HARNESS / "doc_map.parquet").to_pylist()
    windows: dict[int, list[int]] = {}
    for row in rows:
        if row["step"] == step and row["rank"] == rank:
            piece = tokens[row["shard"]][row["local_doc"]][row["token_start"]:row["token_end"]]
            windows.setdefault(row["window"], []).extend(int(t) for t in piece)
    return [windows[w] for w in sorted(windows)]


def test_the_committed_run_is_what_the_generator_writes(tmp_path: Path) -> None:
    made = make.build_run(tmp_path)
    for name in ("manifest.json", "shards/sonnets/00000.idx", "shards/sonnets/00001.bin",
                 "shards/poems/00000.idx", "shards/poems/00000.bin"):
        assert (tmp_path / name).read_bytes() == (HARNESS / name).read_bytes(), name
    assert pq.read_table(tmp_path / "doc_map.parquet").equals(
        pq.read_table(HARNESS / "doc_map.parquet"))
    assert made["steps"] == 34 and made["windows"] == 208


def test_each_step_and_rank_reads_back_the_harness_tokens(shakespeare: Store) -> None:
    result = _import(shakespeare, HARNESS)
    assert result["status"] == "added" and result["spec"] == "imported/2"
    assert result["framework"] == "open-transformers"
    assert result["schedule"] == [[0, 4], [16, 8]]  # 16,384 tokens = 16 steps of 4 x 256
    assert result["rank_rule"] == {"micro_batch": 2, "rule": "micro-batches"}
    assert result["checked"]["status"] == "equal to the corpus's tokens"
    assert result["checked"]["windows"][0] == 0 and result["checked"]["windows"][-1] == 207
    reader = StreamReader(shakespeare, "h")
    for step in (0, 7, 15, 16, 25, 33):  # both sides of the ramp, the last step
        for rank in (0, 1):
            fed = [list(w) for w in reader.windows(step, rank=rank, world_size=2)]
            assert fed == _harness_windows(step, rank), (step, rank)
            assert all(len(w) == 256 for w in fed)


def test_docs_step_states_the_schedule_and_the_rank_rule(shakespeare: Store) -> None:
    _import(shakespeare, HARNESS)
    rows = pq.read_table(HARNESS / "doc_map.parquet").to_pylist()
    answer = json.loads(shakespeare.docs_in_step(16, stream="h", rank=1, world_size=2).to_json())
    assert answer["step_windows"] == [64, 71]
    assert answer["rank_rule"] == {"micro_batch": 2, "rule": "micro-batches"}
    assert answer["rank_windows"] == [66, 67, 70, 71]  # micro-batches 1 and 3
    harness = sorted({r["window"] for r in rows if r["step"] == 16 and r["rank"] == 1})
    assert sorted({d["window"] for d in answer["documents"]}) == harness
    assert {d["rank"] for d in answer["documents"]} == {1}


def test_trained_on_finds_an_imported_document(shakespeare: Store, tmp_path: Path) -> None:
    _import(shakespeare, HARNESS)
    doc_id, text = make.corpus_records()["sonnets/00001"][3]
    sample = tmp_path / "sonnet.txt"
    sample.write_text(text, encoding="utf-8")
    found = json.loads(shakespeare.trained_on([str(sample)], stream="h").to_json())["results"][0]
    assert found["verdict"] == "in-stream"
    rows = pq.read_table(HARNESS / "doc_map.parquet").to_pylist()
    local = [d for d, _ in make.corpus_records()["sonnets/00001"]].index(doc_id)
    windows = sorted({r["window"] for r in rows
                      if r["shard"] == "sonnets/00001" and r["local_doc"] == local})
    assert found["matches"][0]["windows"][0] == windows[0]


def test_importing_again_is_unchanged(shakespeare: Store) -> None:
    first = _import(shakespeare, HARNESS)
    again = _import(shakespeare, HARNESS)
    assert again["status"] == "unchanged" and again["spec_hash"] == first["spec_hash"]
    assert set(first["artifacts"]) == {"doc_map", "manifest", "sonnets/00000.idx",
                                       "sonnets/00001.idx", "poems/00000.idx"}


def _rewrite_doc_map(run: Path, edit: Any) -> None:
    rows = pq.read_table(run / "doc_map.parquet").to_pylist()
    rows = edit(rows) or rows
    pq.write_table(pa.Table.from_pylist(rows), run / "doc_map.parquet")


def _refused(store: Store, run: Path, *names: str) -> str:
    with pytest.raises(InputError) as caught:
        _import(store, run)
    assert store.streams() == []
    message = str(caught.value)
    for name in names:
        assert name in message, message
    return message


def _drop_window(rows: list[dict[str, Any]], window: int) -> list[dict[str, Any]]:
    return [r for r in rows if r["window"] != window]


def _row_of_window(rows: list[dict[str, Any]], window: int, last: bool = False
                   ) -> dict[str, Any]:
    mine = [r for r in rows if r["window"] == window]
    return mine[-1] if last else mine[0]


@pytest.mark.parametrize(("edit", "rule"), [
    (lambda rows: rows[4].update(rank=1 - rows[4]["rank"]), "rank must be micro_batch mod"),
    (lambda rows: rows[4].update(micro_batch=9), "micro_batch must be (window"),
    (lambda rows: rows[4].update(step=rows[4]["step"] + 1), "step is not the step the batch"),
    (lambda rows: rows[6].update(token_end=10**6), "token range must satisfy"),
    (lambda rows: rows[6].update(local_doc=99), "local_doc is outside the shard"),
    (lambda rows: rows[6].update(shard="web/00000"), "shard is not in the manifest"),
    (lambda rows: rows[6].update(source="poems"), "source is not the manifest's source"),
    (lambda rows: _drop_window(rows, 30), "windows must run 0, 1, 2"),
    (lambda rows: rows[6].update(slot=rows[6]["slot"] + 1), "must start where the one before"),
    (lambda rows: _row_of_window(rows, 3).update(slot=1), "first segment must start at slot 0"),
    (lambda rows: (r := _row_of_window(rows, 3, last=True)).update(token_end=r["token_end"] - 1),
     "every window holds exactly seq_len"),
    (lambda rows: [r for r in rows if r["window"] < 207], "the last step (33) holds 7 of its 8"),
])
def test_a_broken_doc_map_names_the_rule_and_stores_nothing(
    shakespeare: Store, harness: Path, edit: Any, rule: str
) -> None:
    _rewrite_doc_map(harness, edit)
    message = _refused(shakespeare, harness, str(harness / "doc_map.parquet"), rule)
    assert message.endswith("(nothing stored)")


def _encode_text_columns(run: Path) -> None:
    """The doc_map's source and shard columns dictionary-encoded, as pandas categories
    or a writer with dictionaries leave them."""
    table = pq.read_table(run / "doc_map.parquet")
    for name in ("source", "shard"):
        table = table.set_column(table.schema.get_field_index(name), name,
                                 table.column(name).dictionary_encode())
    pq.write_table(table, run / "doc_map.parquet")


@pytest.mark.parametrize(("edit", "rule"), [
    (lambda rows: rows[6].update(shard="web/00000"), "row 7: shard is not in the manifest"),
    (lambda rows: rows[6].update(source="poems"), "row 7: source is not the manifest's source"),
])
def test_dictionary_encoded_text_columns_are_checked_alike(
    shakespeare: Store, harness: Path, edit: Any, rule: str
) -> None:
    plain = _import(shakespeare, HARNESS)["occurrences_digest"]
    _encode_text_columns(harness)
    assert pq.read_schema(harness / "doc_map.parquet").field("shard").type.value_type \
        == pa.string()
    assert _import(shakespeare, harness, stream="encoded")["occurrences_digest"] == plain
    _rewrite_doc_map(harness, edit)
    _encode_text_columns(harness)
    message = _refused_quietly(shakespeare, harness, rule)
    assert message.endswith("(nothing stored)")


def _refused_quietly(store: Store, run: Path, rule: str) -> str:
    streams = store.streams()
    with pytest.raises(InputError) as caught:
        _import(store, run, stream="broken")
    assert store.streams() == streams
    assert rule in str(caught.value), str(caught.value)
    return str(caught.value)


def test_a_changed_token_in_a_sampled_window_is_found(shakespeare: Store, harness: Path) -> None:
    row = pq.read_table(harness / "doc_map.parquet").to_pylist()[0]  # window 0 is sampled
    data = bytearray((harness / "shards" / f"{row['shard']}.bin").read_bytes())
    lengths = np.frombuffer((harness / "shards" / f"{row['shard']}.idx").read_bytes(),
                            dtype="<i4", count=1, offset=34)
    assert row["local_doc"] > 0 or lengths[0] > 10
    pointer = int(np.frombuffer((harness / "shards" / f"{row['shard']}.idx").read_bytes(),
                                dtype="<i8", count=row["local_doc"] + 1,
                                offset=34 + 4 * _sequences(harness, row["shard"]))[-1])
    data[pointer + 2 * 10] ^= 0x01  # token 10 of the window's first document
    (harness / "shards" / f"{row['shard']}.bin").write_bytes(bytes(data))
    _refused(shakespeare, harness, f"{row['shard']}.bin", "window 0 slot 0",
             "differ from the corpus document's, first at token 10")


def _sequences(run: Path, shard: str) -> int:
    return int(struct.unpack_from("<Q", (run / "shards" / f"{shard}.idx").read_bytes(), 18)[0])


def test_idx_lengths_are_checked_against_the_corpus(shakespeare: Store, harness: Path) -> None:
    manifest = json.loads((harness / "manifest.json").read_text())
    ids = manifest["shards"][0]["doc_ids"]
    ids[0], ids[1] = ids[1], ids[0]  # the shard's documents named in the wrong order
    (harness / "manifest.json").write_text(json.dumps(manifest))
    _refused(shakespeare, harness, "sonnets/00000.idx", "document 0 (", "the corpus counts",
             "+ 1 end-of-document token")


@pytest.mark.parametrize(("damage", "rule"), [
    (lambda b: b[:-8], "bytes where the header's counts make"),
    (lambda b: b"XXXXXXXXX" + b[9:], "magic MMIDIDX missing"),
    (lambda b: b[:9] + struct.pack("<Q", 2) + b[17:], "index version 2"),
    (lambda b: b[:17] + bytes([42]) + b[18:], "unknown token type code 42"),
])
def test_a_damaged_idx_is_refused(
    shakespeare: Store, harness: Path, damage: Any, rule: str
) -> None:
    idx = harness / "shards" / "poems" / "00000.idx"
    idx.write_bytes(damage(idx.read_bytes()))
    _refused(shakespeare, harness, str(idx), rule)


def test_a_bin_of_the_wrong_size_is_refused(shakespeare: Store, harness: Path) -> None:
    path = harness / "shards" / "poems" / "00000.bin"
    path.write_bytes(path.read_bytes() + b"\x00\x00")
    _refused(shakespeare, harness, str(path), "bytes where the .idx's lengths make")


@pytest.mark.parametrize(("edit", "rule"), [
    (lambda m: m["run"].update(global_batch_ramp=[[0, 4], [0, 8]]), "global_batch_ramp"),
    (lambda m: m["run"].update(seq_len=0), "run.seq_len must be an integer >= 1"),
    (lambda m: m["shards"][0].update(shard="../x"), "must be a relative path"),
    (lambda m: m.update(format="other/1"), "open-transformers/data-manifest/1"),
    (lambda m: m["shards"][2]["doc_ids"].pop(), "5 documents, but the manifest names 4"),
])
def test_a_bad_manifest_is_refused(
    shakespeare: Store, harness: Path, edit: Any, rule: str
) -> None:
    manifest = json.loads((harness / "manifest.json").read_text())
    edit(manifest)
    (harness / "manifest.json").write_text(json.dumps(manifest))
    _refused(shakespeare, harness, rule)


def test_a_ramp_that_differs_from_the_doc_map_is_refused(
    shakespeare: Store, harness: Path
) -> None:
    manifest = json.loads((harness / "manifest.json").read_text())
    manifest["run"]["global_batch_ramp"] = [[0, 4], [32_768, 8]]
    (harness / "manifest.json").write_text(json.dumps(manifest))
    _refused(shakespeare, harness, "step is not the step the batch ramp gives its window")


def test_cli_imports_and_answers(cli: Any, shakespeare: Store) -> None:
    out = cli.json("ingest", "order", "open-transformers", str(HARNESS / "doc_map.parquet"),
                   "--manifest", str(HARNESS / "manifest.json"), "--shards",
                   str(HARNESS / "shards"), "--corpus", "shakespeare", "--stream", "h")
    assert out["status"] == "added" and out["steps"] == 34 and out["windows"] == 208
    shown = cli.json("stream", "show", "h")
    assert (shown["spec"], shown["spec_hash"]) == ("imported/2", out["spec_hash"])
    assert shown["schedule"] == [[0, 4], [16, 8]] and shown["seed"] is None
    docs = cli.json("docs", "--step", "20", "--stream", "h", "--rank", "0",
                    "--world-size", "2")
    assert docs["step_windows"] == [96, 103] and docs["rank_windows"] == [96, 97, 100, 101]
    bad = cli("docs", "--step", "20", "--stream", "h", "--rank", "0", "--world-size", "3",
              code=2)
    assert "micro-batch" in bad.stderr
    text = cli("ingest", "order", "open-transformers", str(HARNESS / "doc_map.parquet"),
               "--manifest", str(HARNESS / "manifest.json"), "--shards",
               str(HARNESS / "shards"), "--corpus", "shakespeare", "--stream", "h")
    assert "stream h: unchanged: 208 windows in 34 steps (schedule 0:4,16:8, rank rule " \
        "micro-batches:2), 295 segments in 88 occurrences" in text.stdout


def test_cli_refuses_a_broken_run_with_exit_2(cli: Any, shakespeare: Store,
                                               harness: Path) -> None:
    _rewrite_doc_map(harness, lambda rows: rows[4].update(rank=1 - rows[4]["rank"]))
    result = cli("ingest", "order", "open-transformers", str(harness / "doc_map.parquet"),
                 "--manifest", str(harness / "manifest.json"), "--shards",
                 str(harness / "shards"), "--corpus", "shakespeare", "--stream", "h", code=2)
    assert "row 5: rank must be micro_batch mod world_size 2" in result.stderr
    assert "Traceback" not in result.stderr
    assert cli.json("stream", "list") == []


def _blake2b_chain(path: Path, digests: list[list[str]]) -> Path:
    """The harness's own step chain (blake2b, foreign to lineage), with each step's
    per-rank batch digests."""
    import hashlib

    from lineage.runs.chain import canonical_json

    lines, prev = [canonical_json({"algorithm": "blake2b", "chain": "open-1b-chain",
                                   "genesis": "g0", "world_size": 2})], "g0"
    for step, batch in enumerate(digests):
        state = hashlib.blake2b(f"{prev}{step}".encode()).hexdigest()
        lines.append(canonical_json({"batch_digests": batch, "prev_hash": prev,
                                     "state_hash": state, "step": step}))
        prev = state
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_harness_chain_verifies_its_batches_against_the_imported_order(
    shakespeare: Store, tmp_path: Path
) -> None:
    from lineage.ingest.steps import ingest_steps
    from lineage.runs.chain_verify import verify_chain

    _import(shakespeare, HARNESS)
    reader = StreamReader(shakespeare, "h")
    digests = [reader.batch_digests(step, 2) for step in range(34)]
    ingest_steps(shakespeare, _blake2b_chain(tmp_path / "chain.jsonl", digests),
                 run="open-1b", stream="h", world_size=2)
    report = verify_chain(shakespeare, "open-1b")
    assert report["verdict"] == "continuity-only" and report["batches_checked"]
    assert report["first_broken_step"] is None
    traced = json.loads(shakespeare.trace("open-1b", step=20).to_json())
    assert [s["step"] for s in traced["steps"]] == [20]
    assert {d["doc_id"] for d in traced["steps"][0]["documents"]} == {
        d["doc_id"] for d in json.loads(shakespeare.docs_in_step(20, stream="h").to_json())[
            "documents"]}
    digests[20] = digests[21]  # step 20 claims the batches of step 21
    ingest_steps(shakespeare, _blake2b_chain(tmp_path / "wrong.jsonl", digests),
                 run="wrong", stream="h", world_size=2)
    assert verify_chain(shakespeare, "wrong")["first_broken_step"] == 20


def test_doc_ids_may_come_from_a_parquet_file_beside_the_manifest(
    shakespeare: Store, harness: Path
) -> None:
    listed = _import(shakespeare, HARNESS, stream="listed")
    manifest = json.loads((harness / "manifest.json").read_text())
    shard = manifest["shards"][1]
    pq.write_table(pa.table({"doc_id": shard.pop("doc_ids")}), harness / "ids-1.parquet")
    shard["doc_ids_file"] = "ids-1.parquet"
    (harness / "manifest.json").write_text(json.dumps(manifest))
    from_file = _import(shakespeare, harness, stream="from-file")
    assert from_file["occurrences_digest"] == listed["occurrences_digest"]
    assert from_file["artifacts"]["sonnets/00001.doc_ids"].startswith("blake3:")
    (harness / "ids-1.parquet").unlink()
    with pytest.raises(InputError, match="ids-1.parquet: no such file"):
        _import(shakespeare, harness, stream="gone")
    shard["doc_ids"] = []
    (harness / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match=r"shards\[1\] needs doc_ids or doc_ids_file"):
        _import(shakespeare, harness, stream="both")


def test_a_bpe_tokenized_run_is_re_read_with_the_corpus_tokenizer(
    store: Store, example_shards: Path, tokenizer_json: Path, tmp_path: Path
) -> None:
    from lineage.errors import UsageError
    from lineage.ingest import ingest_corpus

    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz", example_shards / "poems.parquet"],
                  corpus="shakespeare", tokenizer=str(tokenizer_json), workers=1)
    run = tmp_path / "bpe-run"
    made = make.build_run(run, tokenizer=tokenizer_json)
    result = _import(store, run, stream="bpe", tokenizer=tokenizer_json)
    assert result["checked"]["status"] == "equal to the corpus's tokens"
    assert result["checked"]["tokens"] > 0 and result["windows"] == made["windows"]
    unread = _import(store, run, stream="bpe")  # the same order: no tokenizer to re-read
    assert unread["status"] == "unchanged"
    assert unread["checked"]["status"].startswith("not re-read: the corpus's tokens cannot")
    other = tmp_path / "other.json"
    other.write_text(tokenizer_json.read_text().replace('"[UNK]"', '"[UNKNOWN]"'))
    with pytest.raises(UsageError, match="the corpus was counted with tokenizer.json:blake3"):
        _import(store, run, stream="other", tokenizer=other)


def test_cli_names_a_missing_corpus_with_exit_2(cli: Any) -> None:
    result = cli("ingest", "order", "open-transformers", str(HARNESS / "doc_map.parquet"),
                 "--manifest", str(HARNESS / "manifest.json"), "--shards",
                 str(HARNESS / "shards"), "--corpus", "nope", "--stream", "h", code=2)
    assert result.stderr == "error: no corpus named 'nope': `lineage corpus list` shows them\n"


@pytest.mark.parametrize("depth", [33, 100_000])
def test_deep_json_in_the_manifest_is_refused_by_the_nesting_depth_rule(
        cli: Any, shakespeare: Store, harness: Path, depth: int) -> None:
    """Before: 100,000 levels gave "unexpected RecursionError" (and 33 were accepted);
    now the rule every JSON reader applies, with exit 2 and nothing stored."""
    manifest = json.loads((harness / "manifest.json").read_text())
    text = json.dumps(manifest)
    nested = "[" * (depth - 2) + "1" + "]" * (depth - 2)  # + the manifest and run objects
    (harness / "manifest.json").write_text(text.replace('"run": {', f'"run": {{"x": {nested}, ', 1))
    result = cli("ingest", "order", "open-transformers", str(harness / "doc_map.parquet"),
                 "--manifest", str(harness / "manifest.json"), "--shards",
                 str(harness / "shards"), "--corpus", "shakespeare", "--stream", "h", code=2)
    assert result.stderr == (f"error: {harness / 'manifest.json'}: nesting-depth: JSON "
                             "nested deeper than 32 levels\n")
    assert cli.json("stream", "list") == []


def test_json_at_the_depth_limit_is_read(shakespeare: Store, harness: Path) -> None:
    manifest = json.loads((harness / "manifest.json").read_text())
    manifest["run"]["x"] = json.loads("[" * 30 + "1" + "]" * 30)  # 32 levels with the two
    (harness / "manifest.json").write_text(json.dumps(manifest))
    assert _import(shakespeare, harness)["settings"]["x"] is not None


def test_verify_all_finds_one_changed_token_the_sample_misses(
        shakespeare: Store, harness: Path) -> None:
    """Every document the windows read, whole (its end-of-document token too), against
    the corpus: one changed token the 16 sampled windows miss is refused, naming the
    first window that reads it."""
    from lineage.ingest.orders.indexed import read_indexed
    from lineage.stream.reader import StreamReader

    good = _import(shakespeare, harness, stream="good", verify="all")
    assert good["checked"]["windows"] == "all"
    assert good["checked"]["status"] == "equal to the corpus's tokens"
    data = read_indexed(harness / "shards" / "sonnets" / "00000")
    manifest = json.loads((harness / "manifest.json").read_text())
    doc_id = manifest["shards"][0]["doc_ids"][3]
    reader = StreamReader(shakespeare, "good")
    window = min(s.window for step in range(good["steps"]) for s in reader.segments(step)
                 if s.doc_id == doc_id and s.token_start <= 100 < s.token_end)
    raw = np.fromfile(data.bin, dtype=data.dtype)
    raw[int(data.sequence_pointers[3]) // raw.itemsize + 100] ^= 1
    raw.tofile(data.bin)
    assert _import(shakespeare, harness, stream="sampled")["status"] == "added"
    with pytest.raises(InputError, match=rf"00000.bin: window {window}: local document 3 "
                       rf"\('{doc_id}'\): token 100 differs from the corpus document's"):
        _import(shakespeare, harness, stream="all", verify="all")
