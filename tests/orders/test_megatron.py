"""The Megatron importer on runs megatron-core built (tests/orders/fixtures/megatron,
written by make_megatron_run.py): read back token for token as megatron-core's datasets
yield their samples (`samples-<run>.npy`, recorded from megatron-core), steps and ranks
as the run cut them, every broken file refused with nothing stored. No torch and no
megatron needed: test_megatron_proof.py checks the same against megatron-core itself."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lineage.api import Store
from lineage.errors import InputError, UsageError
from lineage.ingest import ingest_corpus
from lineage.ingest.orders.megatron import MegatronRun, import_megatron
from lineage.ingest.orders.megatron_schedule import Rampup, megatron_schedule
from lineage.stream.reader import StreamReader

from .conftest import documents_of, holding

FIXTURES = Path(__file__).with_name("fixtures") / "megatron"
SINGLE = MegatronRun(global_batch_size=8, micro_batch_size=2, data_parallel_size=2)
BLEND = MegatronRun(global_batch_size=12, micro_batch_size=2, data_parallel_size=2,
                    rampup=Rampup(4, 4, 40))
NAMES = {"single": ["sonnets"], "blend": ["sonnets", "poems"]}


@pytest.fixture(scope="module")
def corpus_template(fresh_store: Callable[[Path], Store],
                    tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = fresh_store(tmp_path_factory.mktemp("mg") / "store")
    ingest_corpus(store, [FIXTURES / "sonnets.jsonl", FIXTURES / "poems.jsonl"], corpus="mg")
    return store.root


@pytest.fixture
def corpus(store: Store, corpus_template: Path) -> Store:
    """The test's store holding corpus `mg` (the fixtures' sonnets and poems)."""
    return holding(store, corpus_template)


@pytest.fixture
def copied(tmp_path: Path) -> Path:
    """A copy of the fixtures to break."""
    return Path(shutil.copytree(FIXTURES, tmp_path / "megatron"))


def _import(store: Store, run: str, folder: Path = FIXTURES, **options: Any) -> dict[str, Any]:
    settings = options.pop("settings", SINGLE if run == "single" else BLEND)
    return import_megatron(
        store, data=[folder / n for n in NAMES[run]],
        docs=[folder / f"{n}.jsonl" for n in NAMES[run]],
        cache=options.pop("cache", folder / f"cache-{run}"), corpus="mg",
        stream=options.pop("stream", run), run=settings, **options)


@pytest.mark.parametrize("run", ["single", "blend"])
def test_windows_are_the_samples_megatron_yields(corpus: Store, run: str) -> None:
    answer = _import(corpus, run)
    samples = np.load(FIXTURES / f"samples-{run}.npy")
    reader = StreamReader(corpus, run)
    ours = [np.asarray(w) for step in range(answer["steps"]) for w in reader.windows(step)]
    assert len(ours) == answer["windows"] <= len(samples)
    for index, window in enumerate(ours):
        assert np.array_equal(window, samples[index]), index


def test_the_answer_names_the_files_the_schedule_and_the_rule(corpus: Store) -> None:
    answer = _import(corpus, "blend")
    assert answer["status"] == "added" and answer["framework"] == "megatron"
    assert answer["seq_len"] == 32  # sequence_length 31 + the extra label token
    assert answer["schedule"] == [[0, 4], [5, 8], [8, 12]]
    assert answer["rank_rule"] == {"micro_batch": 2, "rule": "micro-batches"}
    assert answer["windows"] == 320 and answer["steps"] == 31
    cached = sorted(p.name for p in (FIXTURES / "cache-blend").iterdir())
    assert sorted(answer["artifacts"]) == sorted([*cached, "poems.idx", "sonnets.idx"])
    from lineage.ingest.orders.common import artifact_hash
    assert answer["artifacts"]["poems.idx"] == artifact_hash(FIXTURES / "poems.idx")
    settings = answer["settings"]
    assert settings["rampup_batch_size"] == [4, 4, 40] and settings["random_seed"] == 1234
    assert [d["append_eod"] for d in settings["datasets"]] == [True, True]
    assert settings["blend_weights"] == [0.6, 0.4]
    assert answer["checked"]["status"] == "equal to the corpus's tokens"
    assert answer["checked"]["windows"][0] == 0 and answer["checked"]["windows"][-1] == 319
    assert _import(corpus, "blend")["status"] == "unchanged"


def test_ranks_take_micro_batches_in_turn(corpus: Store) -> None:
    _import(corpus, "blend")
    for step, first, size in ((0, 0, 4), (6, 28, 8), (9, 56, 12)):
        windows = [imported_windows(corpus, step, rank) for rank in (0, 1)]
        groups = [list(range(first + m * 2, first + m * 2 + 2)) for m in range(size // 2)]
        assert windows[0] == [w for g in groups[0::2] for w in g]
        assert windows[1] == [w for g in groups[1::2] for w in g]


def imported_windows(store: Store, step: int, rank: int) -> list[int]:
    answer = json.loads(store.docs_in_step(step, stream="blend", rank=rank,
                                           world_size=2).to_json())
    assert answer["rank_rule"] == {"micro_batch": 2, "rule": "micro-batches"}
    return list(answer.get("rank_windows") or range(answer["windows"][0],
                                                     answer["windows"][1] + 1))


def test_batch_digests_follow_the_micro_batch_ranks(corpus: Store) -> None:
    """The digests `chain verify --batches` compares are cut by the same rank rule:
    each rank's digest is that of the segments `docs --step --rank` lists for it."""
    from lineage.stream.batch_digest import batch_digest

    _import(corpus, "blend")
    reader = StreamReader(corpus, "blend")
    for step in (0, 6, 20):
        digests = reader.batch_digests(step, world_size=2)
        for rank in (0, 1):
            rows = json.loads(corpus.docs_in_step(step, stream="blend", rank=rank,
                                                  world_size=2).to_json())["documents"]
            assert digests[rank] == batch_digest(rows), (step, rank)
        assert digests[0] != digests[1]


