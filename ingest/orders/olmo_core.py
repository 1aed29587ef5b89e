"""`lineage ingest order olmo-core`: the order of an OLMo-core run over numpy token files.

OLMo-core's `NumpyFSLDataset` concatenates nothing across files: instance `i` of a file
is its tokens `[i·L, (i+1)·L)`, a file holds `⌊tokens/L⌋` instances (a source mixture,
`NumpyFSLDatasetMixture`, takes the first `⌊allocated tokens/L⌋` of each of its path
entries), and the dataset numbers the instances file after file in the order of its
paths. `NumpyPaddedFSLDataset` makes one instance of each document instead
(olmo_padded.py). The data loader's global indices (olmo_order.py) say which instance each step
read. Documents are mapped to the corpus by the Dolma sidecars' ids or a doc_id list,
and each must hold exactly the tokens the corpus counted for it (docs/importers.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lineage.corpora.manifest import NAME_RULE, is_valid_name
from lineage.errors import InputError, UnknownObjectError, UsageError
from lineage.ingest.orders.common import artifact_hash, store_order
from lineage.ingest.orders.json_input import parse_json
from lineage.ingest.orders.olmo_checks import check_all, check_lengths, check_sample
from lineage.ingest.orders.olmo_filter import InstanceFilter, masked_windows
from lineage.ingest.orders.olmo_interleaved import (
    Interleaving,
    interleave,
    interleaved_segments,
)
from lineage.ingest.orders.olmo_order import (
    EpochIndices,
    Warmup,
    check_shuffles,
    read_global_indices,
    rebuilt_epochs,
    training_order,
)
from lineage.ingest.orders.olmo_packed import Packing, pack, packed_segments
from lineage.ingest.orders.olmo_padded import padded_instances, padded_segments
from lineage.ingest.orders.olmo_tokens import (
    Layout,
    TokenFile,
    closing_eos,
    documents_of,
    open_token_file,
    read_doc_ids,
    short_names,
)
from lineage.ingest.orders.reread_all import check_verify
from lineage.store.base import BaseStore
from lineage.store.parts import Progress
from lineage.stream.imported import ImportedSpec
from lineage.stream.schedule import RankRule

if TYPE_CHECKING:
    import pyarrow as pa

DATASETS = {"fsl": "NumpyFSLDataset", "padded": "NumpyPaddedFSLDataset",
            "interleaved": "NumpyInterleavedFSLDataset", "packed": "NumpyPackedFSLDataset"}


@dataclass(frozen=True)
class OlmoRun:
    """What fixed an OLMo-core run's order: its files and the settings of its config."""

    token_files: tuple[Path, ...]  # the dataset's paths, in its order
    dtype: str
    eos_token_id: int
    sequence_length: int
    global_batch_size: int  # tokens, as the data loader config gives it
    global_indices: tuple[Path, ...]  # one file per epoch, epoch 1 first; or none and
    mixture_index: Path | None = None
    doc_ids: Path | None = None
    warmup: Warmup | None = None
    max_steps: int | None = None
    tokenizer: Path | None = None
    seed: int | None = None  # ... the loader's seed and the epochs run, to rebuild them
    epochs: int | None = None
    dataset: str = "fsl"  # a key of DATASETS: how the files are cut into instances
    instance_filter: InstanceFilter | None = None  # masks repetitive instances
    max_target_sequence_length: int | None = None  # fixed-length: instances per file
    bos_token_id: int | None = None  # each document opened by it (not the corpus's token)
    interleaving: Interleaving | None = None  # dataset "interleaved": how documents mix
    pad_token_id: int | None = None  # interleaved: a token its documents must not hold
    packing: Packing | None = None  # dataset "packed": how documents are packed


