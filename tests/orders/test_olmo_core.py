"""The OLMo-core importer on runs OLMo-core made (tests/orders/fixtures/olmo, written by
make_olmo_run.py with the real framework): the windows lineage says each rank of each
step read are, token for token, the batches OLMo-core's loader yielded."""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from lineage.api import Store
from lineage.errors import InputError, UsageError
from lineage.ingest.orders.olmo_core import import_olmo_core
from lineage.ingest.orders.olmo_order import Warmup
from lineage.stream.reader import StreamReader
from tests.conftest import Cli

from .make_olmo_run import EOS, FIXTURES, SEQ_LEN, WORLD, corpus_documents
from .olmo_helpers import (
    checked_rank_tokens_hash,
    copy_of,
    corpus_texts,
    expected_steps,
    import_case,
    poetry_template,
    rank_tokens_hash,
    run_of,
    segment_tokens_hash,
    steps_to_check,
)


def sidecar_lines(tokens: Path) -> list[str]:
    """The lines of a token file's Dolma sidecar (`start,end,id,...`)."""
    return gzip.decompress(tokens.with_name(tokens.name.replace(".npy", ".csv.gz"))
                           .read_bytes()).decode().splitlines()


def write_sidecar(tokens: Path, lines: list[str]) -> None:
    tokens.with_name(tokens.name.replace(".npy", ".csv.gz")).write_bytes(
        gzip.compress(("\n".join(lines) + "\n").encode()))


@pytest.fixture(scope="module")
def poetry_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return poetry_template(tmp_path_factory)


@pytest.fixture
def poetry(poetry_store: Path, tmp_path: Path) -> Store:
    """A store of its own holding corpus `poetry`."""
    return copy_of(poetry_store, tmp_path)


@pytest.mark.parametrize("name", ["plain", "warmup", "mixture", "padded", "target"])
def test_every_rank_of_the_checked_steps_reads_what_olmo_core_yielded(
        poetry: Store, tmp_path: Path, name: str) -> None:
    result = import_case(poetry, name, tmp_path)
    steps = expected_steps(FIXTURES / name)
    assert result["status"] == "added" and result["framework"] == "olmo-core"
    assert result["steps"] == len(steps)
    assert result["windows"] == sum(len(r["indices"]) for step in steps for r in step)
    assert result["rank_rule"] == {"rule": "strided"}
    reader = StreamReader(poetry, name)
    settings = json.loads((FIXTURES / name / "expected.json").read_text())["settings"]
    eos, padded = EOS[settings["dtype"]], settings.get("dataset") == "padded"
    texts = corpus_texts()
    for step, ranks in enumerate(steps):
        for rank in range(WORLD):
            assert segment_tokens_hash(reader, step, rank, WORLD, eos, texts, padded) == \
                ranks[rank]["input_ids"], (step, rank)
    for step in steps_to_check(len(steps))[::3]:  # the reader's own re-read tokens
        for rank in range(WORLD):
            assert rank_tokens_hash(reader, step, rank, WORLD, eos, padded) == \
                steps[step][rank]["input_ids"], (step, rank)


def test_the_warmup_becomes_the_streams_batch_schedule(poetry: Store, tmp_path: Path) -> None:
    result = import_case(poetry, "warmup", tmp_path)
    steps = expected_steps(FIXTURES / "warmup")
    sizes = [sum(len(r["indices"]) for r in step) for step in steps]
    # 2 instances until step 3 is due and the 3 batches done are not divisible by 2: 4 from
    # step 4, 8 from step 10 (9 is odd), back to 4 at step 40 at once; epoch 2 keeps 4.
    assert result["schedule"] == [[0, 2], [4, 4], [10, 8], [40, 4]]
    for first, windows in result["schedule"]:
        assert sizes[first] == windows
    answer = poetry.docs_in_step(10, stream="warmup", rank=1, world_size=2)
    first = 4 * 2 + 6 * 4  # steps 0-3 took 2 windows, steps 4-9 took 4
    assert list(answer["step_windows"]) == [first, first + 7]
    assert answer["rank_rule"] == {"rule": "strided"}
    assert list(answer["rank_windows"]) == [first + 1, first + 3, first + 5, first + 7]


def test_the_spec_names_every_file_read_and_the_settings(poetry: Store, tmp_path: Path) -> None:
    result = import_case(poetry, "mixture", tmp_path)
    artifacts = result["artifacts"]
    assert set(artifacts) == {"tokens:sonnets-0.npy", "tokens:sonnets-1.npy",
                              "tokens:poems-0.npy", "metadata:sonnets-0.csv.gz",
                              "metadata:sonnets-1.csv.gz", "metadata:poems-0.csv.gz",
                              "global_indices:epoch1", "mixture_index"}
    settings = result["settings"]
    assert settings["dataset"] == "NumpyFSLDatasetMixture" and settings["seed"] == 5
    assert settings["sequence_length"] == SEQ_LEN and settings["epochs"] == 1
    assert settings["batch_size_schedule"]["unit"] == "tokens"
    assert result["checked"]["re_read"] > 0 and result["checked"]["token_counts"] == "all"
    again = import_case(poetry, "mixture", tmp_path)
    assert again["status"] == "unchanged" and again["spec_hash"] == result["spec_hash"]


