"""Shared by the OLMo-core importer's tests: the corpus, a case's run on disk, the import,
and the tokens lineage says each rank of a step read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lineage.api import Store, init_store, open_store
from lineage.ingest import ingest_corpus
from lineage.ingest.orders.olmo_core import OlmoRun, import_olmo_core
from lineage.ingest.orders.olmo_filter import InstanceFilter
from lineage.ingest.orders.olmo_interleaved import Interleaving
from lineage.ingest.orders.olmo_order import Warmup
from lineage.ingest.orders.olmo_packed import Packing
from lineage.stream.reader import SEPARATOR, StreamReader

from .make_olmo_run import (
    BOS,
    EOS,
    FIXTURES,
    SHARDS,
    WORLD,
    all_poems,
    all_sonnets,
    corpus_documents,
    input_ids_hash,
    token_groups,
    write_token_files,
)


def ingest_poetry(store: Store) -> Store:
    """Corpus `poetry`: the sonnets and poems shards, whole, in byte tokens."""
    ingest_corpus(store, [SHARDS / "sonnets.jsonl.gz", SHARDS / "poems.parquet"],
                  corpus="poetry")
    return store


def poetry_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding corpus `poetry`, to copy (ingesting once per module is faster)."""
    root = tmp_path_factory.mktemp("poetry") / "store"
    init_store(root)
    ingest_poetry(open_store(root))
    return root


def copy_of(template: Path, tmp_path: Path) -> Store:
    shutil.copytree(template, tmp_path / "store")
    return open_store(tmp_path / "store")


def run_of(case_dir: Path, tokens_dir: Path, **changes: Any) -> OlmoRun:
    """The case's run as the importer takes it: token files rebuilt from the corpus, the
    global indices and settings OLMo-core's run left in `case_dir`. Token files already
    in `tokens_dir` (a test may have changed them) are kept."""
    expected = json.loads((case_dir / "expected.json").read_text())
    case = expected["settings"]
    documents, bos = case.get("documents", "poetry"), bool(case.get("bos"))
    folder = tokens_dir / (case["dtype"] + (f"-{documents}" if documents != "poetry" else "")
                           + ("-bos" if bos else ""))
    paths = (write_token_files(folder, case["dtype"], documents, bos) if not folder.is_dir()
             else [folder / f"{name}.npy" for name in token_groups(documents)])
    rule = case.get("instance_filter")
    warmup = case.get("warmup")
    mixture = case_dir / "mixture_index.json"
    fields: dict[str, Any] = {
        "token_files": tuple(paths), "dtype": case["dtype"], "eos_token_id": EOS[case["dtype"]],
        "sequence_length": expected["sequence_length"],
        "global_batch_size": case["global_batch_size"],
        "global_indices": tuple(sorted(case_dir.glob("global_indices_*.npy"))),
        "mixture_index": mixture if mixture.is_file() else None,
        "doc_ids": tokens_dir / "uint32" / "doc_ids.txt" if case["dtype"] == "uint32" else None,
        "warmup": Warmup(tuple(warmup["batch_sizes"]), tuple(warmup["schedule"]),
                         warmup["unit"]) if warmup else None,
        "dataset": case.get("dataset", "fsl"),
        "instance_filter": InstanceFilter(*rule) if rule else None,
        "max_target_sequence_length": case.get("max_target_sequence_length"),
        "bos_token_id": BOS[case["dtype"]] if bos else None,
        "interleaving": _interleaving(case, paths),
        "pad_token_id": EOS[case["dtype"]] + 1
        if "interleaving" in case or "packing" in case else None,
        "packing": Packing(**case["packing"]) if "packing" in case else None,
    }
    fields.update(changes)
    return OlmoRun(**fields)


def _interleaving(case: dict[str, Any], paths: list[Path]) -> Interleaving | None:
    mixing = case.get("interleaving")
    if mixing is None:
        return None
    return Interleaving(mixing["docs_per_instance"], mixing["chunks_per_doc"], mixing["seed"],
                        tuple(i for i, p in enumerate(paths) if p.stem in mixing["exempt"]))