def import_olmo_core(store: BaseStore, *, corpus: str, stream: str, run: OlmoRun,
                     verify: str = "sample", progress: Progress = None) -> dict[str, Any]:
    """Read, check and store the run's order as stream `stream` of corpus `corpus`;
    `verify` "all" re-reads every document the windows read instead of a sample."""
    if not is_valid_name(stream):  # before the reading, not after it
        raise UsageError(f"--stream {stream!r}: {NAME_RULE}")
    if run.sequence_length < 1:
        raise UsageError("--sequence-length must be at least 1")
    check_verify(verify)
    _check_dataset(run)
    files = [open_token_file(path, run.dtype) for path in run.token_files]
    layout = _layout(files, run)
    cut = _cut(files, layout, run)
    manifest_hash = _manifest_hash(store, corpus)
    rids = check_lengths(store, corpus, layout.doc_ids, layout.ends - layout.starts,
                         lambda k: _place(files, layout, k))
    epochs, seed, shuffle = _epochs(run, cut.size)
    order, schedule = training_order(
        epochs, seq_len=run.sequence_length, global_batch_size=run.global_batch_size,
        warmup=run.warmup, max_steps=run.max_steps)
    segments, docs_read = cut.segments(order, rids)
    masked = 0
    if run.instance_filter is not None:
        windows_masked = cut.masked(order, run.instance_filter)
        keep = ~windows_masked[segments.column("window").to_numpy()]
        segments, docs_read = segments.filter(keep), docs_read[keep]
        masked = int(windows_masked.sum())
    reread = check_all(store, corpus, files, layout, segments, docs_read, rids,
                       run.tokenizer) if verify == "all" else \
        check_sample(store, corpus, files, layout, docs_read, run.tokenizer)
    checked = {**reread, "global_indices": shuffle,
               **({"masked_windows": masked} if run.instance_filter is not None else {})}
    spec = ImportedSpec(
        manifest_hash=manifest_hash, seq_len=run.sequence_length, schedule=schedule,
        rank_rule=RankRule("strided"), framework="olmo-core",
        artifacts=_artifacts(files, run), settings=_settings(run, cut.entries, files, seed,
                                                             layout.boundaries))
    origin = run.global_indices[0] if run.global_indices else run.token_files[0]
    answer = store_order(store, stream=stream, corpus=corpus, spec=spec, segments=segments,
                         origin=origin, progress=progress, windows=len(order))
    return {**answer, "checked": checked}


@dataclass(frozen=True)
class _Cut:
    """How the run's dataset cut the token files into instances: how many there are, the
    segments (with each row's document) of the windows that read `order`, and which of
    those windows the instance filter masks."""

    size: int
    segments: Callable[[np.ndarray, np.ndarray], tuple[pa.Table, np.ndarray]]
    masked: Callable[[np.ndarray, InstanceFilter], np.ndarray]
    entries: list[tuple[int, int]]  # (file, instances), or documents when each is one


def _cut(files: list[TokenFile], layout: Layout, run: OlmoRun) -> _Cut:
    seq_len, bos = run.sequence_length, int(run.bos_token_id is not None)
    maps = [file.tokens() for file in files]
    if run.dataset == "fsl":
        entries = _dataset_entries(files, run)
        firsts = np.cumsum([0] + [count for _, count in entries])

        def fixed(i: int) -> np.ndarray:  # L tokens of its file
            entry = int(np.searchsorted(firsts, i, side="right")) - 1
            start = (i - int(firsts[entry])) * seq_len
            return np.asarray(maps[entries[entry][0]][start:start + seq_len])

        return _Cut(int(firsts[-1]), lambda order, rids: segments_of(
            order, entries, layout, rids, seq_len),
            lambda order, rule: masked_windows(order, fixed, rule), entries)
    # every other dataset starts from the documents the EOS tokens close: checked here
    closing = [closing_eos(file_map, run.eos_token_id, run.bos_token_id) for file_map in maps]
    entries, held = padded_instances(files, layout, closing, bool(bos))

    def document(i: int) -> np.ndarray:  # padded instance i as tested: before its padding
        k = int(held[i])
        f, _ = layout.where(k)
        start = int(layout.starts[k] - layout.bases[f]) - bos
        length = int(layout.ends[k] - layout.starts[k]) + bos + 1  # its BOS and EOS
        return np.asarray(maps[f][start:start + min(length, seq_len)])

    if run.packing is not None:
        return _packed_cut(maps, closing, layout, run, entries)
    if run.interleaving is not None:
        return _interleaved_cut(files, layout, run, entries, held, document)
    return _Cut(len(held), lambda order, rids: padded_segments(
        order, held, layout, rids, seq_len, bos=bool(bos)),
        lambda order, rule: masked_windows(order, document, rule), entries)


