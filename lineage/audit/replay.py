"""One audit unit: replay a run's step N on this machine and attest whether the state it
reaches has the chain's state hash (docs/audit-spec.md, "Replay protocol").

    result = replay_step(store, "tiny", 12, load_replayer("examples/tiny_run.py:replay"),
                         save=Path("relay-12"), auditor="ada")
    result["attestation"]["result"]   # "match" or "mismatch"
    result["checkpoint"]              # the relay record of relay-12/, or None

The starting state is the state after step N-1: a checkpoint of the run ingested with
`lineage ingest checkpoint` at step N-1, or an intermediate checkpoint a previous auditor
saved (`start=`); either is re-digested and compared with the chain's record of step N-1
before anything runs. Step 0 starts from the run's initial state, which the replayer
builds from the chain header's config. The batch is the step's canonical windows from
the stream reader, its digests recomputed and compared with the chain's. The state hash
is recomputed with the chain's own code from the replayed tensors.

The replayer is the user's own code, imported and run deliberately: lineage runs no code
from a checkpoint or a record.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from lineage.audit import machine
from lineage.audit import records as audit_records
from lineage.audit.record_files import read_records_file
from lineage.audit.records import SPEC, record_id
from lineage.audit.state_files import read_state, require_new_folder, write_state
from lineage.errors import InputError, NotFoundError, UnknownObjectError, UsageError
from lineage.runs.chain import (
    CHAIN_SPECS,
    GRADIENTS_PREFIX,
    OPTIMIZER_PREFIX,
    WEIGHTS_PREFIX,
    blake3_hex,
    canonical_json,
    step_hash,
    tensor_digest,
)
from lineage.runs.chain_batches import stream_batch_digests
from lineage.runs.checkpoint_evidence import checkpoint_digests
from lineage.runs.query import list_checkpoints
from lineage.store.base import BaseStore
from lineage.stream.reader import StreamReader
from lineage.version import __version__

RECORDS_FILE = "audit-records.jsonl"  # in a --save folder: its attestation and checkpoint
# What a step produced: withheld from the replayer, so it computes rather than copies.
OUTCOME_FIELDS = ("state_hash", "weights_digest", "state_digest", "loss", "grad_norm",
                  "clipped")
STATE_PREFIXES = (WEIGHTS_PREFIX, OPTIMIZER_PREFIX, GRADIENTS_PREFIX)

Replayer = Callable[..., Mapping[str, Any]]


@dataclass(frozen=True)
class RunStep:
    """A run's step N as the chain records it, with what a replay of it needs."""

    run: str
    step: int
    chain: str
    stream: str
    world_size: int
    batch: int
    config: dict[str, Any]
    head: str
    record: dict[str, Any]  # step N
    previous: dict[str, Any] | None  # step N-1 (None for step 0)


# -- the replayer ------------------------------------------------------------------------


def load_replayer(spec: str) -> tuple[Replayer, str | None]:
    """The function named MODULE:FUNCTION or path/to/file.py:FUNCTION, and the blake3 of
    its module's source file (None when it has none). Imports the user's own code."""
    where, _, name = spec.rpartition(":")
    if not where or not name.isidentifier():
        raise UsageError(f"--replayer {spec!r}: expected MODULE:FUNCTION or "
                         "path/to/file.py:FUNCTION")
    module = _import_file(spec, Path(where)) if where.endswith(".py") or "/" in where \
        else _import_module(spec, where)
    function = getattr(module, name, None)
    if not callable(function):
        raise UsageError(f"--replayer {spec!r}: {where} has no function {name!r}")
    source = getattr(module, "__file__", None)
    digest = blake3_hex(Path(source).read_bytes()) if source and Path(source).is_file() \
        else None
    return function, digest


def _import_file(spec: str, path: Path) -> Any:
    if not path.is_file():
        raise UsageError(f"--replayer {spec!r}: no file {path}")
    loader_spec = importlib.util.spec_from_file_location(f"_replayer_{path.stem}", path)
    if loader_spec is None or loader_spec.loader is None:
        raise UsageError(f"--replayer {spec!r}: {path} is not a Python module")
    module = importlib.util.module_from_spec(loader_spec)
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:
        raise UsageError(f"--replayer {spec!r}: importing {path} failed: "
                         f"{type(exc).__name__}: {_first_line(exc)}") from exc
    return module


