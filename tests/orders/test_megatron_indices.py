"""lineage's numpy re-implementation of megatron-core's index arrays
(ingest/orders/megatron_indices.py) held to megatron-core itself: its compiled helpers
(`build_sample_idx`, `build_blending_indices`, `build_exhaustive_blending_indices`) on
drawn inputs, and whole GPTDatasets built by its `BlendedMegatronDatasetBuilder` over
indexed datasets written by its `IndexedDatasetBuilder`, with drawn seeds, lengths,
sample counts (one epoch or several, the last shuffled apart or not), splits and the
extra token. A changed element is refused naming exactly that element."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lineage.errors import InputError
from lineage.ingest.orders.megatron_cache import Cached, find_run
from lineage.ingest.orders.megatron_indices import (
    check_blend,
    check_gpt,
    gpt_indices,
    sample_idx,
)

from .conftest import WITH_MEGATRON

pytestmark = WITH_MEGATRON


def _helpers() -> Any:
    from megatron.core.datasets import helpers

    return helpers


@given(sizes=st.lists(st.integers(0, 80), min_size=1, max_size=40),
       length=st.integers(2, 64), extra=st.sampled_from([0, 1]), epochs=st.integers(1, 3),
       drop_last=st.booleans(), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=300, deadline=None)
def test_sample_index_is_the_compiled_helpers(
        sizes: list[int], length: int, extra: int, epochs: int, drop_last: bool,
        seed: int) -> None:
    lengths = np.array(sizes, dtype=np.int32)
    tokens = int(lengths.sum())
    assume(tokens > 1 and epochs * tokens - extra >= length)
    document_index = np.tile(np.arange(len(sizes), dtype=np.int32), epochs)
    np.random.RandomState(seed).shuffle(document_index)
    # the compiled function itself (its Python wrapper only picks int32 or int64)
    theirs = _helpers().build_sample_idx_int64(lengths, document_index, length, epochs,
                                               tokens, drop_last, extra)
    ours = sample_idx(lengths, document_index, length, epochs, tokens, drop_last=drop_last,
                      extra=extra)
    assert ours.shape == theirs.shape
    assert np.array_equal(ours, theirs)


def _blend(weights: list[float], size: int | None, index: np.ndarray,
           samples: np.ndarray) -> Cached:
    description = {"class": "BlendedDataset", "weights": weights, "size": size}
    files = {name: Path(f"blend-{name}") for name in
             ("description.txt", "dataset_index.npy", "dataset_sample_index.npy")}
    return Cached("BlendedDataset", "0" * 32, description,
                  {"dataset_index": index, "dataset_sample_index": samples}, files)


@given(weights=st.lists(st.floats(0.001, 1000.0), min_size=1, max_size=7),
       size=st.integers(0, 5000), data=st.data())
@settings(max_examples=150, deadline=None)
def test_the_blend_check_passes_the_compiled_helpers_indices_and_names_a_change(
        weights: list[float], size: int, data: st.DataObject) -> None:
    from megatron.core.datasets.utils import normalize

    normalized = normalize(weights)  # what BlendedDataset hands the helper, and records
    index, samples = np.zeros(size, dtype=np.int16), np.zeros(size, dtype=np.int64)
    _helpers().build_blending_indices(index, samples, normalized, len(weights), size, False)
    members = [None] * len(weights)
    check_blend(_blend(normalized, size, index, samples), members)  # type: ignore[arg-type]
    assume(size > 0)
    at = data.draw(st.integers(0, size - 1))
    which = data.draw(st.sampled_from(["dataset_index", "dataset_sample_index"]))
    changed = {"dataset_index": index.copy(), "dataset_sample_index": samples.copy()}
    changed[which][at] += data.draw(st.sampled_from([-1, 1]))
    with pytest.raises(InputError, match=rf"blend-{which}.npy: element {at} is "
                       rf"{changed[which][at]}, megatron-core's blending gives "
                       rf"{[index, samples][which != 'dataset_index'][at]} "):
        check_blend(_blend(normalized, size, changed["dataset_index"],
                           changed["dataset_sample_index"]), members)  # type: ignore[arg-type]


@given(sizes=st.lists(st.integers(1, 400), min_size=1, max_size=6))
@settings(max_examples=60, deadline=None)
def test_the_exhaustive_blend_check_passes_the_compiled_helpers_indices(
        sizes: list[int]) -> None:
    total = sum(sizes)
    index, samples = np.zeros(total, dtype=np.int16), np.zeros(total, dtype=np.int64)
    _helpers().build_exhaustive_blending_indices(index, samples, np.array(sizes, np.int64),
                                                 len(sizes))
    members = [None] * len(sizes)
    check_blend(_blend(list(sizes), None, index, samples), members)  # type: ignore[arg-type]
    if len(sizes) > 1:
        index[-1] = (int(index[-1]) + 1) % len(sizes)
        with pytest.raises(InputError, match=rf"dataset_index.npy: element {total - 1} is"):
            check_blend(_blend(list(sizes), None, index, samples), members)  # type: ignore[arg-type]


def _generator() -> Any:
    path = Path(__file__).with_name("make_megatron_run.py")
    spec = importlib.util.spec_from_file_location("make_megatron_run", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _megatron_dataset(folder: Path, lengths: list[list[int]], seed: int, length: int,
                      samples: int | None, split: str, index_split: int, extra: bool,
                      keep_partial: bool) -> Any:
    """A GPTDataset megatron-core builds over an indexed dataset of documents made of
    sequences of the given lengths (tokens 0..255, the EOD 256 ending each document)."""
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    from megatron.core.tokenizers.text.libraries.null_tokenizer import NullTokenizer

    builder = IndexedDatasetBuilder(str(folder / "data.bin"), dtype=np.uint16)
    for document in lengths:
        tokens = np.arange(sum(document)) % 256
        builder.add_document(tokens, document)
    builder.finalize(str(folder / "data.idx"))
    _generator()._single_process_group()
    config = GPTDatasetConfig(
        random_seed=seed, sequence_length=length, blend=(["data"], None), split=split,
        path_to_cache=str(folder / "cache"), tokenizer=NullTokenizer(256),
        reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
        add_extra_token_to_sequence=extra,
        drop_last_partial_validation_sequence=not keep_partial)
    sizes = [0, 0, 0]
    sizes[index_split] = samples
    with contextlib.chdir(folder):
        built = BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, config).build()
    return built[index_split]


@given(lengths=st.lists(st.lists(st.integers(1, 90), min_size=1, max_size=3),
                        min_size=3, max_size=30),
       seed=st.integers(0, 2**32 - 1), length=st.integers(2, 40),
       epochs=st.floats(0.05, 3.5), split=st.sampled_from(["100,0,0", "80,10,10",
                                                           "60,30,10"]),
       index_split=st.sampled_from([0, 1]), extra=st.booleans(), keep_partial=st.booleans())
@settings(max_examples=40, deadline=None)
def test_gpt_indices_are_the_builders(lengths: list[list[int]], seed: int, length: int,
                                      epochs: float, split: str, index_split: int,
                                      extra: bool, keep_partial: bool) -> None:
    """Whole GPTDatasets as megatron-core's builder makes them: the description it
    writes is all lineage reads, the three arrays come out equal, and the import's
    check passes the cache the builder wrote (a valid split that kept its last partial
    sample included)."""
    from megatron.core.datasets.blended_megatron_dataset_config import (
        convert_split_vector_to_split_matrix,
        parse_and_normalize_split,
    )

    if split == "100,0,0":
        index_split = 0
    # the splits as megatron-core cuts them: the builder builds every split the matrix
    # names (the others with 0 samples), and one without tokens makes its epoch count
    # loop for ever
    matrix = convert_split_vector_to_split_matrix(parse_and_normalize_split(split))
    flat = [n for d in lengths for n in d]
    cuts = [[int(round(b * float(len(flat)))) for b in row] for row in matrix
            if row is not None]
    assume(all(sum(flat[first:stop]) > length + 1 for first, stop in cuts))
    first, stop = (int(round(b * float(len(flat)))) for b in matrix[index_split])
    tokens = sum(flat[first:stop])
    samples = max(1, int(epochs * (tokens - int(extra)) / length))
    with tempfile.TemporaryDirectory() as folder:
        dataset = _megatron_dataset(Path(folder), lengths, seed, length, samples, split,
                                    index_split, extra, keep_partial)
        description = json.loads(dataset.unique_description)
        drop_last = not (keep_partial and index_split == 1)
        ours = gpt_indices(description, dataset.dataset.sequence_lengths, extra=int(extra),
                           where=Path(folder), drop_last=drop_last)
        cached = find_run(Path(folder) / "cache", ["train", "valid"][index_split])
        check_gpt(cached.datasets[0], dataset.dataset.sequence_lengths, int(extra))
        for name in ("document_index", "sample_index", "shuffle_index"):
            theirs = np.asarray(getattr(dataset, name))
            assert getattr(ours, name).shape == theirs.shape, name
            assert np.array_equal(getattr(ours, name), theirs), name
