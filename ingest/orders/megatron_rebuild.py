"""A lost Megatron cache rebuilt by megatron-core itself (`--rebuild-cache`).

megatron-core names its cached index arrays by the MD5 of a description (the data
prefixes as the run gave them, seed, sequence length, split, sample counts, the
tokenizer's identifiers) and fills them from that description and the indexed datasets
alone. An imported Megatron stream records the run's top-level description among its
settings (`cache_description`) and every cached file by hash, so the cache can be made
again by megatron-core's own `BlendedMegatronDatasetBuilder` with the recorded config,
and each file it writes checked against the recorded hash.

Needs torch and megatron-core (not dependencies of lineage); nothing here runs code
from the run's files.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineage.errors import InputError, UsageError
from lineage.store.base import BaseStore

BLENDED = "BlendedDataset"
SPLITS = ("train", "valid", "test")  # megatron-core's Split, in its order
INSTALL = "pip install torch megatron-core"


@dataclass(frozen=True)
class RecordedCache:
    """What Megatron stream `stream` recorded of its cache: megatron-core's description
    of the run, and every file by hash."""

    description: dict[str, Any]
    artifacts: dict[str, str]


def recorded_cache(store: BaseStore, stream: str) -> RecordedCache:
    """The cache recorded with Megatron stream `stream`."""
    with store.reader(views=False) as con:
        row = con.execute("SELECT parameters FROM streams WHERE name = ?", [stream]).fetchone()
    if row is None:
        raise UsageError(f"--rebuild-cache rebuilds the cache of an imported stream; there is "
                         f"no stream {stream!r} (import the run once while its cache exists)")
    parameters = json.loads(row[0])
    description = parameters.get("settings", {}).get("cache_description")
    if parameters.get("framework") != "megatron" or not isinstance(description, dict):
        raise UsageError(f"stream {stream!r} records no Megatron cache description to "
                         "rebuild from (it is not a Megatron import, or was imported before "
                         "lineage recorded one)")
    return RecordedCache(description, dict(parameters["artifacts"]))


def rebuild_cache(description: dict[str, Any], data: Sequence[Path], cache: Path, *,
                  add_extra_token: bool) -> None:
    """Write the cache `description` names into `cache` with megatron-core's builder,
    the datasets read from the `data` prefixes (matched to the recorded ones by name)."""
    if any(cache.glob("*-description.txt")):
        raise UsageError(f"--rebuild-cache writes a new cache, but {cache} already holds one: "
                         "give an empty or new folder")
    members = description["datasets"] if description.get("class") == BLENDED else [description]
    first = members[0]
    recorded = [str(member["dataset_path"]) for member in members]
    modules = _megatron()
    cache.mkdir(parents=True, exist_ok=True)
    with _datasets_at(recorded, data) as folder, contextlib.chdir(folder):
        _single_process_group(modules["dist"])
        config = modules["GPTDatasetConfig"](
            random_seed=first["random_seed"], sequence_length=first["sequence_length"],
            blend=(recorded, description.get("weights")), split=first["split"],
            path_to_cache=str(cache.resolve()), tokenizer=RecordedTokenizer(first["tokenizer"]),
            reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
            add_extra_token_to_sequence=add_extra_token)
        size = description["size"] if description.get("class") == BLENDED \
            else first["num_samples"]
        sizes = [size if name == first["index_split"] else 0 for name in SPLITS]
        builder = modules["BlendedMegatronDatasetBuilder"](
            modules["GPTDataset"], sizes, lambda: True, config)
        builder.build()


def check_rebuilt(recorded: RecordedCache, found: dict[str, str], cache: Path,
                  stream: str) -> None:
    """Every cached file the stream recorded, rebuilt with the same bytes."""
    for name, digest in sorted(recorded.artifacts.items()):
        if name.endswith(".idx"):
            continue  # the indexed datasets were given, not rebuilt
        if name not in found:
            raise InputError(cache / name, f"megatron-core did not rebuild this file of stream "
                             f"{stream!r} (the config or the datasets differ)")
        if found[name] != digest:
            raise InputError(cache / name, f"rebuilt by megatron-core, but not the bytes "
                             f"recorded with stream {stream!r} ({digest})")


class RecordedTokenizer:
    """Stands in for the run's tokenizer, which building the index arrays never calls:
    megatron-core only writes its identifiers into the description (and so into the
    files' names), and these are the recorded ones."""

    vocab_size = None  # no per-dataset sequence files to size

    def __init__(self, identifiers: dict[str, Any]) -> None:
        self._identifiers = identifiers

    @property
    def unique_identifiers(self) -> OrderedDict[str, Any]:
        return OrderedDict(self._identifiers)


def _megatron() -> dict[str, Any]:
    try:
        import torch.distributed as dist
        from megatron.core.datasets.blended_megatron_dataset_builder import (
            BlendedMegatronDatasetBuilder,
        )
        from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    except ImportError as exc:
        raise UsageError(f"--rebuild-cache runs megatron-core's own builder, which is not "
                         f"installed here ({exc.name}): {INSTALL}") from exc
    return {"dist": dist, "BlendedMegatronDatasetBuilder": BlendedMegatronDatasetBuilder,
            "GPTDataset": GPTDataset, "GPTDatasetConfig": GPTDatasetConfig}


@contextlib.contextmanager
def _datasets_at(recorded: list[str], data: Sequence[Path]) -> Iterator[Path]:
    """A folder where each recorded prefix (as the run wrote it) opens the given dataset
    of the same name: megatron-core records the prefix in the description, so it must
    be the run's own string. A relative prefix becomes links; an absolute one must be
    where the run read it."""
    by_name = {prefix.name: prefix for prefix in data}
    with tempfile.TemporaryDirectory(prefix="lineage-megatron-") as folder:
        for prefix in recorded:
            given = by_name.get(Path(prefix).name)
            if given is None:
                raise UsageError(f"the run read dataset {prefix!r}; give its prefix with --data")
            if Path(prefix).is_absolute():
                if not _same_file(Path(prefix + ".idx"), Path(f"{given}.idx")):
                    raise UsageError(f"the run read its dataset at {prefix}, and megatron-core "
                                     "records that path in the cache: the rebuild needs the "
                                     "dataset there")
                continue
            for suffix in (".idx", ".bin"):
                link = Path(folder) / (prefix + suffix)
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(Path(f"{given}{suffix}").resolve())
        yield Path(folder)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _single_process_group(dist: Any) -> None:
    """megatron-core asks torch.distributed for the rank before it writes a blend's
    cache: a one-process gloo group answers 0. It meets in memory (a `HashStore`), so
    nothing is left on disk when the process ends."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