def _import_module(spec: str, name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise UsageError(f"--replayer {spec!r}: no module {exc.name or name!r} on the "
                         "Python path (give a file as path/to/file.py:FUNCTION)") from exc
    except Exception as exc:
        raise UsageError(f"--replayer {spec!r}: importing {name} failed: "
                         f"{type(exc).__name__}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


# -- the run's step ------------------------------------------------------------------------


def read_run_step(store: BaseStore, run: str, step: int) -> RunStep:
    with store.reader(views=False) as con:
        row = con.execute("SELECT stream, world_size, chain, header FROM runs WHERE name = ?",
                          [run]).fetchone()
        if row is None:
            known = [r[0] for r in con.execute("SELECT name FROM runs ORDER BY name").fetchall()]
            raise UnknownObjectError(f"no run named {run!r} (runs: "
                                     f"{', '.join(known) or 'none yet'})")
        records = dict(con.execute("SELECT step, record FROM steps WHERE run = ? AND step "
                                   "IN (?, ?)", [run, step, step - 1]).fetchall())
        head, first, last = con.execute(
            "SELECT arg_max(state_hash, step), min(step), max(step) FROM steps WHERE run = ?",
            [run]).fetchone() or (None, None, None)
        batch = con.execute("SELECT batch FROM streams WHERE name = ?", [row[0]]).fetchone()
    stream, world_size, chain, header = row
    if chain not in CHAIN_SPECS or stream is None or batch is None or batch[0] is None:
        raise UsageError(f"run {run!r}: a replay needs a lineage chain bound to a stream "
                         f"with a batch size (this run: {chain}, stream {stream or 'none'})")
    if step not in records:
        raise UnknownObjectError(f"run {run!r} has no step {step} (steps "
                                 f"{first if first is not None else '-'}.."
                                 f"{last if last is not None else '-'})")
    previous = json.loads(records[step - 1]) if step - 1 in records else None
    if step > 0 and previous is None:
        raise UnknownObjectError(f"run {run!r} has no record of step {step - 1}, the state "
                                 f"a replay of step {step} starts from")
    return RunStep(run, step, chain, stream, int(world_size), int(batch[0]),
                   dict(json.loads(header).get("config") or {}), str(head),
                   json.loads(records[step]), previous)


def step_batch(store: BaseStore, target: RunStep) -> tuple[list[Any], list[str]]:
    """The step's windows from the stream reader, and their batch digests recomputed;
    refuses when the digests differ from the chain's."""
    reader = StreamReader(store, target.stream)
    count = reader.schedule.windows_of(target.step)  # the step's batch, by the schedule
    first = int(target.record["cursor"]) - count  # docs/chain-spec.md: the cursor rule
    whole = reader.schedule.step_of_window(first) if first >= 0 else None
    if whole is None or reader.schedule.step_range(whole) != range(first, first + count):
        raise UsageError(f"run {target.run!r} step {target.step} reads windows from "
                         f"{first} (after a data skip), not a whole stream step; a replay "
                         "reads whole stream steps")
    digests = stream_batch_digests(store, target.stream, first, target.world_size,
                                   step=target.step)
    recorded = list(target.record.get("batch_digests") or [])
    if digests != recorded:
        ranks = [r for r in range(max(len(digests), len(recorded)))
                 if digests[r:r + 1] != recorded[r:r + 1]]
        raise InputError(f"run {target.run!r}", f"batch-digests: step {target.step}: the "
                         f"stream's batch differs from the chain's batch_digests (rank "
                         f"{', '.join(map(str, ranks))}); refusing to replay")
    return reader.windows(whole), digests


# -- the starting state ----------------------------------------------------------------------


def published_start(store: BaseStore, target: RunStep) -> tuple[Path, dict[str, Any]]:
    """The run's checkpoint at step N-1 (its folder) and the attestation's `start`."""
    at = target.step - 1
    listing = list_checkpoints(store, target.run)["checkpoints"]
    good = [c["step"] for c in listing if c["ok"]]
    if at not in good:
        raise NotFoundError(
            f"run {target.run!r} has no good checkpoint at step {at}, the state a replay "
            f"of step {target.step} starts from (good checkpoints: "
            f"{', '.join(map(str, good)) or 'none'}); give a relay checkpoint of step {at} "
            "with --from DIR")
    with store.reader(views=False) as con:
        row = con.execute("SELECT path FROM checkpoints WHERE run = ? AND step = ?",
                          [target.run, at]).fetchone()
    return Path(row[0] if row else ""), audit_records.published_start(
        at, target.previous["weights_digest"])  # type: ignore[index]


def intermediate_start(folder: Path, target: RunStep) -> dict[str, Any]:
    """The attestation's `start` for a relay folder: its checkpoint record (written with
    --save, in audit-records.jsonl) must be of this run's step N-1 and the chain's hash."""
    at, previous = target.step - 1, target.previous or {}
    for record in _folder_records(folder):
        if record.get("kind") == "checkpoint" and record.get("run") == target.run and \
                record.get("step") == at:
            for key in ("state_hash", "weights_digest", "state_digest"):
                if record.get(key) != previous.get(key):
                    raise InputError(folder / RECORDS_FILE, f"{key.replace('_', '-')}: the "
                                     f"checkpoint record claims {record.get(key)}, the "
                                     f"chain's step {at} has {previous.get(key)}; refusing "
                                     "to replay")
            # built here, not by records.intermediate_start: a chain without state
            # digests gives None, which the record keeps
            return {"kind": "intermediate", "step": at, "checkpoint": record_id(record),
                    "state_digest": previous.get("state_digest")}
    raise InputError(folder / RECORDS_FILE, f"checkpoint-record: no checkpoint record of "
                     f"run {target.run!r} step {at} (the record `lineage audit replay --save` "
                     "writes beside the tensors)")


def _folder_records(folder: Path) -> list[dict[str, Any]]:
    path = folder / RECORDS_FILE
    if not path.exists():
        return []
    values, _ = read_records_file(path)
    return [value for value in values if isinstance(value, dict) and value.get("spec") == SPEC]


def checked_state(folder: Path, target: RunStep) -> dict[str, Any]:
    """The folder's state, after its weights and state digests were found equal to the
    chain's record of step N-1 (refused by name otherwise, before anything runs)."""
    at, previous = target.step - 1, target.previous or {}
    if not folder.is_dir() or not any(folder.glob("*.safetensors")):
        raise InputError(folder, "checkpoint: not a checkpoint folder (no *.safetensors)")
    found = checkpoint_digests(folder)
    if found["optimizer_errors"]:
        raise InputError(folder, "optimizer-state: " + "; ".join(found["optimizer_errors"]))
    for key in ("weights_digest", "state_digest"):
        if found[key] is None:
            raise InputError(folder, "state-digest: no optimizer/state.safetensors; a "
                             f"replay starts from the whole state of step {at}")
        if found[key] != previous.get(key):
            raise InputError(folder, f"{key.replace('_', '-')}: {found[key]} is not the "
                             f"chain's {key} of step {at} ({previous.get(key)}); refusing "
                             "to replay from it")
    state = read_state(folder)
    if tensor_digest(state) != previous.get("state_digest"):  # the bytes that were loaded
        raise InputError(folder, "state-digest: the files changed while they were read")
    return state


# -- the replay -----------------------------------------------------------------------------


def _shortfall(target: RunStep, source: Path | None, save: Path | None,
               force: bool) -> list[str]:
    """What this machine lacks of the run's declared requirements (UsageError unless
    `force`)."""
    from lineage.audit.requirements import check, declared_requirements, shortfalls

    declared = declared_requirements({"chain": target.chain, "config": target.config},
                                     source)
    if not declared:
        return []
    short = shortfalls(check(declared, step=target.step, folder=save or Path.cwd()))
    if short and not force:
        raise UsageError(f"this machine is below run {target.run!r}'s replay requirements "
                         f"({'; '.join(short)}): --force replays anyway and records the "
                         "shortfall in the attestation")
    return short


def replay_step(
    store: BaseStore, run: str, step: int, replayer: Replayer, *, replayer_name: str,
    replayer_source: str | None = None, start: Path | None = None, save: Path | None = None,
    auditor: str = "anonymous", public_key: str | None = None, now: datetime | None = None,
    payout: str | None = None, requirements: Path | None = None, force: bool = False,
) -> dict[str, Any]:
    """Replay step `step` of `run`: {"attestation": {...}, "checkpoint": {...} | None}.

    `start` is an intermediate checkpoint folder (else the run's checkpoint at step-1);
    `save` a new folder for the replayed state (written, with its checkpoint record, only
    when the replay matched). `public_key` (an ssh-ed25519 line) names the key the records
    will be signed with, so that signing them leaves their ids as they are. A machine
    below the run's declared requirements (its header's, or the `requirements` file's)
    is refused before anything runs, unless `force`: the attestation then records the
    shortfall."""
    target = read_run_step(store, run, step)
    if step == 0 and start is not None:
        raise UsageError("step 0 starts from the run's initial state, which the replayer "
                         "builds from the chain's config; --from is for steps after 0")
    if save is not None:
        require_new_folder(save)
    short = _shortfall(target, requirements, save, force)
    batch, digests = step_batch(store, target)
    state, origin = _starting_state(store, target, start)
    before, clock = machine.swap_counters(), time.perf_counter()
    outcome = _call(replayer, replayer_name, state, batch, target)
    duration = time.perf_counter() - clock
    swapped = machine.swapped_between(before, machine.swap_counters())
    tensors = {k: v for k, v in outcome.items() if k.startswith(STATE_PREFIXES)}
    body = replayed_record(target, outcome, tensors, digests)
    attestation = {
        "spec": SPEC, "kind": "attestation", "run": run, "chain_head": target.head,
        "step": step, "unit": "step-replay", "start": origin,
        "state_hash": step_hash(body, spec=target.chain),
        "expected": target.record["state_hash"],
        "machine": machine.machine_facts(swapped=swapped, backend=outcome.get("backend"),
                                         device=outcome.get("device"))
        | ({"shortfall": short} if short else {}),
        "duration_s": round(duration, 6), "tools": _tools(replayer_name, replayer_source),
        "auditor": audit_records.auditor(auditor, public_key=public_key, payout=payout),
        "created_at": audit_records.format_time(now or audit_records.utc_now()),
    }
    matched = attestation["state_hash"] == attestation["expected"]
    attestation["result"] = "match" if matched else "mismatch"
    checkpoint = None
    if save is not None and matched:
        checkpoint = save_relay(save, target, tensors, body, attestation)
    return {"attestation": attestation, "checkpoint": checkpoint}


def _starting_state(store: BaseStore, target: RunStep,
                    start: Path | None) -> tuple[dict[str, Any], dict[str, Any]]:
    if target.step == 0:
        return {}, audit_records.initial_start()
    if start is None:
        folder, origin = published_start(store, target)
        return checked_state(folder, target), origin
    state = checked_state(start, target)
    return state, intermediate_start(start, target)


def _call(replayer: Replayer, name: str, state: dict[str, Any], batch: list[Any],
          target: RunStep) -> Mapping[str, Any]:
    inputs = {k: v for k, v in target.record.items() if k not in OUTCOME_FIELDS}
    try:
        outcome = replayer(state, batch, step=target.step, record=inputs,
                           config=dict(target.config))
    except Exception as exc:
        raise UsageError(f"replayer {name} failed at step {target.step}: "
                         f"{type(exc).__name__}: {_first_line(exc)}") from exc
    if not isinstance(outcome, Mapping):
        raise UsageError(f"replayer {name}: returned {type(outcome).__name__}, not a dict "
                         "of state tensors, loss and grad_norm")
    for key in ("loss", "grad_norm"):
        if isinstance(outcome.get(key), bool) or \
                not isinstance(outcome.get(key), int | float):
            raise UsageError(f"replayer {name}: returned no number {key!r}")
    for key in ("backend", "device"):
        if key in outcome and not (isinstance(outcome[key], str) and outcome[key]):
            raise UsageError(f"replayer {name}: {key!r} is not a name")
    if not any(k.startswith(WEIGHTS_PREFIX) for k in outcome):
        raise UsageError(f"replayer {name}: returned no weights/… tensors")
    return outcome


def replayed_record(target: RunStep, outcome: Mapping[str, Any], tensors: dict[str, Any],
                    digests: list[str]) -> dict[str, Any]:
    """The step record a replay implies: the chain's inputs (prev_hash, lr, rng, cursor,
    skipped, ...), the recomputed batch digests, and what the replay produced."""
    body = {k: v for k, v in target.record.items() if k != "state_hash"}
    weights = {k[len(WEIGHTS_PREFIX):]: v for k, v in tensors.items()
               if k.startswith(WEIGHTS_PREFIX)}
    body.update(batch_digests=digests, loss=float(outcome["loss"]),
                grad_norm=float(outcome["grad_norm"]), weights_digest=tensor_digest(weights))
    if "clipped" in outcome:
        body["clipped"] = bool(outcome["clipped"])
    if "state_digest" in target.record:
        body["state_digest"] = tensor_digest(tensors)
    return body


def save_relay(folder: Path, target: RunStep, tensors: dict[str, Any], body: dict[str, Any],
               attestation: dict[str, Any]) -> dict[str, Any]:
    """Write the replayed state as a checkpoint folder with its records; return the
    checkpoint record (checked against the files as written)."""
    write_state(folder, tensors, step=target.step)
    written = checkpoint_digests(folder)
    if (written["weights_digest"], written["state_digest"]) != \
            (body["weights_digest"], body.get("state_digest", written["state_digest"])):
        raise InputError(folder, "state-digest: the saved files do not hold the replayed state")
    record = {
        "spec": SPEC, "kind": "checkpoint", "run": target.run, "chain_head": target.head,
        "step": target.step, "weights_digest": written["weights_digest"],
        "state_digest": written["state_digest"], "loss": body["loss"],
        "state_hash": attestation["expected"], "attestation": record_id(attestation),
        "location": str(folder.resolve()), "auditor": attestation["auditor"],
        "created_at": attestation["created_at"],
    }
    lines = [canonical_json(r) for r in (attestation, record)]
    (folder / RECORDS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return record


# -- records --------------------------------------------------------------------------------


def _tools(replayer_name: str, replayer_source: str | None) -> dict[str, str]:
    tools = {"lineage": __version__, "python": _python(), "numpy": _numpy(),
             "replayer": replayer_name}
    if replayer_source:
        tools["replayer_source"] = replayer_source
    return tools


def _python() -> str:
    import platform

    return platform.python_version()


def _numpy() -> str:
    import numpy

    return str(numpy.__version__)