def test_train_iters_keeps_the_first_steps(corpus: Store) -> None:
    answer = _import(corpus, "single", settings=MegatronRun(8, 2, 2, train_iters=10))
    assert answer["steps"] == 10 and answer["windows"] == 80
    with pytest.raises(UsageError, match="--train-iters 51: the run asked for 400 samples, "
                       "50 whole steps"):
        _import(corpus, "single", stream="more", settings=MegatronRun(8, 2, 2, train_iters=51))


def test_trained_on_finds_a_sonnet_in_its_windows(corpus: Store, tmp_path: Path) -> None:
    _import(corpus, "single")
    text = json.loads((FIXTURES / "sonnets.jsonl").read_text().splitlines()[2])["text"]
    sample = tmp_path / "sonnet.txt"
    sample.write_text(text, encoding="utf-8")
    found = json.loads(corpus.trained_on([str(sample)], stream="single").to_json())
    result = found["results"][0]
    assert result["verdict"] == "in-stream"
    samples = np.load(FIXTURES / "samples-single.npy")[:400]
    grams = {bytes(g) for g in np.lib.stride_tricks.sliding_window_view(
        np.frombuffer(text.encode(), dtype=np.uint8), 24)}
    holding = [i for i, s in enumerate(samples) if any(
        s[j:j + 24].max() < 256 and bytes(s[j:j + 24].astype(np.uint8)) in grams
        for j in range(len(s) - 23))]
    match = result["matches"][0]
    assert match["doc_id"] == "sonnet-003" and holding
    # every sample of Megatron's holding 24 tokens of the sonnet is listed
    assert set(holding) <= set(match["windows"])
    assert match["steps"] == sorted({w // 8 for w in match["windows"]})


# --- what is refused, nothing stored --------------------------------------------


def _refused(store: Store, match: str, run: str = "blend", **options: Any) -> None:
    with pytest.raises((InputError, UsageError), match=match):
        _import(store, run, **options)
    assert store.streams().to_json() == "[]"


def test_a_truncated_bin_is_refused(corpus: Store, copied: Path) -> None:
    with (copied / "poems.bin").open("r+b") as handle:
        handle.truncate(100)
    _refused(corpus, "poems.bin: 100 bytes where the .idx's lengths make 10512",
             folder=copied)


def test_changed_tokens_in_the_bin_are_found(corpus: Store, copied: Path) -> None:
    data = np.fromfile(copied / "sonnets.bin", dtype=np.uint16)
    np.where(data < 256, data ^ 1, data).astype(np.uint16).tofile(copied / "sonnets.bin")
    _refused(corpus, r"sonnets.bin: window 0: tokens .* differ", folder=copied)


def test_a_document_list_of_another_length_is_refused(corpus: Store, copied: Path) -> None:
    lines = (copied / "poems.jsonl").read_text().splitlines()
    (copied / "poems.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    _refused(corpus, "poems.jsonl: lists 7 documents, poems.idx holds 8", folder=copied)


def test_idx_lengths_must_match_the_corpus(store: Store, copied: Path) -> None:
    rows = [json.loads(line) for line in (copied / "sonnets.jsonl").read_text().splitlines()]
    rows[3]["text"] += " (added)"
    (copied / "sonnets.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ingest_corpus(store, [copied / "sonnets.jsonl", copied / "poems.jsonl"], corpus="mg")
    _refused(store, r"sonnets.idx: document 3 \('sonnet-004'\) holds 594 tokens; the corpus "
             r"counts 601 \+ 1 appended EOD", folder=copied)


def test_a_shuffle_index_out_of_bounds_is_refused(corpus: Store, copied: Path) -> None:
    path = next((copied / "cache-single").glob("*-shuffle_index.npy"))
    shuffle = np.load(path)
    expected = int(shuffle[7])
    shuffle[7] = 10_000
    np.save(path, shuffle)
    _refused(corpus, rf"shuffle_index.npy: element 7 is 10000, megatron-core's builder "
             rf"gives {expected} from the description's seed 1234 \(nothing stored\)",
             run="single", folder=copied)


def test_a_document_index_outside_the_split_is_refused(corpus: Store, copied: Path) -> None:
    path = next((copied / "cache-single").glob("*-document_index.npy"))
    documents = np.load(path)
    documents[3] = 10  # sonnets.idx holds sequences 0..9, all in the train split
    np.save(path, documents)
    _refused(corpus, r"document_index.npy: element 3 is 10, megatron-core's builder gives",
             run="single", folder=copied)


def _flip_bit(path: Path, element: int, column: int = 0) -> tuple[int, int]:
    """One bit of one element of a cached .npy flipped in place, as a disk or a copy
    would: (the element's value before, after)."""
    array = np.load(path)
    row = array.reshape(len(array), -1)
    data = bytearray(path.read_bytes())
    at = len(data) - array.nbytes + (element * row.shape[1] + column) * array.itemsize
    data[at] ^= 1
    path.write_bytes(bytes(data))
    return int(row[element, column]), int(np.load(path).reshape(len(array), -1)[element, column])


@pytest.mark.parametrize(("kind", "array", "element", "column"), [
    ("BlendedDataset", "dataset_index", 5, 0),
    ("BlendedDataset", "dataset_sample_index", 11, 0),
    ("GPTDataset", "shuffle_index", 4, 0),
    ("GPTDataset", "document_index", 2, 0),
    ("GPTDataset", "sample_index", 9, 1),
])
def test_one_flipped_bit_in_a_cached_array_is_refused_naming_it(
        corpus: Store, copied: Path, kind: str, array: str, element: int, column: int) -> None:
    """A cache whose arrays still index valid samples, but not megatron-core's: before,
    imported with exit 0 (and `docs --step` named the wrong documents)."""
    path = sorted((copied / "cache-blend").glob(f"*-{kind}-train-{array}.npy"))[0]
    before, after = _flip_bit(path, element, column)
    maker = "blending" if kind == "BlendedDataset" else "builder"
    shown = (f"element {element} is {after}" if array != "sample_index"
             else rf"element {element} is \(\d+, {after}\)")
    expected = str(before) if array != "sample_index" else rf"\(\d+, {before}\)"
    _refused(corpus, rf"{path.name}: {shown}, megatron-core's {maker} gives {expected} ",
             folder=copied)


def test_a_truncated_cached_array_is_refused(corpus: Store, copied: Path) -> None:
    path = next((copied / "cache-blend").glob("*-dataset_sample_index.npy"))
    np.save(path, np.load(path)[:-1])
    _refused(corpus, r"dataset_sample_index.npy: holds 319 elements, megatron-core's "
             r"blending gives 320 from the description's weights \[0.6, 0.4\] and size 320",
             folder=copied)


def test_a_description_without_its_split_is_refused(corpus: Store, copied: Path) -> None:
    import hashlib

    [path] = (copied / "cache-single").glob("*-description.txt")
    description = json.loads(path.read_text())
    del description["split_matrix"]
    text = json.dumps(description, indent=4)
    digest = hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()
    for old in list((copied / "cache-single").iterdir()):
        old.rename(old.with_name(digest + old.name[len(digest):]))
    (copied / "cache-single" / f"{digest}-GPTDataset-train-description.txt").write_text(text)
    _refused(corpus, "description.txt: the description lacks split_matrix", run="single",
             folder=copied)


def test_a_pickled_array_is_refused(corpus: Store, copied: Path) -> None:
    path = next((copied / "cache-single").glob("*-document_index.npy"))
    np.save(path, np.array([{"not": "numbers"}], dtype=object), allow_pickle=True)
    _refused(corpus, "document_index.npy: not a plain .npy array", run="single",
             folder=copied)


def test_a_description_that_does_not_match_its_name_is_refused(
        corpus: Store, copied: Path) -> None:
    path = next((copied / "cache-single").glob("*-description.txt"))
    path.write_text(path.read_text().replace("1234", "4321"))
    _refused(corpus, "the description's MD5 differs", run="single", folder=copied)


def test_a_prefix_the_run_did_not_read_is_refused(corpus: Store) -> None:
    with pytest.raises(UsageError, match="the run read dataset 'poems'"):
        import_megatron(corpus, data=[FIXTURES / "sonnets"], docs=[FIXTURES / "sonnets.jsonl"],
                        cache=FIXTURES / "cache-blend", corpus="mg", stream="b", run=BLEND)


def test_a_batch_megatron_would_refuse_is_refused(corpus: Store) -> None:
    _refused(corpus, r"global batch 6 is not divisible by micro batch times data-parallel "
             r"size \(4\)", run="single", settings=MegatronRun(6, 2, 2))


# --- a lost cache: what is recorded to rebuild it, and what a rebuild refuses -----


@pytest.mark.parametrize("run", ["single", "blend"])
def test_the_stream_records_megatrons_own_description_of_the_cache(
        corpus: Store, run: str) -> None:
    answer = _import(corpus, run)
    top = "BlendedDataset" if run == "blend" else "GPTDataset"
    [written] = (FIXTURES / f"cache-{run}").glob(f"*-{top}-train-description.txt")
    assert answer["settings"]["cache_description"] == json.loads(written.read_text())
    assert answer["artifacts"][written.name].startswith("blake3:")


def test_a_rebuild_needs_the_stream_imported_before(corpus: Store, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no stream 'single'.*while its cache exists"):
        _import(corpus, "single", rebuild=True, cache=tmp_path / "rebuilt")
    assert not (tmp_path / "rebuilt").exists()


def test_a_stream_imported_without_the_description_cannot_be_rebuilt(
        corpus: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lineage.ingest.orders import megatron

    recorded = megatron._settings

    def as_before(*args: Any) -> dict[str, Any]:  # what lineage recorded before it kept one
        settings = recorded(*args)
        del settings["cache_description"]
        return settings

    monkeypatch.setattr(megatron, "_settings", as_before)
    _import(corpus, "single")
    monkeypatch.undo()
    with pytest.raises(UsageError, match="records no Megatron cache description"):
        _import(corpus, "single", rebuild=True, cache=tmp_path / "rebuilt")


def test_a_rebuild_writes_into_a_folder_without_a_cache(corpus: Store) -> None:
    _import(corpus, "single")
    with pytest.raises(UsageError, match="cache-single already holds one"):
        _import(corpus, "single", rebuild=True)


def test_a_rebuild_without_megatron_core_says_what_to_install(
        corpus: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _import(corpus, "single")
    for name in ("torch", "megatron"):  # as if they were not installed
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(UsageError, match="pip install torch megatron-core"):
        _import(corpus, "single", rebuild=True, cache=tmp_path / "rebuilt")
    assert not (tmp_path / "rebuilt").exists()


# --- the batch-size schedule --------------------------------------------------------


def test_schedules_follow_megatrons_calculator_rules() -> None:
    assert megatron_schedule(8, 2, 2).segments == ((0, 8),)
    assert megatron_schedule(12, 2, 2, Rampup(4, 4, 40)).segments == ((0, 4), (5, 8), (8, 12))
    # 10 is rounded down to 8 with --decrease-batch-size-if-needed, else refused
    assert megatron_schedule(10, 2, 2, decrease_if_needed=True).segments == ((0, 8),)
    with pytest.raises(UsageError, match="not divisible"):
        megatron_schedule(10, 2, 2)
    with pytest.raises(UsageError, match="positive multiple of the increment"):
        megatron_schedule(12, 2, 2, Rampup(4, 3, 40))


# --- the CLI ------------------------------------------------------------------------


def test_cli_imports_and_answers_docs_by_rank(cli: Any, corpus: Store) -> None:
    args = ["ingest", "order", "megatron", "--data", str(FIXTURES / "sonnets"),
            "--data", str(FIXTURES / "poems"), "--docs", str(FIXTURES / "sonnets.jsonl"),
            "--docs", str(FIXTURES / "poems.jsonl"), "--cache", str(FIXTURES / "cache-blend"),
            "--corpus", "mg", "--stream", "blend", "--global-batch-size", "12",
            "--micro-batch-size", "2", "--data-parallel-size", "2",
            "--rampup-batch-size", "4", "4", "40"]
    out = cli.json(*args)
    assert out["status"] == "added" and out["steps"] == 31
    docs = cli.json("docs", "--step", "6", "--stream", "blend", "--rank", "1",
                    "--world-size", "2")
    assert docs["step_windows"] == [28, 35] and docs["rank_windows"] == [30, 31, 34, 35]
    text = cli(*args)
    assert "stream blend: unchanged: 320 windows in 31 steps (schedule 0:4,5:8,8:12, rank " \
        "rule micro-batches:2)" in text.stdout


def test_cli_refuses_a_broken_run_with_exit_2(cli: Any, corpus: Store, copied: Path) -> None:
    (copied / "sonnets.idx").write_bytes(b"not an index")
    result = cli("ingest", "order", "megatron", "--data", str(copied / "sonnets"), "--docs",
                 str(copied / "sonnets.jsonl"), "--cache", str(copied / "cache-single"),
                 "--corpus", "mg", "--stream", "s", "--global-batch-size", "8",
                 "--micro-batch-size", "2", code=2)
    assert "sonnets.idx" in result.stderr and "MMIDIDX" in result.stderr
    assert "Traceback" not in result.stderr
    assert cli.json("stream", "list") == []


def test_deep_json_in_the_preprocessing_input_is_refused(corpus: Store, copied: Path) -> None:
    """The nesting-depth rule of every JSON reader (before: "unexpected RecursionError")."""
    lines = (copied / "poems.jsonl").read_text().splitlines()
    lines[2] = '{"id": "x", "deep": ' + "[" * 100_000 + "]" * 100_000 + "}"
    (copied / "poems.jsonl").write_text("\n".join(lines) + "\n")
    _refused(corpus, "poems.jsonl:line 3: nesting-depth: JSON nested deeper than 32 levels",
             folder=copied)


# --- --verify all: every window re-read ---------------------------------------------


def _change_one_token(copied: Path, document: int, offset: int) -> None:
    """Token `offset` of Megatron document `document` of the sonnets' .bin, changed."""
    from lineage.ingest.orders.indexed import read_indexed

    data = read_indexed(copied / "sonnets")
    raw = np.fromfile(copied / "sonnets.bin", dtype=np.uint16)
    raw[int(data.sequence_pointers[data.document_indices[document]]) // 2 + offset] ^= 1
    raw.tofile(copied / "sonnets.bin")


def _first_window_reading(store: Store, stream: str, doc_id: str, token: int) -> int:
    reader = StreamReader(store, stream)
    return min(s.window for step in range(store.stream(stream).steps)
               for s in reader.segments(step)
               if s.doc_id == doc_id and s.token_start <= token < s.token_end)


def test_verify_all_finds_one_changed_token_the_sample_misses(
        corpus: Store, copied: Path) -> None:
    """One changed token of a window the default's 16 do not re-read: imported as
    before, refused by --verify all naming the first window that reads it."""
    _import(corpus, "blend", folder=copied, stream="good")
    window = _first_window_reading(corpus, "good", "sonnet-005", 300)
    _change_one_token(copied, 4, 300)
    assert _import(corpus, "blend", folder=copied, stream="sampled")["status"] == "added"
    with pytest.raises(InputError, match=rf"sonnets.bin: window {window}: document 4 "
                       r"\('sonnet-005'\): token 300 differs from the corpus document's "
                       r"\(--verify all; nothing stored\)"):
        _import(corpus, "blend", folder=copied, stream="all", verify="all")


def test_verify_all_reads_every_document_of_the_windows(corpus: Store) -> None:
    answer = _import(corpus, "blend", verify="all")
    checked = answer["checked"]
    assert checked["windows"] == "all" and checked["status"] == "equal to the corpus's tokens"
    assert checked["documents"] == 18  # the 10 sonnets and 8 poems, each once
    assert checked["tokens"] == sum(n for _, n in documents_of(corpus, "mg"))
    with pytest.raises(UsageError, match="--verify 'some'"):
        _import(corpus, "blend", stream="x", verify="some")


def test_cli_verify_all_says_what_it_re_read(cli: Any, corpus: Store) -> None:
    result = cli("ingest", "order", "megatron", "--data", str(FIXTURES / "sonnets"),
                 "--docs", str(FIXTURES / "sonnets.jsonl"), "--cache",
                 str(FIXTURES / "cache-single"), "--corpus", "mg", "--stream", "s",
                 "--global-batch-size", "8", "--micro-batch-size", "2", "--verify", "all")
    assert "re-read every window (10 documents, 6,177 tokens): equal to the corpus's " \
        "tokens" in result.stdout


def test_a_cyclic_loader_reads_past_one_epoch_and_bad_settings_are_usage_errors(
        corpus: Store) -> None:
    """Without torch: a cyclic run may train more steps than its samples fill (the
    loader starts over), every rank reading whole shuffled epochs; an unknown loader
    type, and a permutation too long for torch's short-range shuffle, are refused."""
    from lineage.ingest.orders.megatron_cyclic import (
        RANDPERM_LIMIT,
        cyclic_samples,
        torch_randperm,
    )

    cyclic = MegatronRun(global_batch_size=8, micro_batch_size=2, data_parallel_size=2,
                         train_iters=120, dataloader_type="cyclic")
    result = _import(corpus, "single", settings=cyclic, stream="cyclic")
    assert result["steps"] == 120 and result["windows"] == 960
    read = cyclic_samples(400, 2, 2, 800)  # two epochs of the sharded buckets
    for epoch in read.reshape(2, 100, 2, 2):
        for rank, bucket in enumerate(np.swapaxes(epoch, 0, 1)):
            assert sorted(bucket.reshape(-1).tolist()) == list(range(rank * 200,
                                                                     rank * 200 + 200))
    with pytest.raises(UsageError, match="--dataloader-type 'external': expected one of "
                                         "single, cyclic"):
        _import(corpus, "single", settings=MegatronRun(8, 2, 2, dataloader_type="external"))
    with pytest.raises(UsageError, match="torch draws those of 214,748,364 or more"):
        torch_randperm(RANDPERM_LIMIT, 0)


def test_resumes_that_do_not_fit_are_usage_errors(corpus: Store) -> None:
    from tests.conftest import Cli

    with pytest.raises(UsageError, match="a resume at step 0 with global batch 8"):
        megatron_schedule(8, 2, 2, resumes=((0, 8),))
    with pytest.raises(UsageError, match="a resume at step 3 with global batch 8"):
        megatron_schedule(8, 2, 2, resumes=((5, 16), (3, 8)))
    assert megatron_schedule(8, 2, 2, resumes=((5, 16), (9, 8))).segments == (
        (0, 8), (5, 16), (9, 8))
    wrong = Cli(corpus.root)(
        "ingest", "order", "megatron", "--data", str(FIXTURES / "sonnets"), "--docs",
        str(FIXTURES / "sonnets.jsonl"), "--cache", str(FIXTURES / "cache-single"),
        "--corpus", "mg", "--stream", "s", "--global-batch-size", "8",
        "--micro-batch-size", "2", "--resumed-at", "ten:16", code=2)
    assert "--resumed-at 'ten:16': give STEP:GLOBAL_BATCH" in wrong.stderr
    assert "Traceback" not in wrong.stderr
