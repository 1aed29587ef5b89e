"""Against the real OLMo-core: a fresh run made now by its dataset, data loader and
batch-size warm-up callback must match the committed fixtures byte for byte, and the
windows lineage imports from it must be, token for token, its loader's batches."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.stream.reader import StreamReader

from .make_olmo_run import CASES, EOS, FIXTURES, WORLD, make_case
from .olmo_helpers import (
    checked_rank_tokens_hash,
    copy_of,
    corpus_texts,
    import_case,
    poetry_template,
    rank_tokens_hash,
    run_of,
    segment_tokens_hash,
    steps_to_check,
)

pytest.importorskip("olmo_core", reason="ai2-olmo-core is not installed: the importer is "
                    "still checked against the committed runs it made (test_olmo_core.py)")


@pytest.fixture(scope="module")
def poetry_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return poetry_template(tmp_path_factory)


@pytest.fixture
def poetry(poetry_store: Path, tmp_path: Path) -> Store:
    """A store of its own holding corpus `poetry`."""
    return copy_of(poetry_store, tmp_path)


@pytest.fixture(scope="module")
def fresh_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("olmo-runs")
    for name in CASES:
        make_case(name, out, out / "tokens")
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_olmo_core_writes_the_committed_run_again(fresh_runs: Path, name: str) -> None:
    committed = sorted(p.name for p in (FIXTURES / name).iterdir())
    assert sorted(p.name for p in (fresh_runs / name).iterdir()) == committed
    for file in committed:
        assert (fresh_runs / name / file).read_bytes() == (FIXTURES / name / file).read_bytes()


@pytest.mark.parametrize("name", list(CASES))
def test_every_step_and_rank_of_a_fresh_run(poetry: Store, fresh_runs: Path, tmp_path: Path,
                                            name: str) -> None:
    store = poetry
    result = import_case(store, name, tmp_path, fresh_runs / name)
    expected = json.loads((fresh_runs / name / "expected.json").read_text())
    assert result["steps"] == len(expected["steps"])
    reader = StreamReader(store, name)
    eos, texts = EOS[CASES[name]["dtype"]], corpus_texts()
    padded = CASES[name].get("dataset") == "padded"
    run = run_of(fresh_runs / name, tmp_path)
    for step, ranks in enumerate(expected["steps"]):
        for rank in range(WORLD):
            ours = (checked_rank_tokens_hash(reader, step, rank, ranks[rank], run, texts)
                    if {"instance_filter", "bos", "interleaving", "packing"} & set(CASES[name]) else
                    segment_tokens_hash(reader, step, rank, WORLD, eos, texts, padded))
            assert ours == ranks[rank]["input_ids"], (step, rank)
    if {"instance_filter", "bos", "interleaving", "packing"} & set(CASES[name]):
        return  # the reader's windows hold no masked instance, BOS or interleaving's EOS
    for step in steps_to_check(len(expected["steps"]))[::4]:  # the reader's own tokens
        assert rank_tokens_hash(reader, step, 1, WORLD, eos, padded) == \
            expected["steps"][step][1]["input_ids"], step


@pytest.mark.parametrize("chunk", [1, 3])
def test_the_shuffle_lineage_checks_is_olmo_cores_loaders(tmp_path: Path, chunk: int) -> None:
    """`NumpyFSLDataLoader._build_global_indices` of OLMo-core itself, for two epochs,
    with and without a chunk size: the global indices lineage compares files with."""
    from olmo_core.data import DataCollator, NumpyFSLDataLoader

    from lineage.ingest.orders.olmo_order import olmo_shuffle

    from .make_olmo_run import _dataset, write_token_files

    case = CASES["plain"]
    dataset = _dataset(case, write_token_files(tmp_path / "tokens", case["dtype"]), tmp_path)
    loader = NumpyFSLDataLoader(dataset, chunk_size=chunk, global_batch_size=4 * 32,
                                collator=DataCollator(pad_token_id=0), work_dir=tmp_path,
                                seed=case["seed"], num_threads=0)
    for epoch in (1, 2):
        loader.reshuffle(epoch)
        theirs = np.asarray(loader._build_global_indices())
        ours = olmo_shuffle(len(dataset), case["seed"], epoch, chunk)
        assert np.array_equal(ours, theirs), epoch


@settings(max_examples=300, deadline=None)
@given(tokens=st.lists(st.integers(0, 3), max_size=120), repeat=st.tuples(
    st.integers(0, 119), st.lists(st.integers(0, 60), min_size=1, max_size=7),
    st.integers(0, 20)), periods=st.tuples(st.integers(1, 13), st.integers(1, 13)),
    count=st.integers(1, 12))
def test_the_instance_filter_masks_what_olmo_cores_does(
        tokens: list[int], repeat: tuple[int, list[int], int], periods: tuple[int, int],
        count: int) -> None:
    """`is_masked` against OLMo-core's `find_periodic_sequences` as its dataset's
    `_validate_instance` uses it, on short arrays with a planted repetition."""
    from olmo_core.data.utils import find_periodic_sequences

    from lineage.ingest.orders.olmo_filter import InstanceFilter, is_masked

    at, pattern, times = repeat
    values = np.array(tokens, dtype=np.int64)
    planted = np.tile(np.array(pattern, dtype=np.int64), times)[:max(0, len(values) - at)]
    values[at:at + len(planted)] = planted
    low, high = sorted(periods)
    theirs = any(found.times >= count for found in find_periodic_sequences(
        values, max_period=high, min_period=low))
    assert is_masked(values, InstanceFilter(high, low, count)) == theirs


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(1, 64), min_size=1, max_size=200),
       height=st.integers(6, 8))
def test_best_fit_packs_as_olmo_cores_instance_packer(lengths: list[int], height: int) -> None:
    """lineage's best fit against OLMo-core's `InstancePacker` (segment tree, bins by free
    space, oldest first) on documents already sorted longest first, many of equal length
    and many leaving equal space."""
    from olmo_core.data.utils import InstancePacker

    from lineage.ingest.orders.olmo_packed import _best_fit

    size = 2 ** height
    ordered = np.array(sorted(lengths, reverse=True), dtype=np.int64)
    spans = np.stack((np.zeros(len(ordered), np.uint64), ordered.astype(np.uint64)), axis=1)
    theirs, _, _ = InstancePacker(size).pack_documents(spans)
    assert _best_fit(ordered, size) == theirs
