"""Proof against the real megatron-core: the windows lineage says step N held, per rank,
are token for token the samples Megatron's datasets and its pretraining sampler yield
for step N, in a single-dataset run, a blended run and a ramped batch size.

The runs are built here with megatron-core (tests/orders/make_megatron_run.py); the
importer reads only their files. Megatron-LM's `MegatronPretrainingSampler`
(megatron/training/datasets/data_samplers.py) is not part of the megatron-core package:
`pretraining_batches` below follows it (drop_last, consumed samples from 0).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.errors import InputError
from lineage.ingest import ingest_corpus
from lineage.ingest.orders.megatron import MegatronRun, import_megatron
from lineage.ingest.orders.megatron_schedule import Rampup, megatron_schedule
from lineage.stream.reader import StreamReader
from tests.conftest import Cli

from .conftest import WITH_MEGATRON, holding

pytestmark = WITH_MEGATRON

DP = 2
MICRO = 2
RUNS = {  # run -> the command line's batch settings
    "single": MegatronRun(global_batch_size=8, micro_batch_size=MICRO, data_parallel_size=DP),
    "blend": MegatronRun(global_batch_size=12, micro_batch_size=MICRO, data_parallel_size=DP,
                         rampup=Rampup(4, 4, 40)),
}


def _generator() -> Any:
    path = Path(__file__).with_name("make_megatron_run.py")
    spec = importlib.util.spec_from_file_location("make_megatron_run", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    generator = _generator()
    folder = tmp_path_factory.mktemp("megatron")
    generator.make_all(folder)
    return generator, folder


@pytest.fixture(scope="module")
def imported_template(made: tuple[Any, Path], fresh_store: Callable[[Path], Store],
                      tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, folder = made
    store = fresh_store(tmp_path_factory.mktemp("imported") / "store")
    ingest_corpus(store, [folder / "sonnets.jsonl", folder / "poems.jsonl"], corpus="mg")
    for run, batches in RUNS.items():
        names = ["sonnets"] if run == "single" else ["sonnets", "poems"]
        import_megatron(store, data=[folder / n for n in names],
                        docs=[folder / f"{n}.jsonl" for n in names],
                        cache=folder / f"cache-{run}", corpus="mg", stream=run, run=batches)
    return store.root


@pytest.fixture
def imported(imported_template: Path, store: Store) -> Store:
    """The test's store holding corpus `mg` and both runs imported from `made`."""
    return holding(store, imported_template)


def pretraining_batches(total: int, rank: int) -> Iterator[list[int]]:
    """MegatronPretrainingSampler(total, consumed_samples=0, MICRO, rank, DP): each
    group of MICRO * DP consecutive samples, rank r takes its r-th MICRO of them."""
    group: list[int] = []
    for index in range(total):
        group.append(index)
        if len(group) == MICRO * DP:
            yield group[rank * MICRO:(rank + 1) * MICRO]
            group = []