def test_a_changed_global_indices_file_is_a_different_order(poetry: Store,
                                                            tmp_path: Path) -> None:
    """Files whose names do not record the seed (and no --seed): not compared with
    OLMo-core's shuffle, imported as the order they hold."""
    case = tmp_path / "case"
    shutil.copytree(FIXTURES / "plain", case)
    for path in case.glob("global_indices_*"):
        path.rename(path.with_name(path.name.replace("_seed7", "")))
    first = import_case(poetry, "plain", tmp_path, case)
    indices_file = sorted(case.glob("global_indices_*epoch1*"))[0]
    indices = np.fromfile(indices_file, dtype=np.uint32)
    indices[[0, 1]] = indices[[1, 0]]
    indices.tofile(indices_file)
    second = import_olmo_store(poetry, tmp_path, case, "swapped")
    assert second["spec_hash"] != first["spec_hash"]
    windows = poetry.docs_in_step(0, stream="swapped", window=0)["documents"]
    before = poetry.docs_in_step(0, stream="plain", window=1)["documents"]
    assert [d["doc_id"] for d in windows] == [d["doc_id"] for d in before]


def import_olmo_store(store: Store, tokens: Path, case: Path, stream: str) -> dict[str, object]:
    return import_olmo_core(store, corpus="poetry", stream=stream, run=run_of(case, tokens))


def test_global_indices_that_are_not_a_permutation_are_refused(poetry: Store,
                                                               tmp_path: Path) -> None:
    case = tmp_path / "case"
    shutil.copytree(FIXTURES / "plain", case)
    indices_file = sorted(case.glob("global_indices_*epoch2*"))[0]
    indices = np.fromfile(indices_file, dtype=np.uint32)
    indices[5] = indices[6]
    indices.tofile(indices_file)
    with pytest.raises(InputError, match="not a permutation of the 719 instances"):
        import_case(poetry, "plain", tmp_path, case)
    assert poetry.streams() == []


def test_a_token_file_that_differs_from_the_corpus_is_refused(poetry: Store,
                                                              tmp_path: Path) -> None:
    run = run_of(FIXTURES / "plain", tmp_path)
    for path in run.token_files:  # every byte of every document shifted, lengths kept
        tokens = np.fromfile(path, dtype=np.uint16)
        text = tokens != EOS["uint16"]
        tokens[text] = (tokens[text] + 1) % 256
        tokens.tofile(path)
    with pytest.raises(InputError, match="holds other tokens than its corpus text"):
        import_case(poetry, "plain", tmp_path, token_files=run.token_files)
    assert poetry.streams() == []


def test_a_document_of_another_length_is_named(poetry: Store, tmp_path: Path) -> None:
    run = run_of(FIXTURES / "warmup", tmp_path)
    assert run.doc_ids is not None
    ids = run.doc_ids.read_text().splitlines()
    ids[0], ids[1] = ids[1], ids[0]  # sonnets 1 and 2 swapped: their lengths differ
    run.doc_ids.write_text("\n".join(ids) + "\n")
    with pytest.raises(InputError, match=r"uint32/sonnets-0.npy document 0: 'sonnet-002' "
                                         r"holds \d+ tokens here, the corpus counted \d+"):
        import_case(poetry, "warmup", tmp_path, doc_ids=run.doc_ids,
                    token_files=run.token_files)


