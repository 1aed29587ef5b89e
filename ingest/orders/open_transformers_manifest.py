"""The open-transformers harness's data manifest: the run's settings and which corpus
document each (source, shard, local document) of its token shards holds
(docs/importers.md, "The Open-1B harness")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from lineage.errors import InputError
from lineage.ingest.input_rules import hash_regular
from lineage.ingest.orders.json_input import parse_json
from lineage.stream.schedule import BatchSchedule, parse_token_schedule

if TYPE_CHECKING:
    import pyarrow as pa

MANIFEST_FORMAT = "open-transformers/data-manifest/1"
_RUN_INTEGERS = ("seq_len", "micro_batch_size", "world_size")


@dataclass(frozen=True)
class Shard:
    source: str
    shard: str  # the shard's path under --shards, without .idx/.bin: e.g. "web/00000"
    doc_ids: pa.Array  # strings: local document i is corpus document doc_ids[i]
    doc_ids_file: Path | None = None  # where they were read from, if not the manifest
    doc_ids_hash: str | None = None


@dataclass(frozen=True)
class HarnessManifest:
    path: Path
    digest: str  # 'blake3:<hex>' of the file as read
    run: dict[str, Any]  # the run's settings, as written
    seq_len: int
    micro_batch_size: int
    world_size: int
    ramp: tuple[tuple[int, int], ...]  # (tokens consumed from, windows per step)
    append_eod: bool
    eod_token: int | None
    shards: tuple[Shard, ...]

    @property
    def schedule(self) -> BatchSchedule:
        return schedule_from_tokens(self.ramp, self.seq_len)


def read_manifest(path: Path) -> HarnessManifest:
    """The manifest, every field checked; an `InputError` names the first one wrong."""
    if not path.exists():
        raise InputError(path, "no such file")
    digest, _, data = hash_regular(path, keep=True, keep_big=True)
    try:
        value = parse_json(path, data or b"")
    except ValueError as exc:
        raise InputError(path, f"not JSON ({exc})") from exc
    if not isinstance(value, dict) or value.get("format") != MANIFEST_FORMAT:
        raise InputError(path, f'expected "format": "{MANIFEST_FORMAT}"')
    run = _object(path, value, "run")
    numbers = {key: _integer(path, run, key, minimum=1) for key in _RUN_INTEGERS}
    append_eod = run.get("append_eod", False)
    if not isinstance(append_eod, bool):
        raise InputError(path, "run.append_eod must be true or false")
    eod = _integer(path, run, "eod_token", minimum=0) if append_eod else None
    return HarnessManifest(
        path=path, digest="blake3:" + str(digest), run=run, **numbers,
        ramp=_ramp(path, run), append_eod=append_eod, eod_token=eod,
        shards=_shards(path, value),
    )


def schedule_from_tokens(ramp: tuple[tuple[int, int], ...], seq_len: int) -> BatchSchedule:
    """A ramp by tokens consumed as step ranges, by the rule of `--schedule-tokens`
    (docs/stream-spec.md): step s takes the windows of the last entry whose `from_tokens`
    the steps before s have consumed."""
    text = ",".join(f"{tokens}:{windows}" for tokens, windows in ramp)
    return parse_token_schedule(text, seq_len, option="run.global_batch_ramp")


def _object(path: Path, value: dict[str, Any], key: str) -> dict[str, Any]:
    found = value.get(key)
    if not isinstance(found, dict):
        raise InputError(path, f"{key!r} must be an object")
    return found


def _integer(path: Path, run: dict[str, Any], key: str, *, minimum: int) -> int:
    found = run.get(key)
    if isinstance(found, bool) or not isinstance(found, int) or found < minimum:
        raise InputError(path, f"run.{key} must be an integer >= {minimum}, not {found!r}")
    return found


def _ramp(path: Path, run: dict[str, Any]) -> tuple[tuple[int, int], ...]:
    rule = ("run.global_batch_ramp must be [[from_tokens, windows_per_step], ...] starting "
            "at 0, from_tokens increasing, windows_per_step >= 1")
    ramp = run.get("global_batch_ramp")
    if not isinstance(ramp, list) or not ramp:
        raise InputError(path, rule)
    pairs: list[tuple[int, int]] = []
    for entry in ramp:
        if not (isinstance(entry, list) and len(entry) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in entry)):
            raise InputError(path, rule)
        pairs.append((entry[0], entry[1]))
    firsts = [first for first, _ in pairs]
    if firsts[0] != 0 or any(b <= a for a, b in zip(firsts, firsts[1:], strict=False)) \
            or min(windows for _, windows in pairs) < 1:
        raise InputError(path, rule)
    return tuple(pairs)


def _shards(path: Path, value: dict[str, Any]) -> tuple[Shard, ...]:
    shards = value.get("shards")
    if not isinstance(shards, list) or not shards:
        raise InputError(path, "'shards' must be a non-empty list")
    found: list[Shard] = []
    for i, entry in enumerate(shards):
        if not isinstance(entry, dict):
            raise InputError(path, f"shards[{i}] must be an object")
        source, name = entry.get("source"), entry.get("shard")
        if not isinstance(source, str) or not source:
            raise InputError(path, f"shards[{i}].source must be a non-empty string")
        if not isinstance(name, str) or not _is_relative(name):
            raise InputError(path, f"shards[{i}].shard must be a relative path inside "
                             f"--shards (no '..', not absolute), not {name!r}")
        found.append(Shard(source, name, *_doc_ids(path, entry, i)))
    names = [shard.shard for shard in found]
    if len(set(names)) != len(names):
        raise InputError(path, "a shard is listed twice")
    return tuple(found)


def _doc_ids(path: Path, entry: dict[str, Any], i: int
             ) -> tuple[pa.Array, Path | None, str | None]:
    """A shard's doc_ids: a list in the manifest, or `doc_ids_file`, a Parquet file
    beside the manifest with a string column `doc_id` in local-document order (for runs
    too large to list in JSON)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    listed, named = entry.get("doc_ids"), entry.get("doc_ids_file")
    if (listed is None) == (named is None):
        raise InputError(path, f"shards[{i}] needs doc_ids or doc_ids_file (one of them)")
    if listed is not None:
        if not isinstance(listed, list) or not all(isinstance(d, str) for d in listed):
            raise InputError(path, f"shards[{i}].doc_ids must be a list of doc_id strings")
        return pa.array(listed, pa.string()), None, None
    if not isinstance(named, str) or not _is_relative(named):
        raise InputError(path, f"shards[{i}].doc_ids_file must be a relative path beside "
                         f"the manifest, not {named!r}")
    file = path.parent / named
    if not file.exists():
        raise InputError(file, "no such file (a shard's doc_ids_file)")
    digest = "blake3:" + str(hash_regular(file, keep=False)[0])
    try:
        column = pq.ParquetFile(file).read(columns=["doc_id"]).column("doc_id")
    except (pa.ArrowInvalid, OSError, KeyError) as exc:
        raise InputError(file, f"not a Parquet file with a doc_id column ({exc})") from exc
    if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
        raise InputError(file, f"doc_id holds {column.type}, expected strings")
    if column.null_count:
        raise InputError(file, "doc_id has missing values")
    return column.combine_chunks().cast(pa.string()), file, digest


def _is_relative(name: str) -> bool:
    pure = PurePosixPath(name)
    return bool(name) and not pure.is_absolute() and ".." not in pure.parts \
        and "\\" not in name and not name.endswith("/")