def import_case(store: Store, name: str, tokens_dir: Path, case_dir: Path | None = None,
                *, stream: str | None = None, **changes: Any) -> dict[str, Any]:
    case_dir = case_dir or FIXTURES / name
    return import_olmo_core(store, corpus="poetry", stream=stream or name,
                            run=run_of(case_dir, tokens_dir, **changes))


def expected_steps(case_dir: Path) -> list[list[dict[str, Any]]]:
    steps: list[list[dict[str, Any]]] = json.loads((case_dir / "expected.json").read_text())[
        "steps"]
    return steps


def rank_tokens_hash(reader: StreamReader, step: int, rank: int, world: int, eos: int,
                     padded: bool = False) -> str:
    """The tokens lineage's reader gives rank `rank` of step `step`, hashed as the
    generator hashed OLMo-core's batch (separators are the run's EOS; in a padded
    window, the separator right after the document is its EOS, the rest padding)."""
    windows = reader.windows(step, rank=rank, world_size=world)
    rows = [np.array(w, dtype=np.int64) for w in windows]
    for tokens in rows:
        if padded:
            filler = np.flatnonzero(tokens == SEPARATOR)
            tokens[filler] = eos + 1  # the generator's pad token
            if len(filler):
                tokens[filler[0]] = eos
        tokens[tokens == SEPARATOR] = eos
    return input_ids_hash(np.concatenate(rows))


def segment_tokens_hash(reader: StreamReader, step: int, rank: int, world: int, eos: int,
                        texts: dict[str, bytes], padded: bool = False) -> str:
    """The same from the rank's segments (window, stream position, token range) laid over
    the documents' bytes: faster than the reader's re-read, for checking every step. A
    padded window is the pad token where no segment is, and EOS right after a segment
    that reaches its document's end."""
    segments = reader.segments(step, rank=rank, world_size=world)
    windows = sorted({s.window for s in segments})
    tokens = np.full((len(windows), reader.seq_len), eos + padded, dtype=np.int64)
    row = {window: i for i, window in enumerate(windows)}
    for s in segments:
        slot = s.position - s.window * reader.seq_len
        text = texts[s.doc_id]
        chunk = np.frombuffer(text[s.token_start:s.token_end], dtype=np.uint8)
        tokens[row[s.window], slot:slot + len(chunk)] = chunk
        if padded and s.token_end == len(text) and slot + len(chunk) < reader.seq_len:
            tokens[row[s.window], slot + len(chunk)] = eos
    return input_ids_hash(tokens.reshape(-1))


def corpus_texts() -> dict[str, bytes]:
    return {doc_id: text.encode("utf-8")
            for _, doc_id, text in corpus_documents() + all_poems() + all_sonnets()}


def checked_rank_tokens_hash(reader: StreamReader, step: int, rank: int,
                             batch: dict[str, Any], run: OlmoRun, texts: dict[str, bytes]
                             ) -> str:
    """A rank's tokens of one step, hashed as the generator hashed OLMo-core's batch, from
    the instances this test cuts from the token files itself (fixed-length slices, or one
    document an instance, padded). On the way, lineage's segments of each window must be,
    token for token, the corpus text at those places of the instance, every other token
    of it must be BOS, EOS or padding, and a window OLMo-core masked holds no segment."""
    eos, length = run.eos_token_id, run.sequence_length
    pad, bos = eos + 1, run.bos_token_id
    instances = _instances(run)
    segments = reader.segments(step, rank=rank, world_size=WORLD)
    first = step * len(batch["indices"]) * WORLD  # a fixed batch: steps are alike
    kept_all = batch.get("instance_mask", [True] * len(batch["indices"]))
    rows = []
    for j, (index, kept) in enumerate(zip(batch["indices"], kept_all, strict=True)):
        window = first + rank + WORLD * j
        tokens = instances[index]
        covered = np.zeros(length, dtype=bool)
        mine = [s for s in segments if s.window == window]
        assert bool(mine) == kept, (step, rank, window)
        for s in mine:
            slot = s.position - window * length
            chunk = np.frombuffer(texts[s.doc_id][s.token_start:s.token_end], dtype=np.uint8)
            assert np.array_equal(tokens[slot:slot + len(chunk)], chunk), (step, window)
            covered[slot:slot + len(chunk)] = True
        if kept:
            assert np.isin(tokens[~covered], [eos, pad, -1 if bos is None else bos]).all(), \
                (step, window)
        rows.append(tokens)
    return input_ids_hash(np.concatenate(rows))