def random_sampler_batches(total: int, rank: int, sharding: bool) -> Iterator[list[int]]:
    """MegatronPretrainingRandomSampler as Megatron-LM's `cyclic_iter` drives it: started
    again whenever it runs out, its count of consumed samples kept across the restarts;
    each start draws the epoch's permutation with torch itself."""
    import torch

    per_round = MICRO * DP
    active = total - total % per_round
    consumed = 0
    while True:
        epoch, within = divmod(consumed, active)
        generator = torch.Generator()
        generator.manual_seed(epoch)
        if sharding:
            bucket = total // per_round * MICRO
            drawn = torch.randperm(bucket, generator=generator).tolist()
            order = [rank * bucket + i for i in drawn[within // DP:]]
        else:
            full = total // MICRO * MICRO
            order = torch.randperm(full, generator=generator).tolist()[within:][rank::DP]
        for first in range(0, len(order) - MICRO + 1, MICRO):
            consumed += per_round
            yield order[first:first + MICRO]


def megatron_steps(dataset: Any, run: MegatronRun, steps: int) -> list[list[np.ndarray]]:
    """Per step, per rank, the token arrays (tokens + the last label; tokens alone without
    the extra token) the run trained on: megatron-core's num-microbatches calculator says
    how many micro-batches each step pulls from each rank's DataLoader."""
    import torch
    from megatron.core import num_microbatches_calculator as calculator

    rampup = None if run.rampup is None else [run.rampup.start, run.rampup.increment,
                                              run.rampup.samples]
    resumes = dict(run.resumes)
    calculator.destroy_num_microbatches_calculator()
    calculator.init_num_microbatches_calculator(0, rampup, run.global_batch_size, MICRO, DP,
                                                False)
    samplers = [random_sampler_batches(len(dataset), rank, run.data_sharding)
                if run.dataloader_type == "cyclic" else pretraining_batches(len(dataset), rank)
                for rank in range(DP)]
    loaders = [iter(torch.utils.data.DataLoader(dataset, batch_sampler=sampler))
               for sampler in samplers]
    consumed, out = 0, []
    for step in range(steps):
        if step in resumes:  # restarted from a checkpoint with another global batch: the
            # samplers go on from the samples consumed, as Megatron-LM's do
            calculator.destroy_num_microbatches_calculator()
            calculator.init_num_microbatches_calculator(0, rampup, resumes[step], MICRO, DP,
                                                        False)
        calculator.update_num_microbatches(consumed, consistency_check=True)
        per_rank = []
        for loader in loaders:
            samples = []
            for _ in range(calculator.get_num_microbatches()):
                batch = next(loader)
                text = torch.cat([batch["tokens"], batch["labels"][:, -1:]], dim=1) \
                    if run.add_extra_token else batch["tokens"]
                samples.extend(row.numpy() for row in text)
            per_rank.append(samples)
        out.append(per_rank)
        consumed += calculator.get_current_running_global_batch_size()
    calculator.destroy_num_microbatches_calculator()
    return out


def assert_windows_are_megatrons(store: Store, stream: str,
                                 expected: list[list[list[np.ndarray]]]) -> None:
    """Every step's windows, rank by rank, token for token Megatron's samples."""
    reader = StreamReader(store, stream)
    assert store.stream(stream).steps == len(expected)
    for step, ranks in enumerate(expected):
        for rank in range(DP):
            ours = [np.asarray(w, dtype=np.int64)
                    for w in reader.windows(step, rank=rank, world_size=DP)]
            assert len(ours) == len(ranks[rank]), (stream, step, rank)
            for window, (a, b) in enumerate(zip(ours, ranks[rank], strict=True)):
                assert np.array_equal(a, b), (stream, step, rank, window)


@pytest.mark.parametrize("run", list(RUNS))
def test_windows_are_megatrons_samples_per_step_and_rank(
        made: tuple[Any, Path], imported: Store, run: str) -> None:
    generator, folder = made
    dataset = generator.build_run(folder, folder / f"cache-{run}", run)
    steps = imported.stream(run).steps
    assert steps >= 10
    assert_windows_are_megatrons(imported, run, megatron_steps(dataset, RUNS[run], steps))


def test_the_ramp_is_megatrons(imported: Store) -> None:
    """--rampup-batch-size 4 4 40 to 12: 4 samples a step while fewer than 20 were
    consumed before it, 8 up to 40, then 12 (megatron-core's calculator drives the
    step sizes of the token-for-token test above)."""
    answer = imported.stream("blend")
    assert answer.schedule == ((0, 4), (5, 8), (8, 12))
    assert answer.rank_rule is not None and answer.rank_rule.micro_batch == MICRO


@pytest.mark.parametrize("run", list(RUNS))
def test_docs_in_step_names_megatrons_documents(
        made: tuple[Any, Path], imported: Store, run: str) -> None:
    """docs --step per rank lists, window by window, the documents whose tokens
    Megatron's sample holds (an appended EOD alone is no document's token)."""
    generator, folder = made
    dataset = generator.build_run(folder, folder / f"cache-{run}", run)
    reader = StreamReader(imported, run)
    for step in (0, 5, imported.stream(run).steps - 1):
        for rank in range(DP):
            answer = imported.docs_in_step(step, stream=run, rank=rank, world_size=DP)
            ours: dict[int, list[str]] = {}
            for entry in answer.documents:
                ours.setdefault(entry.window, []).append(entry.doc_id)
            windows = sorted({s.window for s in reader.segments(step, rank=rank,
                                                                world_size=DP)})
            assert sorted(ours) == windows
            for window in windows:
                assert ours[window] == megatron_documents(dataset, folder, window), (step, window)


def megatron_documents(dataset: Any, folder: Path, index: int) -> list[str]:
    """The doc_ids of top-level sample `index`, part by part, from megatron-core's own
    dataset objects (blend -> GPTDataset -> shuffle, sample and document indices ->
    indexed dataset); a part holding only a document's appended EOD names none."""
    if hasattr(dataset, "dataset_index"):
        member = dataset.datasets[int(dataset.dataset_index[index])]
        index = int(dataset.dataset_sample_index[index])
    else:
        member = dataset
    drawn = int(member.shuffle_index[index])
    (p0, o0), p1 = member.sample_index[drawn], member.sample_index[drawn + 1][0]
    indexed = member.dataset
    lines = (folder / f"{Path(member.dataset_path).name}.jsonl").read_text().splitlines()
    names = [json.loads(line)["id"] for line in lines]
    starts = indexed.document_indices
    found = []
    for position in range(int(p0), int(p1) + 1):
        sequence = int(member.document_index[position])
        document = int(np.searchsorted(starts, sequence, side="right")) - 1
        is_last = sequence == int(starts[document + 1]) - 1
        eod_only = (position == p0 and is_last
                    and int(o0) == int(indexed.sequence_lengths[sequence]) - 1)
        if not eod_only:
            found.append(names[document])
    return found


def test_the_committed_fixtures_are_what_megatron_core_writes(made: tuple[Any, Path]) -> None:
    """tests/orders/fixtures/megatron (read by test_megatron.py without megatron) is
    byte for byte what the generator makes with megatron-core here."""
    _, folder = made
    committed = Path(__file__).with_name("fixtures") / "megatron"
    names = sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
    fresh = sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file()
                   and not p.name.startswith("samples-"))
    assert [n for n in names if not n.name.startswith("samples-")] == fresh
    for name in fresh:
        assert (folder / name).read_bytes() == (committed / name).read_bytes(), name


@given(start=st.integers(1, 6), increment=st.integers(1, 4), increments=st.integers(1, 5),
       samples=st.integers(1, 300), micro=st.sampled_from([1, 2]),
       data_parallel=st.sampled_from([1, 2, 3]), decrease=st.booleans())
@settings(max_examples=60, deadline=None)
def test_schedules_are_megatron_cores_step_sizes(
        start: int, increment: int, increments: int, samples: int, micro: int,
        data_parallel: int, decrease: bool) -> None:
    """megatron_schedule gives, step by step, the samples megatron-core's
    num-microbatches calculator has each step consume (or refuses what it refuses)."""
    from megatron.core import num_microbatches_calculator as calculator

    unit = micro * data_parallel
    start, increment = start * unit, increment * unit  # ramps megatron accepts as given
    if decrease:
        start, increment = start + 1, increment  # not multiples: rounded down per step
    final = start + increment * increments
    ours = megatron_schedule(final, micro, data_parallel, Rampup(start, increment, samples),
                             decrease)
    calculator.destroy_num_microbatches_calculator()
    calculator.init_num_microbatches_calculator(0, [start, increment, samples], final, micro,
                                                data_parallel, decrease)
    consumed = 0
    try:
        for step in range(samples // max(1, start // 2) + 5):
            calculator.update_num_microbatches(consumed, consistency_check=True)
            size = calculator.get_current_running_global_batch_size()
            assert ours.windows_of(step) == size, step
            consumed += size
    finally:
        calculator.destroy_num_microbatches_calculator()


def test_the_harness_generators_writer_is_megatron_cores(tmp_path: Path) -> None:
    """make_harness_run.write_indexed (used when megatron-core is absent) writes the
    same .bin/.idx bytes as megatron-core's IndexedDatasetBuilder."""
    path = Path(__file__).with_name("make_harness_run.py")
    spec = importlib.util.spec_from_file_location("make_harness_run", path)
    assert spec and spec.loader
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    documents = [harness.tokenize(text) for _, text in
                 next(iter(harness.corpus_records().values()))]
    assert harness.write_with_megatron(tmp_path / "theirs", documents)
    harness.write_indexed(tmp_path / "ours", documents)
    for suffix in (".bin", ".idx"):
        assert (tmp_path / f"ours{suffix}").read_bytes() == \
            (tmp_path / f"theirs{suffix}").read_bytes(), suffix


# --- a lost cache, rebuilt by megatron-core from what the stream recorded -----------


def _rebuild_args(folder: Path, run: str, cache: Path) -> list[str]:
    names = ["sonnets"] if run == "single" else ["sonnets", "poems"]
    batches = RUNS[run]
    args = ["ingest", "order", "megatron", "--corpus", "mg", "--stream", run,
            "--cache", str(cache), "--global-batch-size", str(batches.global_batch_size),
            "--micro-batch-size", str(MICRO), "--data-parallel-size", str(DP),
            "--rebuild-cache"]
    for name in names:
        args += ["--data", str(folder / name), "--docs", str(folder / f"{name}.jsonl")]
    if batches.rampup is not None:
        args += ["--rampup-batch-size", *map(str, (batches.rampup.start,
                                                  batches.rampup.increment,
                                                  batches.rampup.samples))]
    return args


@pytest.mark.parametrize("run", list(RUNS))
def test_a_lost_cache_is_rebuilt_by_megatron_core_byte_for_byte(
        made: tuple[Any, Path], imported: Store, cli: Any, tmp_path: Path, run: str) -> None:
    _, folder = made
    recorded = imported.stream(run).spec_hash
    rebuilt = tmp_path / "rebuilt"
    out = cli.json(*_rebuild_args(folder, run, rebuilt))
    assert (out["status"], out["spec_hash"]) == ("unchanged", recorded)
    original = sorted(p.name for p in (folder / f"cache-{run}").iterdir())
    assert sorted(p.name for p in rebuilt.iterdir()) == original
    for name in original:
        assert (rebuilt / name).read_bytes() == (folder / f"cache-{run}" / name).read_bytes()


def test_a_rebuild_that_differs_from_the_record_is_refused(
        made: tuple[Any, Path], imported: Store, tmp_path: Path) -> None:
    _, folder = made
    # Samples of sequence_length tokens instead of sequence_length + 1: the description
    # does not say, the sample index does.
    shorter = MegatronRun(global_batch_size=8, micro_batch_size=MICRO, data_parallel_size=DP,
                          add_extra_token=False)
    before = imported.streams().to_json()
    with pytest.raises(InputError, match=r"sample_index\.npy: rebuilt by megatron-core, but "
                       r"not the bytes recorded with stream 'single'"):
        import_megatron(imported, data=[folder / "sonnets"], docs=[folder / "sonnets.jsonl"],
                        cache=tmp_path / "rebuilt", corpus="mg", stream="single", run=shorter,
                        rebuild=True)
    assert imported.streams().to_json() == before


def test_samples_without_the_extra_token_through_the_command(
        made: tuple[Any, Path], imported: Store, tmp_path: Path) -> None:
    """A run whose GPTDatasetConfig says add_extra_token_to_sequence=False: samples of
    sequence_length tokens, imported with --no-add-extra-token-to-sequence, are
    Megatron's per step and rank; the default (the extra token) is refused on its cache."""
    generator, folder = made
    cache = tmp_path / "cache-short"
    dataset = generator.build_run(folder, cache, "single", add_extra_token=False)
    cli = Cli(imported.root)
    args = ["ingest", "order", "megatron", "--data", str(folder / "sonnets"),
            "--docs", str(folder / "sonnets.jsonl"), "--cache", str(cache), "--corpus", "mg",
            "--stream", "short", "--global-batch-size", "8", "--micro-batch-size", str(MICRO),
            "--data-parallel-size", str(DP)]
    refused = cli(*args, code=2)
    assert "sample_index.npy" in refused.stderr and "Traceback" not in refused.stderr
    result = cli.json(*args, "--no-add-extra-token-to-sequence")
    assert result["seq_len"] == generator.SEQUENCE_LENGTH
    assert result["settings"]["add_extra_token_to_sequence"] is False
    run = MegatronRun(global_batch_size=8, micro_batch_size=MICRO, data_parallel_size=DP,
                      add_extra_token=False)
    expected = megatron_steps(dataset, run, result["steps"])
    assert {len(ranks[rank]) for ranks in expected for rank in range(DP)} == {8 // DP}
    assert_windows_are_megatrons(imported, "short", expected)


@pytest.mark.parametrize("name,sharding", [("single", True), ("single", False),
                                           ("blend", True)])
def test_a_cyclic_loaders_windows_are_megatrons_over_several_epochs(
        made: tuple[Any, Path], imported: Store, name: str, sharding: bool) -> None:
    """--dataloader-type cyclic: every step and rank of a run that went more than twice
    through its dataset, each epoch shuffled anew by torch, against megatron-core's
    samples as the sampler above draws them."""
    generator, folder = made
    dataset = generator.build_run(folder, folder / f"cache-{name}", name)
    base = RUNS[name]
    steps = base.schedule().step_of_window(2 * len(dataset)) + 3
    run = MegatronRun(global_batch_size=base.global_batch_size, micro_batch_size=MICRO,
                      data_parallel_size=DP, rampup=base.rampup, train_iters=steps,
                      dataloader_type="cyclic", data_sharding=sharding)
    names = ["sonnets"] if name == "single" else ["sonnets", "poems"]
    args = ["ingest", "order", "megatron", "--cache", str(folder / f"cache-{name}"),
            "--corpus", "mg", "--stream", "cyclic", "--global-batch-size",
            str(run.global_batch_size), "--micro-batch-size", str(MICRO),
            "--data-parallel-size", str(DP), "--train-iters", str(steps),
            "--dataloader-type", "cyclic", "--data-sharding" if sharding else
            "--no-data-sharding"]
    for member in names:
        args += ["--data", str(folder / member), "--docs", str(folder / f"{member}.jsonl")]
    if run.rampup is not None:
        args += ["--rampup-batch-size", *map(str, (run.rampup.start, run.rampup.increment,
                                                  run.rampup.samples))]
    result = Cli(imported.root).json(*args)
    assert result["steps"] == steps and result["settings"]["dataloader_type"] == "cyclic"
    assert result["settings"]["data_sharding"] is sharding
    assert_windows_are_megatrons(imported, "cyclic", megatron_steps(dataset, run, steps))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 3000), seed=st.integers(0, 2**32 - 1))
def test_lineages_randperm_is_torchs(n: int, seed: int) -> None:
    import torch

    from lineage.ingest.orders.megatron_cyclic import torch_randperm

    drawn = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).numpy()
    assert np.array_equal(torch_randperm(n, seed), drawn)


