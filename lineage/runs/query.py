"""Questions about runs: which exist, how far each got, which steps were clipped or skipped,
which checkpoints they have and lack."""

from __future__ import annotations

import json
from typing import Any

from lineage.answer import AnswerList
from lineage.errors import NotFoundError, UnknownObjectError
from lineage.runs.answers import (
    Checkpoints,
    CheckpointVerdict,
    NearestCheckpoint,
    Run,
    RunSegment,
    RunSkipRule,
    RunSummary,
)
from lineage.store.base import BaseStore


def list_runs(store: BaseStore) -> AnswerList[RunSummary]:
    with store.reader(views=False) as con:
        names = [r[0] for r in con.execute("SELECT name FROM runs ORDER BY name").fetchall()]
        return AnswerList(RunSummary, [_summary(con, name) for name in names])


def get_run(store: BaseStore, name: str) -> Run:
    with store.reader(views=False) as con:
        summary = _summary(con, name)
        # A Run is its summary's fields followed by the details.
        return Run(**vars(summary),
                   clipped_steps=_steps_where(con, name, "clipped"),
                   skipped_steps=_steps_where(con, name, "skipped"),
                   segments=_segments(con, name),
                   checkpoints=tuple(_checkpoint(r) for r in con.execute(
                       f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE run = ? "
                       "ORDER BY step", [name]).fetchall()))


def _summary(con: Any, name: str) -> RunSummary:
    row = con.execute("SELECT name, stream, world_size, chain, algorithm, genesis, "
                      "end_record IS NOT NULL, skip_rule, checkpoint_every FROM runs "
                      "WHERE name = ?", [name]).fetchone()
    if row is None:
        known = [r[0] for r in con.execute("SELECT name FROM runs ORDER BY name").fetchall()]
        raise UnknownObjectError(f"no run named {name!r} (runs: {', '.join(known) or 'none yet'})")
    name, stream, world_size, chain, algorithm, genesis, closed, rule, every = row
    steps_total = con.execute("SELECT steps FROM streams WHERE name = ?", [stream]).fetchone()
    counts = con.execute(
        "SELECT count(*), min(step), max(step), count(*) FILTER (WHERE clipped), "
        "count(*) FILTER (WHERE skipped) FROM steps WHERE run = ?", [name]).fetchone()
    recorded, first, last, clipped, skipped = counts or (0, None, None, 0, 0)
    progress = round((last + 1) / steps_total[0], 6) \
        if last is not None and steps_total and steps_total[0] else 0.0
    return RunSummary(
        name=name, stream=stream, world_size=world_size, chain=chain, algorithm=algorithm,
        genesis=genesis, closed=closed, skip_rule=_skip_rule(rule), checkpoint_every=every,
        steps_recorded=recorded, first_step=first, last_step=last,
        stream_steps=steps_total[0] if steps_total else None,
        clipped_count=clipped, skipped_count=skipped, progress=progress)


def _skip_rule(text: str | None) -> RunSkipRule | None:
    """The rule as stored: lineage-skip/1, checked at ingest."""
    if not text:
        return None
    rule = json.loads(text)
    return RunSkipRule(grad_norm_above=rule["grad_norm_above"], rule=rule["rule"],
                       skip_following=rule["skip_following"])


def _steps_where(con: Any, run: str, flag: str) -> tuple[int, ...]:
    """The run's steps whose `flag` column (clipped or skipped) is true, in order."""
    return tuple(r[0] for r in con.execute(
        f"SELECT step FROM steps WHERE run = ? AND {flag} ORDER BY step", [run]).fetchall())


def _segments(con: Any, run: str) -> tuple[RunSegment, ...]:
    rows = con.execute(
        "SELECT segment, log_path, log_hash, first_step, last_step, records, new_steps "
        "FROM run_segments WHERE run = ? ORDER BY segment", [run]).fetchall()
    return tuple(RunSegment(segment=segment, log_path=path, log_hash=digest,
                            first_step=first, last_step=last, records=records,
                            new_steps=new)
                 for segment, path, digest, first, last, records, new in rows)


_CHECKPOINT_COLUMNS = "step, structure_ok, checksums_ok, matches_chain, matches_state, risks"


def _checkpoint(row: tuple[Any, ...]) -> CheckpointVerdict:
    step, structure, checksums, matches, state, risks = row
    risk = json.loads(risks) if risks else None
    ok = structure and checksums is not False and matches is not False and \
        state is not False and (risk is None or risk["ok"])
    return CheckpointVerdict(step=step, structure_ok=structure, checksums_ok=checksums,
                             matches_chain=matches, matches_state=state,
                             risks_ok=risk["ok"] if risk else None, ok=bool(ok))


def list_checkpoints(store: BaseStore, run: str, *, nearest: int | None = None) -> Checkpoints:
    """A run's checkpoints, the ones its declared interval expects and lacks, and the
    nearest good one at or before `nearest` (where a replay of that step starts from).

    A checkpoint saved after step s is expected for every s with (s + 1) % every == 0, up
    to the last recorded step.
    """
    with store.reader(views=False) as con:
        info = _summary(con, run)
        rows = con.execute(f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE run = ? "
                           "ORDER BY step", [run]).fetchall()
    checkpoints = tuple(_checkpoint(r) for r in rows)
    every, last = info.checkpoint_every, info.last_step
    expected = list(range(every - 1, last + 1, every)) if every and last is not None else []
    have = {c.step for c in checkpoints}
    return Checkpoints(
        run=run, checkpoint_every=every, last_step=last, checkpoints=checkpoints,
        expected=len(expected) if every else None,
        missing=tuple(s for s in expected if s not in have),
        nearest=None if nearest is None else _nearest(run, checkpoints, nearest),
        nearest_to=nearest)


def _nearest(run: str, checkpoints: tuple[CheckpointVerdict, ...],
             step: int) -> NearestCheckpoint:
    """The last good checkpoint at or before `step`; NotFoundError when there is none."""
    usable = [c for c in checkpoints if c.step <= step and c.ok]
    if not usable:
        raise NotFoundError(f"run {run!r} has no good checkpoint at or before step "
                            f"{step} (checkpoints: "
                            f"{', '.join(str(c.step) for c in checkpoints) or 'none'})")
    found = usable[-1]
    return NearestCheckpoint(**vars(found), replays=step - found.step)