def _instances(run: OlmoRun) -> list[np.ndarray]:
    eos, length, bos = run.eos_token_id, run.sequence_length, run.bos_token_id
    files = [np.fromfile(path, dtype=run.dtype).astype(np.int64) for path in run.token_files]
    if run.dataset == "fsl":
        return [tokens[i * length:(i + 1) * length] for tokens in files
                for i in range(len(tokens) // length)]
    if run.dataset == "packed":
        return _packed(files, run)
    out, file_of = [], []
    for f, tokens in enumerate(files):  # a document ends at an EOS (before a BOS, if any)
        ends = [i for i in range(len(tokens)) if tokens[i] == eos and (
            bos is None or i + 1 == len(tokens) or tokens[i + 1] == bos)]
        for start, end in zip([0] + [e + 1 for e in ends[:-1]], ends, strict=True):
            out.append(_padded(tokens[start:min(end + 1, start + length)], length, eos + 1))
            file_of.append(f)
    return out if run.interleaving is None else _interleaved(out, file_of, run)


def _packed(files: list[np.ndarray], run: OlmoRun) -> list[np.ndarray]:
    """The instances as lineage packs them (what the batch hash then holds to OLMo-core's)."""
    from lineage.ingest.orders.olmo_packed import pack
    from lineage.ingest.orders.olmo_tokens import closing_eos

    assert run.packing is not None
    tokens = np.concatenate(files)
    bases = np.cumsum([0] + [len(f) for f in files[:-1]])
    packed = pack([closing_eos(f, run.eos_token_id, run.bos_token_id) for f in files],
                  bases, run.sequence_length, run.packing)
    return [_padded(np.concatenate([tokens[a:b] for a, b in zip(
                packed.start[lo:hi], packed.end[lo:hi], strict=True)]),
                run.sequence_length, run.eos_token_id + 1)
            for lo, hi in zip(packed.first[:-1], packed.first[1:], strict=True)]


def _padded(tokens: np.ndarray, length: int, pad: int) -> np.ndarray:
    return np.concatenate((tokens, np.full(length - len(tokens), pad, dtype=np.int64)))


def _interleaved(padded: list[np.ndarray], file_of: list[int], run: OlmoRun
                 ) -> list[np.ndarray]:
    """NumpyInterleavedFSLDataset's instances, as its docstring and settings say."""
    rule, eos, length, bos = run.interleaving, run.eos_token_id, run.sequence_length, \
        run.bos_token_id
    assert rule is not None
    exempt = [i for i, f in enumerate(file_of) if f in rule.exempt_files]
    rest = sorted(set(range(len(padded))) - set(exempt))
    mixed = np.random.Generator(np.random.PCG64(rule.seed)).permutation(rest)
    special = [eos, eos + 1] + ([] if bos is None else [bos])
    out = [padded[i] for i in exempt]
    for first in range(0, len(mixed) - rule.docs_per_instance + 1, rule.docs_per_instance):
        pieces = []
        for i in mixed[first:first + rule.docs_per_instance]:
            cut = padded[i][:length // rule.docs_per_instance]
            pieces.append(np.array_split(cut[~np.isin(cut, special)], rule.chunks_per_doc))
        body = np.concatenate([doc[k] for k in range(rule.chunks_per_doc) for doc in pieces])
        if bos is not None and len(body) < length:
            body = np.concatenate(([bos], body))
        if len(body) < length:
            body = np.concatenate((body, [eos]))
        out.append(_padded(body.astype(np.int64), length, eos + 1))
    return out


def steps_to_check(count: int) -> list[int]:
    """The first dozen steps, every step at an even spacing, and the last three."""
    spaced = range(0, count, max(1, count // 30))
    return sorted(set(range(min(12, count))) | set(spaced) | set(range(max(0, count - 3), count)))