@given(start=st.integers(1, 4), increment=st.integers(1, 3), samples=st.integers(1, 200),
       finals=st.lists(st.integers(1, 5), min_size=1, max_size=3),
       gaps=st.lists(st.integers(1, 40), min_size=3, max_size=3))
@settings(max_examples=60, deadline=None)
def test_resumed_schedules_are_megatron_cores_step_sizes(
        start: int, increment: int, samples: int, finals: list[int], gaps: list[int]) -> None:
    """A run resumed (once or twice) with another --global-batch-size: megatron_schedule
    against megatron-core's calculator made anew at each resume, the consumed samples
    carried on, ramp-up or not."""
    from megatron.core import num_microbatches_calculator as calculator

    unit = MICRO * DP
    start, increment = start * unit, increment * unit
    batches = [start + increment * k for k in finals]
    resumes = tuple((sum(gaps[:i + 1]), batch) for i, batch in enumerate(batches[1:]))
    for ramp in (None, Rampup(start, increment, samples)):
        ours = megatron_schedule(batches[0], MICRO, DP, ramp, resumes=resumes)
        at = dict(resumes)
        consumed = 0
        try:
            for step in range(sum(gaps) + 10):
                if step == 0 or step in at:
                    calculator.destroy_num_microbatches_calculator()
                    calculator.init_num_microbatches_calculator(
                        0, None if ramp is None else [start, increment, samples],
                        at.get(step, batches[0]), MICRO, DP, False)
                calculator.update_num_microbatches(consumed, consistency_check=True)
                size = calculator.get_current_running_global_batch_size()
                assert ours.windows_of(step) == size, (step, ramp)
                consumed += size
        finally:
            calculator.destroy_num_microbatches_calculator()