def _packed_cut(maps: list[np.ndarray], closing: list[np.ndarray], layout: Layout,
                run: OlmoRun, entries: list[tuple[int, int]]) -> _Cut:
    seq_len, bos = run.sequence_length, run.bos_token_id is not None
    assert run.packing is not None
    packed = pack(closing, layout.bases, seq_len, run.packing)
    pad = -1 if run.pad_token_id is None else run.pad_token_id

    def filled(i: int) -> np.ndarray:  # OLMo-core tests a packed instance with its padding
        lo, hi = int(packed.first[i]), int(packed.first[i + 1])
        pieces = []
        for start, end in zip(packed.start[lo:hi].tolist(), packed.end[lo:hi].tolist(),
                              strict=True):  # a piece lies within one file
            f = int(np.searchsorted(layout.bases, start, side="right")) - 1
            base = int(layout.bases[f])
            pieces.append(np.asarray(maps[f][start - base:end - base], dtype=np.int64))
        body = np.concatenate(pieces)
        return np.concatenate((body, np.full(seq_len - len(body), pad, dtype=np.int64)))

    return _Cut(packed.size, lambda order, rids: packed_segments(
        order, packed, layout, rids, bos),
        lambda order, rule: masked_windows(order, filled, rule), entries)


def _interleaved_cut(files: list[TokenFile], layout: Layout, run: OlmoRun,
                     entries: list[tuple[int, int]], held: np.ndarray,
                     document: Callable[[int], np.ndarray]) -> _Cut:
    seq_len, bos = run.sequence_length, run.bos_token_id is not None
    rule = run.interleaving
    assert rule is not None
    mixed = interleave([count for _, count in entries], rule)
    exempt = len(mixed.exempt)

    def segments(order: np.ndarray, rids: np.ndarray) -> tuple[pa.Table, np.ndarray]:
        found = interleaved_segments(order, mixed, held, layout, rids, seq_len, rule, bos)
        grouped = order[order >= exempt] - exempt
        _check_unspecial(files, layout, held[mixed.groups[grouped].reshape(-1)], run,
                         seq_len // rule.docs_per_instance - bos)
        return found

    def masked(order: np.ndarray, filter_rule: InstanceFilter) -> np.ndarray:
        # OLMo-core masks an interleaved instance when any of its documents' padded
        # instances is masked, each tested whole before it is cut
        flags = np.zeros(len(order), dtype=bool)
        alone = order < exempt
        flags[alone] = masked_windows(mixed.exempt[order[alone]], document, filter_rule)
        members = mixed.groups[order[~alone] - exempt]
        flags[~alone] = masked_windows(members.reshape(-1), document,
                                       filter_rule).reshape(members.shape).any(axis=1)
        return flags

    return _Cut(mixed.size, segments, masked, entries)


def _check_unspecial(files: list[TokenFile], layout: Layout, docs: np.ndarray,
                     run: OlmoRun, kept: int) -> None:
    """Interleaving drops every EOS, padding and BOS token from the `kept` first tokens of
    a document it mixes: a document holding one there would not be read as one run."""
    special = [t for t in (run.eos_token_id, run.pad_token_id, run.bos_token_id)
               if t is not None]
    maps = [file.tokens() for file in files]
    for k in np.unique(docs).tolist():
        f, d = layout.where(k)
        start = int(layout.starts[k] - layout.bases[f])
        end = min(int(layout.ends[k] - layout.bases[f]), start + kept)
        found = np.flatnonzero(np.isin(maps[f][start:end], special))
        if len(found):
            raise InputError(files[f].path, f"document {d} holds the special token "
                             f"{int(maps[f][start + found[0]])} at its token {int(found[0])}, "
                             "which interleaving would drop (nothing stored)")


def _check_dataset(run: OlmoRun) -> None:
    if run.dataset not in DATASETS:
        raise UsageError(f"--dataset {run.dataset!r}: expected one of {', '.join(DATASETS)}")
    if run.dataset != "fsl" and run.mixture_index is not None:
        raise UsageError("--mixture-index: a source mixture is cut into fixed-length "
                         "instances (--dataset fsl), not padded ones")
    if (run.dataset == "packed") != (run.packing is not None):
        raise UsageError("--dataset packed takes the packing settings (and only it does)")
    if run.packing is not None:
        run.packing.check(run.sequence_length)
        if run.instance_filter is not None and run.pad_token_id is None:
            raise UsageError("--instance-filter with --dataset packed needs --pad-token-id "
                             "(OLMo-core tests a packed instance with its padding)")
    if (run.dataset == "interleaved") != (run.interleaving is not None):
        raise UsageError("--dataset interleaved takes --docs-per-instance, --chunks-per-doc "
                         "and --interleaving-seed (and only it does)")
    if run.interleaving is not None:
        run.interleaving.check(run.sequence_length)
        if any(not 0 <= f < len(run.token_files) for f in run.interleaving.exempt_files):
            raise UsageError("--interleaving-exempt: name token files given")
    target = run.max_target_sequence_length
    if target is not None and run.dataset != "fsl":
        raise UsageError("--max-target-sequence-length: a padded dataset makes one instance "
                         "of each document; it takes no target length")
    if target is not None and (target < run.sequence_length or target % run.sequence_length):
        raise UsageError(f"--max-target-sequence-length {target}: must be a multiple of "
                         f"--sequence-length {run.sequence_length}")


def _dataset_entries(files: list[TokenFile], run: OlmoRun) -> list[tuple[int, int]]:
    """(file, instances) of each path entry of the dataset, in its order: ⌊tokens/L⌋, or,
    with a max_target_sequence_length M, the instances of ⌊tokens/M⌋ whole M-token
    chunks (OLMo-core keeps token boundaries fixed for a later, longer L)."""
    length, target = run.sequence_length, run.max_target_sequence_length or run.sequence_length

    def instances(tokens: int) -> int:
        return tokens // target * (target // length)

    if run.mixture_index is None:
        return [(f, instances(file.n_tokens)) for f, file in enumerate(files)]
    entries = []
    for path, tokens in _read_mixture(run.mixture_index):
        f = _find_file(files, path, run.mixture_index)
        if tokens > files[f].n_tokens:
            raise InputError(run.mixture_index, f"{path}: {tokens} tokens allocated, but "
                             f"{files[f].path.name} holds {files[f].n_tokens}")
        entries.append((f, instances(tokens)))
    return entries


def _read_mixture(path: Path) -> list[tuple[str, int]]:
    """The mixture's path index in dataset order: `[[path, tokens], ...]` (what
    `SourceMixtureDataset.to_index()` holds, keyed by (path, position))."""
    try:
        value = parse_json(path, path.read_bytes())
        pairs = [(str(p), int(t)) for p, t in value]
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(path, f"expected a JSON list of [path, tokens] pairs ({exc})") from exc
    if any(tokens < 0 for _, tokens in pairs):
        raise InputError(path, "a negative token allocation")
    return pairs


def _find_file(files: list[TokenFile], path: str, index: Path) -> int:
    """The token file a mixture entry names: the same path, else the one whose path
    below the files' common folder ends the entry's (a run's paths are often URLs),
    else the one of the same file name."""
    exact = [f for f, file in enumerate(files) if str(file.path) == path]
    tails = [f for f, short in enumerate(short_names(files))
             if path == short or path.endswith("/" + short)]
    named = [f for f, file in enumerate(files) if file.path.name == Path(path).name]
    found = exact or tails or named
    if len(found) != 1:
        how = "none" if not found else "several"
        raise InputError(index, f"{path}: {how} of the token files given has that name")
    return found[0]


def _layout(files: list[TokenFile], run: OlmoRun) -> Layout:
    sizes = [file.n_tokens for file in files]
    bases = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    resolved = [file.path.resolve() for file in files]
    if len(set(resolved)) != len(resolved):
        raise UsageError("a token file is given twice: list each once, in the dataset's "
                         "order (a mixture repeats it in --mixture-index)")
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    ids: list[pa.ChunkedArray | None] = []
    kinds: set[str] = set()
    for f in range(len(files)):
        found = documents_of(files[f], run.eos_token_id, run.bos_token_id)
        starts.append(found.starts + bases[f])
        ends.append(found.ends + bases[f])
        ids.append(found.ids)
        kinds.add(found.source)
    counts = [len(s) for s in starts]
    doc_ids = _doc_ids(files, ids, counts, run.doc_ids)
    firsts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    return Layout(bases, np.concatenate(starts), np.concatenate(ends), doc_ids, firsts,
                  "+".join(sorted(kinds)))


def _doc_ids(files: list[TokenFile], named: list[pa.ChunkedArray | None], counts: list[int],
             listing: Path | None) -> pa.ChunkedArray:
    """The corpus doc_id of every document: from the list given, else the sidecars."""
    import pyarrow as pa

    if listing is not None:
        ids = read_doc_ids(listing)
        if len(ids) != sum(counts):
            raise InputError(listing, f"{len(ids)} doc_ids for the {sum(counts)} documents "
                             "of the token files")
        return pa.chunked_array([pa.array(ids, pa.string())])
    missing = [file for file, found in zip(files, named, strict=True) if found is None]
    if missing:
        raise UsageError(f"{missing[0].path}: no sidecar naming its documents "
                         f"({missing[0].sidecar.name}); give --doc-ids, one corpus doc_id "
                         "per document in file order")
    return pa.chunked_array([chunk for found in named if found is not None
                             for chunk in found.chunks], pa.string())


def _place(files: list[TokenFile], layout: Layout, k: int) -> str:
    f, d = layout.where(k)
    return f"{files[f].path} document {d}"


def _manifest_hash(store: BaseStore, corpus: str) -> str:
    with store.reader(views=False) as con:
        row = con.execute("SELECT manifest_hash FROM corpora WHERE name = ?",
                          [corpus]).fetchone()
    if row is None:
        raise UnknownObjectError(f"no corpus named {corpus!r}: `lineage corpus list` shows them")
    return str(row[0])


def _epochs(run: OlmoRun, dataset_size: int) -> tuple[list[EpochIndices], int | None, str]:
    """Each epoch's global indices, read from the files given or rebuilt from the seed;
    the seed; whether the files are OLMo-core's shuffle."""
    if not run.global_indices:
        if run.seed is None or run.epochs is None:
            raise UsageError("give --global-indices (one file per epoch), or --seed and "
                             "--epochs to rebuild them as OLMo-core builds them")
        return rebuilt_epochs(dataset_size, run.seed, run.epochs), run.seed, "rebuilt"
    if run.epochs is not None and run.epochs != len(run.global_indices):
        raise UsageError(f"--epochs {run.epochs}, but {len(run.global_indices)} global "
                         "indices files are given")
    epochs = [read_global_indices(path, dataset_size) for path in run.global_indices]
    seed = _check_epochs(epochs)
    if run.seed is not None and seed is not None and run.seed != seed:
        raise UsageError(f"--seed {run.seed}, but the global indices were made with seed "
                         f"{seed}")
    seed = seed if seed is not None else run.seed
    return epochs, seed, check_shuffles(epochs, seed)


def _check_epochs(epochs: list[EpochIndices]) -> int | None:
    """The global indices named by OLMo-core must be epochs 1, 2, ... of one seed."""
    seeds = {e.fields.get("seed") for e in epochs}
    if len(seeds) > 1:
        raise InputError(epochs[1].path, f"another seed than {epochs[0].path.name}")
    for number, epoch in enumerate(epochs, start=1):
        recorded = epoch.fields.get("epoch", number)
        if recorded != number:
            raise InputError(epoch.path, f"holds epoch {recorded}, given as epoch {number} "
                             "(give one file per epoch, epoch 1 first)")
    seed = seeds.pop()
    return None if seed is None else int(seed)


def segments_of(order: np.ndarray, entries: list[tuple[int, int]], layout: Layout,
                rids: np.ndarray, seq_len: int) -> tuple[pa.Table, np.ndarray]:
    """Window w (the w-th instance read) cut at document boundaries into segment rows,
    each with its document's corpus row (`rids`, by the layout's index); with them, the
    layout's index of each row's document."""
    import pyarrow as pa

    counts = np.array([count for _, count in entries], dtype=np.int64)
    firsts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    entry = np.searchsorted(firsts, order, side="right") - 1
    file_of = np.array([f for f, _ in entries], dtype=np.int64)
    begin = layout.bases[file_of[entry]] + (order - firsts[entry]) * seq_len
    first = np.searchsorted(layout.ends, begin, side="right")
    last = np.searchsorted(layout.starts, begin + seq_len, side="left")
    per_window = last - first
    window = np.repeat(np.arange(len(order), dtype=np.int64), per_window)
    offsets = np.concatenate(([0], np.cumsum(per_window)[:-1]))
    doc = first[window] + np.arange(len(window)) - offsets[window]
    lo = np.maximum(layout.starts[doc], begin[window])
    hi = np.minimum(layout.ends[doc], begin[window] + seq_len)
    keep = hi > lo  # an empty document (EOS right after EOS) holds no token
    window, doc, lo, hi = window[keep], doc[keep], lo[keep], hi[keep]
    table = pa.table({"window": window, "slot": lo - begin[window], "rid": rids[doc],
                      "doc_offset": lo - layout.starts[doc], "n_tokens": hi - lo})
    return table, doc


def _artifacts(files: list[TokenFile], run: OlmoRun) -> dict[str, str]:
    artifacts: dict[str, str] = {}
    for file, short in zip(files, short_names(files), strict=True):
        artifacts[f"tokens:{short}"] = artifact_hash(file.path)
        if file.sidecar.is_file():
            sidecar = short.replace(".npy", ".csv.gz")
            artifacts[f"metadata:{sidecar}"] = artifact_hash(file.sidecar)
    for number, path in enumerate(run.global_indices, start=1):
        artifacts[f"global_indices:epoch{number}"] = artifact_hash(path)
    for role, given in (("mixture_index", run.mixture_index), ("doc_ids", run.doc_ids),
                        ("tokenizer", run.tokenizer)):
        if given is not None:
            artifacts[role] = artifact_hash(given)
    return artifacts


def _settings(run: OlmoRun, entries: list[tuple[int, int]], files: list[TokenFile],
              seed: int | None, boundaries: str) -> dict[str, Any]:
    return {
        "dataset": "NumpyFSLDatasetMixture" if run.mixture_index else DATASETS[run.dataset],
        "paths": [[short_names(files)[f], count] for f, count in entries],
        "dtype": run.dtype, "eos_token_id": run.eos_token_id,
        "sequence_length": run.sequence_length,
        "global_batch_size": run.global_batch_size, "seed": seed,
        "epochs": len(run.global_indices) or run.epochs, "max_steps": run.max_steps,
        "global_indices": "files" if run.global_indices else "rebuilt",
        "batch_size_schedule": run.warmup.to_json() if run.warmup else None,
        "document_boundaries": boundaries,
        # only a filtered run says so: an unfiltered import's spec stays what it was
        **({"instance_filter": run.instance_filter.to_json()}
           if run.instance_filter is not None else {}),
        **({"max_target_sequence_length": run.max_target_sequence_length}
           if run.max_target_sequence_length is not None else {}),
        **({"bos_token_id": run.bos_token_id} if run.bos_token_id is not None else {}),
        **({"interleaving": run.interleaving.to_json(), "pad_token_id": run.pad_token_id}
           if run.interleaving is not None else {}),
        **({"packing": run.packing.to_json()} if run.packing is not None else {}),
    }