def test_settings_that_do_not_fit_are_usage_errors(poetry: Store, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--stream 'no good'"):
        import_olmo_core(poetry, corpus="poetry", stream="no good",
                         run=run_of(FIXTURES / "plain", tmp_path))
    with pytest.raises(UsageError, match="not a whole number of 32-token instances"):
        import_case(poetry, "plain", tmp_path, global_batch_size=100)
    with pytest.raises(UsageError, match="only 178 steps"):
        import_case(poetry, "plain", tmp_path, max_steps=500)
    with pytest.raises(UsageError, match="whole factor"):
        Warmup((64, 96), (0, 4), "steps")
    with pytest.raises(UsageError, match="starts at 0"):
        Warmup.parse("5:64", "steps")


def test_max_steps_keeps_the_first_steps(poetry: Store, tmp_path: Path) -> None:
    result = import_case(poetry, "plain", tmp_path, max_steps=20)
    assert result["steps"] == 20 and result["windows"] == 20 * 8


def test_the_command_imports_a_run_and_docs_step_answers_by_rank(poetry: Store,
                                                                 tmp_path: Path) -> None:
    run = run_of(FIXTURES / "warmup", tmp_path)
    cli = Cli(poetry.root)
    args = ["ingest", "order", "olmo-core", *map(str, run.token_files), "--corpus", "poetry",
            "--stream", "olmo", "--dtype", "uint32", "--eos-token-id", str(run.eos_token_id),
            "--sequence-length", "32", "--global-batch-size", "64",
            "--doc-ids", str(run.doc_ids), "--batch-size-schedule", "0:64,3:128,9:256,40:128"]
    for path in run.global_indices:
        args += ["--global-indices", str(path)]
    result = cli.json(*args)
    assert result["schedule"] == [[0, 2], [4, 4], [10, 8], [40, 4]]
    assert result["settings"]["batch_size_schedule"] == {
        "batch_sizes": [64, 128, 256, 128], "schedule": [0, 3, 9, 40], "unit": "steps"}
    expected = expected_steps(FIXTURES / "warmup")
    answer = cli.json("docs", "--step", "5", "--stream", "olmo", "--rank", "0",
                      "--world-size", "2")
    assert answer["rank_rule"] == {"rule": "strided"}
    assert len(answer["rank_windows"]) == len(expected[5][0]["indices"]) == 2
    again = cli(*args).stdout
    assert f"stream olmo: unchanged: {result['windows']:,} windows in 330 steps (schedule " \
        "0:2,4:4,10:8,40:4, rank rule strided)" in again
    assert f"{result['segments']:,} segments in {result['occurrences']:,} occurrences" in again
    text = cli(*args, "--steps", "9999", code=2)
    assert "--steps 9999: the epochs given hold only 330 steps" in text.stderr
    assert "Traceback" not in text.stderr


def test_trained_on_names_the_steps_whose_olmo_batches_held_the_document(
        poetry: Store, tmp_path: Path) -> None:
    """Ground truth from the token files and OLMo-core's own batches: the steps whose
    instances cover the document's tokens, under the warmed-up batch sizes."""
    from .make_olmo_run import corpus_documents

    import_case(poetry, "warmup", tmp_path)
    run = run_of(FIXTURES / "warmup", tmp_path)
    sizes = [np.fromfile(p, dtype=np.uint32).size for p in run.token_files]
    tokens = np.concatenate([np.fromfile(p, dtype=np.uint32) for p in run.token_files])
    starts = np.concatenate(([0], np.flatnonzero(tokens == EOS["uint32"]) + 1))
    first_instance = np.concatenate(([0], np.cumsum([s // SEQ_LEN for s in sizes])))
    doc = 7  # sonnet-008: the second document of sonnets-1.npy
    file_start = sum(sizes[:1])
    lo, hi = starts[doc] - file_start, starts[doc + 1] - 1 - file_start
    base = int(first_instance[1])
    held = set(range(base + lo // SEQ_LEN, base + (hi - 1) // SEQ_LEN + 1))
    truth = [step for step, ranks in enumerate(expected_steps(FIXTURES / "warmup"))
             if held & {i for r in ranks for i in r["indices"]}]
    text = corpus_documents()[doc][2]
    answer = json.loads(poetry.trained_on(texts=[text], stream="warmup").to_json())
    (match,) = answer["results"][0]["matches"]
    assert match["doc_id"] == "sonnet-008" and match["match"] == "exact"
    assert match["steps"] == truth and len(truth) > 10


def test_a_sidecar_line_outside_its_file_is_named(poetry: Store, tmp_path: Path) -> None:

    run = run_of(FIXTURES / "plain", tmp_path)
    lines = sidecar_lines(run.token_files[0])
    start, _, rest = lines[2].split(",", 2)
    lines[2] = f"{start},99999999,{rest}"
    write_sidecar(run.token_files[0], lines)
    with pytest.raises(InputError, match=r"sonnets-0.csv.gz:line 3: document \[\d+, 99999999\) "
                                         r"is not inside the \d+ tokens of sonnets-0.npy"):
        import_case(poetry, "plain", tmp_path, token_files=run.token_files)


def test_same_named_files_of_different_folders_are_told_apart(poetry: Store,
                                                              tmp_path: Path) -> None:
    run = run_of(FIXTURES / "plain", tmp_path)
    moved = []
    for folder, path in zip("abc", run.token_files, strict=True):  # a/part.npy, b/part.npy...
        (tmp_path / "mix" / folder).mkdir(parents=True)
        target = tmp_path / "mix" / folder / "part.npy"
        shutil.copy(path, target)
        shutil.copy(path.with_name(path.name.replace(".npy", ".csv.gz")),
                    target.with_name("part.csv.gz"))
        moved.append(target)
    plain = import_case(poetry, "plain", tmp_path)
    parts = import_olmo_core(poetry, corpus="poetry", stream="parts",
                             run=dataclasses.replace(run, token_files=tuple(moved)))
    assert {k for k in parts["artifacts"] if k.startswith(("tokens:", "metadata:"))} == {
        f"{kind}:{folder}/part.{ext}" for folder in "abc"
        for kind, ext in (("tokens", "npy"), ("metadata", "csv.gz"))}
    assert [name for name, _ in parts["settings"]["paths"]] == ["a/part.npy", "b/part.npy",
                                                                 "c/part.npy"]
    assert parts["occurrences_digest"] == plain["occurrences_digest"]
    # A mixture index naming them as the run did (URLs): matched by their path's tail.
    index = tmp_path / "mixture.json"
    index.write_text(json.dumps([[f"s3://bucket/mix/{folder}/part.npy",
                                  int(np.fromfile(path, dtype=np.uint16).size)]
                                 for folder, path in zip("abc", moved, strict=True)]))
    mixed = import_olmo_core(poetry, corpus="poetry", stream="mixed", run=dataclasses.replace(
        run, token_files=tuple(moved), mixture_index=index))
    assert mixed["settings"]["dataset"] == "NumpyFSLDatasetMixture"
    assert mixed["occurrences_digest"] == plain["occurrences_digest"]


@pytest.mark.parametrize("name", ["plain", "warmup", "mixture"])
def test_lost_global_indices_are_rebuilt_from_the_seed(poetry: Store, tmp_path: Path,
                                                       name: str) -> None:
    """OLMo-core's files are its PCG64 shuffle for seed + epoch: lineage rebuilds them
    with numpy alone, and the order is the same, window for window."""
    case = json.loads((FIXTURES / name / "expected.json").read_text())["settings"]
    kept = import_case(poetry, name, tmp_path)
    assert kept["checked"]["global_indices"] == ("every file is OLMo-core's shuffle for "
                                                 f"seed {case['seed']} and its epoch")
    rebuilt = import_olmo_core(poetry, corpus="poetry", stream=f"{name}-rebuilt",
                               run=dataclasses.replace(
                                   run_of(FIXTURES / name, tmp_path), global_indices=(),
                                   seed=case["seed"], epochs=case["epochs"]))
    assert rebuilt["checked"]["global_indices"] == "rebuilt"
    assert rebuilt["settings"]["global_indices"] == "rebuilt"
    assert rebuilt["occurrences_digest"] == kept["occurrences_digest"]
    assert rebuilt["schedule"] == kept["schedule"]


def _swap_two(path: Path, first: int, second: int) -> tuple[int, int]:
    """Two entries of a global indices file swapped (it stays a permutation)."""
    indices = np.fromfile(path, dtype=np.uint32)
    indices[[first, second]] = indices[[second, first]]
    indices.tofile(path)
    return int(indices[first]), int(indices[second])


def test_two_swapped_global_indices_are_refused_when_the_file_names_the_seed(
        poetry: Store, tmp_path: Path) -> None:
    """Before: a file that was still a permutation, but not OLMo-core's shuffle, was
    imported (exit 0) and only reported in `checked.global_indices`."""
    case = tmp_path / "case"
    shutil.copytree(FIXTURES / "plain", case)
    indices_file = sorted(case.glob("global_indices_*epoch2*"))[0]
    found, expected = _swap_two(indices_file, 3, 17)
    with pytest.raises(InputError, match=rf"{indices_file.name}: element 3 is {found}, "
                       rf"OLMo-core's shuffle gives {expected} for seed 7 and epoch 2 "
                       r"\(nothing stored\)"):
        import_case(poetry, "plain", tmp_path, case)
    assert poetry.streams().to_json() == "[]"
    with pytest.raises(UsageError, match="--seed 8, but the global indices were made with "
                                         "seed 7"):
        import_case(poetry, "plain", tmp_path, case, seed=8)
    with pytest.raises(UsageError, match="or --seed and --epochs to rebuild them"):
        import_case(poetry, "plain", tmp_path, case, global_indices=())


def test_two_swapped_global_indices_are_refused_when_the_seed_is_given(
        poetry: Store, tmp_path: Path) -> None:
    """Files renamed without their seed: unchecked unless --seed says it, refused then."""
    case = tmp_path / "case"
    shutil.copytree(FIXTURES / "plain", case)
    renamed = []
    for number, path in enumerate(sorted(case.glob("global_indices_*")), start=1):
        renamed.append(path.rename(case / f"order-epoch{number}.npy"))
    unchecked = import_case(poetry, "plain", tmp_path, case,
                            global_indices=tuple(renamed), stream="renamed")
    assert unchecked["status"] == "added"
    assert unchecked["checked"]["global_indices"] == (
        "not checked: the file names do not record the seed (give --seed to check them)")
    checked = import_case(poetry, "plain", tmp_path, case, global_indices=tuple(renamed),
                          seed=7, stream="seeded")
    assert checked["checked"]["global_indices"] == (
        "every file is OLMo-core's shuffle for seed 7 and its epoch")
    found, expected = _swap_two(renamed[0], 0, 1)
    with pytest.raises(InputError, match=rf"order-epoch1.npy: element 0 is {found}, "
                       rf"OLMo-core's shuffle gives {expected} for seed 7 and epoch 1 "):
        import_case(poetry, "plain", tmp_path, case, global_indices=tuple(renamed), seed=7,
                    stream="swapped")


def test_a_corpus_counted_by_a_tokenizer_is_re_read_with_it(
        store: Store, tmp_path: Path, tokenizer_json: Path) -> None:
    """Token files in a BPE tokenizer's ids: sampled documents are tokenized again with
    the corpus's tokenizer.json when it is given (and only that one)."""
    from tokenizers import Tokenizer

    from lineage.ingest import ingest_corpus

    from .make_olmo_run import SHARDS, corpus_documents

    ingest_corpus(store, [SHARDS / "sonnets.jsonl.gz", SHARDS / "poems.parquet"],
                  corpus="poetry", tokenizer=str(tokenizer_json))
    encode = Tokenizer.from_file(str(tokenizer_json))
    eos = encode.get_vocab_size()
    path = tmp_path / "bpe.npy"
    ids = [np.array([*encode.encode(text, add_special_tokens=False).ids, eos], np.uint16)
           for _, _, text in corpus_documents()]
    np.concatenate(ids).tofile(path)
    (tmp_path / "doc_ids.txt").write_text("".join(f"{d}\n" for _, d, _ in corpus_documents()))
    run = dataclasses.replace(run_of(FIXTURES / "plain", tmp_path), token_files=(path,),
                              eos_token_id=eos, doc_ids=tmp_path / "doc_ids.txt",
                              global_indices=(), seed=3, epochs=1)
    unread = import_olmo_core(store, corpus="poetry", stream="bpe", run=run)
    assert unread["checked"]["re_read"] == 0
    assert "give --tokenizer" in unread["checked"]["re_read_skipped"]
    read = import_olmo_core(store, corpus="poetry", stream="bpe-read",
                            run=dataclasses.replace(run, tokenizer=tokenizer_json))
    assert read["checked"]["re_read"] == len(ids) and "tokenizer" in read["artifacts"]
    other = tmp_path / "other.json"
    other.write_text(tokenizer_json.read_text().replace("[UNK]", "[UNKNOWN]"))
    with pytest.raises(UsageError, match="the corpus was counted with tokenizer.json:blake3"):
        import_olmo_core(store, corpus="poetry", stream="bpe-other",
                         run=dataclasses.replace(run, tokenizer=other))


def test_a_deep_mixture_index_is_refused(poetry: Store, tmp_path: Path) -> None:
    """The nesting-depth rule of every JSON reader (before: "unexpected RecursionError")."""
    index = tmp_path / "mixture.json"
    index.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="mixture.json: nesting-depth: JSON nested deeper "
                       "than 32 levels"):
        import_case(poetry, "mixture", tmp_path, mixture_index=index)


def test_verify_all_re_reads_every_document_and_names_the_window(
        poetry: Store, tmp_path: Path) -> None:
    """--verify all re-reads every document the windows read, whole (the default: 16;
    this run reads 15, so both read them all); a changed token is refused naming the
    first window that reads it."""
    run = run_of(FIXTURES / "plain", tmp_path)
    good = import_olmo_core(poetry, corpus="poetry", stream="good", run=run, verify="all")
    assert good["checked"]["verify"] == "all" and good["checked"]["re_read"] == 15
    first = run.token_files[0]
    raw = np.fromfile(first, dtype=np.uint16)
    start = int(np.flatnonzero(raw == EOS["uint16"])[0]) + 1  # document 1 of the file
    doc_id = corpus_documents()[1][1]  # the files hold the corpus's documents in order
    reader = StreamReader(poetry, "good")
    window = min(s.window for step in range(good["steps"]) for s in reader.segments(step)
                 if s.doc_id == doc_id and s.token_start <= 10 < s.token_end)
    raw[start + 10] ^= 1
    raw.tofile(first)
    with pytest.raises(InputError, match=rf"sonnets-0.npy: window {window}: document 1 "
                       rf"\('{doc_id}'\): token 10 differs from the corpus document's"):
        import_olmo_core(poetry, corpus="poetry", stream="all", run=run, verify="all")


def test_a_padded_run_through_the_command_holds_one_document_a_window(
        poetry: Store, tmp_path: Path) -> None:
    """NumpyPaddedFSLDataset: each window is the head of one document (620 tokens at
    most), and `docs --step` names, per rank, the documents OLMo-core's batches held."""
    run = run_of(FIXTURES / "padded", tmp_path)
    cli = Cli(poetry.root)
    args = ["ingest", "order", "olmo-core", *map(str, run.token_files), "--corpus", "poetry",
            "--stream", "padded", "--eos-token-id", str(run.eos_token_id),
            "--sequence-length", "620", "--global-batch-size", str(4 * 620),
            "--dataset", "padded"]
    for path in run.global_indices:
        args += ["--global-indices", str(path)]
    result = cli.json(*args)
    settings = result["settings"]
    assert settings["dataset"] == "NumpyPaddedFSLDataset"
    assert settings["paths"] == [["sonnets-0.npy", 6], ["sonnets-1.npy", 6], ["poems-0.npy", 3]]
    expected = expected_steps(FIXTURES / "padded")
    assert result["windows"] == 4 * len(expected) == result["segments"]
    documents = [doc_id for _, doc_id, _ in corpus_documents()]  # instance i = document i
    lengths = {doc_id: len(text.encode()) for _, doc_id, text in corpus_documents()}
    for step, ranks in enumerate(expected):
        for rank in range(WORLD):
            answer = cli.json("docs", "--step", str(step), "--stream", "padded", "--rank",
                              str(rank), "--world-size", str(WORLD))
            held = [documents[i] for i in ranks[rank]["indices"]]
            assert sorted((d["doc_id"], d["token_start"], d["token_end"])
                          for d in answer["documents"]) == sorted(
                (doc_id, 0, min(lengths[doc_id], 620)) for doc_id in held), (step, rank)


def test_padded_settings_that_do_not_fit_are_refused(poetry: Store, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--dataset 'vsl': expected one of fsl, padded"):
        import_case(poetry, "padded", tmp_path, dataset="vsl")
    with pytest.raises(UsageError, match="--mixture-index: a source mixture is cut into "
                                         "fixed-length instances"):
        import_case(poetry, "padded", tmp_path,
                    mixture_index=FIXTURES / "mixture" / "mixture_index.json")


def test_a_sidecar_whose_documents_are_not_the_eos_tokens_is_refused_when_padded(
        poetry: Store, tmp_path: Path) -> None:
    """An extra EOS between two documents: the sidecar still lists them right (a
    fixed-length run reads the file as before), but OLMo-core's padded dataset would
    make an instance of the empty document the EOS closes."""

    run = run_of(FIXTURES / "padded", tmp_path)
    path = run.token_files[0]
    tokens = np.fromfile(path, dtype=np.uint16)
    first_eos = int(np.flatnonzero(tokens == EOS["uint16"])[0])
    np.insert(tokens, first_eos + 1, EOS["uint16"]).astype(np.uint16).tofile(path)
    lines = sidecar_lines(path)
    write_sidecar(path, [lines[0]] + [",".join([str(int(start) + 1), str(int(end) + 1), *rest])
                                      for start, end, *rest in (line.split(",")
                                                                for line in lines[1:])])
    fixed = import_case(poetry, "plain", tmp_path, token_files=run.token_files,
                        stream="fixed-length")
    assert fixed["status"] == "added"
    with pytest.raises(InputError, match=r"sonnets-0.npy: document 1: the documents listed "
                                         r"for the file are not the ones its EOS tokens close"):
        import_case(poetry, "padded", tmp_path, token_files=run.token_files)


def test_tokens_after_the_last_eos_are_in_no_padded_instance(poetry: Store,
                                                             tmp_path: Path) -> None:
    run = run_of(FIXTURES / "padded", tmp_path)
    path = run.token_files[2]
    tokens = np.fromfile(path, dtype=np.uint16)
    np.append(tokens, np.array([72, 105], dtype=np.uint16)).tofile(path)  # unlisted, unclosed
    result = import_case(poetry, "padded", tmp_path, token_files=run.token_files)
    assert result["settings"]["paths"][2] == ["poems-0.npy", 3]
    assert result["windows"] == 4 * len(expected_steps(FIXTURES / "padded"))


def test_instances_olmo_core_masks_hold_no_document(poetry: Store, tmp_path: Path) -> None:
    """The instance filter: the windows of the instances OLMo-core's dataset masked (a
    run of 1 to 13 tokens repeated 3 times or more) hold no document, every other window
    is token for token the instance the loader yielded, for every step and rank."""
    result = import_case(poetry, "filtered", tmp_path)
    steps = expected_steps(FIXTURES / "filtered")
    masked = sum(not kept for step in steps for batch in step
                 for kept in batch["instance_mask"])
    assert result["checked"]["masked_windows"] == masked == 26
    assert result["settings"]["instance_filter"] == {
        "repetition_max_period": 13, "repetition_min_period": 1, "repetition_max_count": 3}
    run = run_of(FIXTURES / "filtered", tmp_path)
    reader, texts = StreamReader(poetry, "filtered"), corpus_texts()
    for step, ranks in enumerate(steps):
        for rank in range(WORLD):
            assert checked_rank_tokens_hash(reader, step, rank, ranks[rank], run, texts) == \
                ranks[rank]["input_ids"], (step, rank)
    unfiltered = import_case(poetry, "filtered", tmp_path, stream="unfiltered",
                             instance_filter=None)
    assert unfiltered["segments"] > result["segments"] and "instance_filter" not in \
        unfiltered["settings"]


def test_the_command_takes_the_instance_filter(poetry: Store, tmp_path: Path) -> None:
    run = run_of(FIXTURES / "filtered", tmp_path)
    cli = Cli(poetry.root)
    args = ["ingest", "order", "olmo-core", *map(str, run.token_files), "--corpus", "poetry",
            "--stream", "filtered", "--eos-token-id", str(run.eos_token_id),
            "--sequence-length", "32", "--global-batch-size", "128",
            "--global-indices", str(run.global_indices[0])]
    result = cli.json(*args, "--instance-filter", "13:1:3")
    assert result["checked"]["masked_windows"] == 26
    assert "26 masked" in cli(*args, "--instance-filter", "13:1:3").stdout
    wrong = cli(*args, "--instance-filter", "13:1", code=2)
    assert "--instance-filter '13:1': give MAX_PERIOD:MIN_PERIOD:MAX_COUNT" in wrong.stderr
    assert "Traceback" not in wrong.stderr


def test_a_max_target_sequence_length_keeps_whole_chunks_of_it(poetry: Store,
                                                                tmp_path: Path) -> None:
    """max_target_sequence_length 160 with sequence_length 32: each file holds the five
    instances of each whole 160-token chunk, so the tail past the last one is not read
    (715 instances, where the 32-token cut alone gives 719)."""
    result = import_case(poetry, "target", tmp_path)
    run = run_of(FIXTURES / "target", tmp_path)
    sizes = [np.fromfile(path, dtype=np.uint16).size for path in run.token_files]
    assert result["settings"]["paths"] == [
        [path.name, size // 160 * 5] for path, size in zip(run.token_files, sizes, strict=True)]
    assert sum(size // 160 * 5 for size in sizes) == 715 < sum(size // 32 for size in sizes)
    assert result["settings"]["max_target_sequence_length"] == 160
    with pytest.raises(UsageError, match="--max-target-sequence-length 48: must be a multiple "
                                         "of --sequence-length 32"):
        import_case(poetry, "target", tmp_path, max_target_sequence_length=48)
    with pytest.raises(UsageError, match="a padded dataset makes one instance of each "
                                         "document"):
        import_case(poetry, "padded", tmp_path, max_target_sequence_length=1240)


@pytest.mark.parametrize("name", ["bos", "bos-padded", "interleaved", "packed",
                                  "packed-grouped", "packed-filtered",
                                  "interleaved-filtered"])
def test_every_window_is_the_instance_olmo_core_cut_from_the_token_files(
        poetry: Store, tmp_path: Path, name: str) -> None:
    """Runs whose windows hold tokens of no document besides EOS: documents opened by a
    BOS token (fixed-length and padded), and masked instances. Every step and rank: each
    window is the instance cut from the token files, lineage's segments are its document
    tokens exactly, and the batch hashes as OLMo-core's did."""
    result = import_case(poetry, name, tmp_path)
    run = run_of(FIXTURES / name, tmp_path)
    if run.bos_token_id is not None:
        assert result["settings"]["bos_token_id"] == run.bos_token_id
    reader, texts = StreamReader(poetry, name), corpus_texts()
    for step, ranks in enumerate(expected_steps(FIXTURES / name)):
        for rank in range(WORLD):
            assert checked_rank_tokens_hash(reader, step, rank, ranks[rank], run, texts) == \
                ranks[rank]["input_ids"], (step, rank)


def test_a_document_without_its_bos_is_named(poetry: Store, tmp_path: Path) -> None:
    run = run_of(FIXTURES / "bos", tmp_path)
    tokens = np.fromfile(run.token_files[1], dtype=np.uint16)
    second = int(np.flatnonzero(tokens == EOS["uint16"])[0]) + 1
    tokens[second] = ord("x")  # the second document's BOS overwritten
    tokens.tofile(run.token_files[1])
    with pytest.raises(InputError, match=r"sonnets-1.npy: document 1 \(from token \d+\) does "
                                         r"not open with the BOS token 258"):
        import_case(poetry, "bos", tmp_path, token_files=run.token_files)


@pytest.mark.parametrize("name", ["bos", "bos-padded"])
def test_without_sidecars_bos_runs_split_where_an_eos_meets_a_bos(
        poetry: Store, tmp_path: Path, name: str) -> None:
    """The same runs with their sidecars gone and a doc_id list instead: the documents
    are found as OLMo-core finds them, at an EOS followed by a BOS, and the stream is the
    same occurrence for occurrence."""
    with_sidecars = import_case(poetry, name, tmp_path)
    run = run_of(FIXTURES / name, tmp_path)
    listed = tmp_path / "doc_ids.txt"
    listed.write_text("".join(f"{doc_id}\n" for _, doc_id, _ in corpus_documents()))
    for path in run.token_files:
        path.with_name(path.name.replace(".npy", ".csv.gz")).unlink()
    without = import_case(poetry, name, tmp_path, stream=f"{name}-listed", doc_ids=listed,
                          token_files=run.token_files)
    assert without["settings"]["document_boundaries"] == "eos"
    assert without["occurrences_digest"] == with_sidecars["occurrences_digest"]


def test_the_command_imports_an_interleaved_run(poetry: Store, tmp_path: Path) -> None:
    run = run_of(FIXTURES / "interleaved", tmp_path)
    cli = Cli(poetry.root)
    args = ["ingest", "order", "olmo-core", *map(str, run.token_files), "--corpus", "poetry",
            "--stream", "mixed", "--eos-token-id", str(run.eos_token_id),
            "--bos-token-id", str(run.bos_token_id), "--pad-token-id", str(run.pad_token_id),
            "--sequence-length", "64", "--global-batch-size", "256",
            "--global-indices", str(run.global_indices[0]), "--dataset", "interleaved",
            "--docs-per-instance", "2", "--chunks-per-doc", "4"]
    missing = cli(*args, code=2)
    assert "takes --docs-per-instance, --chunks-per-doc and --interleaving-seed together" in \
        missing.stderr
    result = cli.json(*args, "--interleaving-seed", "43",
                      "--interleaving-exempt", str(run.token_files[1]))
    assert result["settings"]["dataset"] == "NumpyInterleavedFSLDataset"
    assert result["settings"]["interleaving"] == {
        "docs_per_instance": 2, "chunks_per_doc": 4, "seed": 43, "exempt_files": [1]}
    assert result["spec_hash"] == import_case(poetry, "interleaved", tmp_path,
                                              stream="again")["spec_hash"]


def test_interleaved_settings_that_do_not_fit_are_refused(poetry: Store,
                                                          tmp_path: Path) -> None:
    from lineage.ingest.orders.olmo_interleaved import Interleaving

    with pytest.raises(UsageError, match="--sequence-length 64 must be a multiple of"):
        import_case(poetry, "interleaved", tmp_path, interleaving=Interleaving(3, 4, 43))
    with pytest.raises(UsageError, match="--dataset interleaved takes"):
        import_case(poetry, "padded", tmp_path, interleaving=Interleaving(2, 4, 43))
    run = run_of(FIXTURES / "interleaved", tmp_path)
    tokens = np.fromfile(run.token_files[0], dtype=np.uint16)
    tokens[5] = EOS["uint16"] + 1  # the padding token inside the first sonnet's first line
    tokens.tofile(run.token_files[0])
    with pytest.raises(InputError, match=r"sonnets-a.npy: document 0 holds the special token "
                                         r"257 at its token 4, which interleaving would drop"):
        import_case(poetry, "interleaved", tmp_path, token_files=run.token_files)


def test_packed_settings_that_do_not_fit_are_refused(poetry: Store, tmp_path: Path) -> None:
    from lineage.ingest.orders.olmo_filter import InstanceFilter
    from lineage.ingest.orders.olmo_packed import Packing

    with pytest.raises(UsageError, match="--sequence-length 620: packing needs a power of 2"):
        import_case(poetry, "padded", tmp_path, dataset="packed", packing=Packing())
    with pytest.raises(UsageError, match="--long-doc-strategy 'drop': expected one of"):
        import_case(poetry, "packed", tmp_path, packing=Packing("drop"))
    with pytest.raises(UsageError, match="--instance-filter with --dataset packed needs "
                                         "--pad-token-id"):
        import_case(poetry, "packed", tmp_path, instance_filter=InstanceFilter(),
                    pad_token_id=None)
    run = run_of(FIXTURES / "packed", tmp_path)
    refused = Cli(poetry.root)(
        "ingest", "order", "olmo-core", *map(str, run.token_files), "--corpus", "poetry",
        "--stream", "p", "--eos-token-id", "256", "--sequence-length", "512",
        "--global-batch-size", "1024", "--long-doc-strategy", "fragment", code=2)
    assert "--long-doc-strategy and --source-group-size are settings of --dataset packed" in \
        refused.stderr
    result = Cli(poetry.root).json(
        "ingest", "order", "olmo-core", *map(str, run.token_files), "--corpus", "poetry",
        "--stream", "p", "--eos-token-id", "256", "--sequence-length", "512",
        "--global-batch-size", "1024", "--dataset", "packed", "--long-doc-strategy",
        "fragment", *[arg for path in run.global_indices
                      for arg in ("--global-indices", str(path))])
    assert result["settings"]["packing"] == {"long_doc_strategy": "fragment",
                                             "source_group_size": 1}
    assert result["spec_hash"] == import_case(poetry, "packed", tmp_path,
                                              stream="again")["spec_hash"]