def test_a_resumed_runs_windows_are_megatrons(made: tuple[Any, Path], imported: Store) -> None:
    """The blended run resumed at step 6 with a global batch of 16 and at step 11 with 8
    (--resumed-at): every step and rank against megatron-core's samples."""
    generator, folder = made
    dataset = generator.build_run(folder, folder / "cache-blend", "blend")
    run = MegatronRun(global_batch_size=12, micro_batch_size=MICRO, data_parallel_size=DP,
                      rampup=Rampup(4, 4, 40), resumes=((6, 16), (11, 8)))
    args = ["ingest", "order", "megatron", "--cache", str(folder / "cache-blend"),
            "--corpus", "mg", "--stream", "resumed", "--global-batch-size", "12",
            "--micro-batch-size", str(MICRO), "--data-parallel-size", str(DP),
            "--rampup-batch-size", "4", "4", "40", "--resumed-at", "6:16",
            "--resumed-at", "11:8"]
    for member in ("sonnets", "poems"):
        args += ["--data", str(folder / member), "--docs", str(folder / f"{member}.jsonl")]
    result = Cli(imported.root).json(*args)
    # at step 6 only 28 of the ramp's 40 samples are consumed: the new calculator still
    # ramps, towards 16 (12 at step 6, 16 from step 7), and 8 from the second resume on
    assert result["schedule"] == [[0, 4], [5, 8], [6, 12], [7, 16], [11, 8]]
    assert result["settings"]["resumes"] == [[6, 16], [11, 8]]
    assert_windows_are_megatrons(imported, "resumed",
                                 megatron_steps(dataset, run, result["steps"]))
