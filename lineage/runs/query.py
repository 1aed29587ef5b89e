"""Questions about runs: which exist, how far each got, which steps were clipped or skipped,
which checkpoints they have and lack."""

from __future__ import annotations

import json
from typing import Any

from lineage.errors import NotFoundError, UnknownObjectError
from lineage.store.base import BaseStore


def list_runs(store: BaseStore) -> list[dict[str, Any]]:
    with store.reader(views=False) as con:
        names = [r[0] for r in con.execute("SELECT name FROM runs ORDER BY name").fetchall()]
        return [_summary(con, name) for name in names]


def get_run(store: BaseStore, name: str) -> dict[str, Any]:
    with store.reader(views=False) as con:
        return _summary(con, name, detail=True)


def _summary(con: Any, name: str, *, detail: bool = False) -> dict[str, Any]:
    row = con.execute("SELECT name, stream, world_size, chain, algorithm, genesis, "
                      "end_record IS NOT NULL, skip_rule, checkpoint_every FROM runs "
                      "WHERE name = ?", [name]).fetchone()
    if row is None:
        known = [r[0] for r in con.execute("SELECT name FROM runs ORDER BY name").fetchall()]
        raise UnknownObjectError(f"no run named {name!r} (runs: {', '.join(known) or 'none yet'})")
    keys = ("name", "stream", "world_size", "chain", "algorithm", "genesis", "closed",
            "skip_rule", "checkpoint_every")
    run = dict(zip(keys, row, strict=True))
    run["skip_rule"] = json.loads(run["skip_rule"]) if run["skip_rule"] else None
    steps_total = con.execute("SELECT steps FROM streams WHERE name = ?",
                              [run["stream"]]).fetchone()
    counts = con.execute(
        "SELECT count(*), min(step), max(step), count(*) FILTER (WHERE clipped), "
        "count(*) FILTER (WHERE skipped) FROM steps WHERE run = ?", [name]).fetchone()
    recorded, first, last, clipped, skipped = counts or (0, None, None, 0, 0)
    run.update(steps_recorded=recorded, first_step=first, last_step=last,
               stream_steps=steps_total[0] if steps_total else None,
               clipped_count=clipped, skipped_count=skipped)
    run["progress"] = round((last + 1) / steps_total[0], 6) \
        if last is not None and steps_total and steps_total[0] else 0.0
    if detail:
        run["clipped_steps"] = [r[0] for r in con.execute(
            "SELECT step FROM steps WHERE run = ? AND clipped ORDER BY step", [name]).fetchall()]
        run["skipped_steps"] = [r[0] for r in con.execute(
            "SELECT step FROM steps WHERE run = ? AND skipped ORDER BY step", [name]).fetchall()]
        run["segments"] = [
            dict(zip(("segment", "log_path", "log_hash", "first_step", "last_step", "records",
                      "new_steps"), r, strict=True))
            for r in con.execute(
                "SELECT segment, log_path, log_hash, first_step, last_step, records, new_steps "
                "FROM run_segments WHERE run = ? ORDER BY segment", [name]).fetchall()]
        run["checkpoints"] = [
            _checkpoint(r) for r in con.execute(
                f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE run = ? ORDER BY step",
                [name]).fetchall()]
    return run


_CHECKPOINT_COLUMNS = "step, structure_ok, checksums_ok, matches_chain, matches_state, risks"


def _checkpoint(row: tuple[Any, ...]) -> dict[str, Any]:
    step, structure, checksums, matches, state, risks = row
    risk = json.loads(risks) if risks else None
    ok = structure and checksums is not False and matches is not False and \
        state is not False and (risk is None or risk["ok"])
    return {"step": step, "structure_ok": structure, "checksums_ok": checksums,
            "matches_chain": matches, "matches_state": state,
            "risks_ok": risk["ok"] if risk else None, "ok": bool(ok)}


def list_checkpoints(store: BaseStore, run: str, *, nearest: int | None = None) -> dict[str, Any]:
    """A run's checkpoints, the ones its declared interval expects and lacks, and the
    nearest good one at or before `nearest` (where a replay of that step starts from).

    A checkpoint saved after step s is expected for every s with (s + 1) % every == 0, up
    to the last recorded step.
    """
    with store.reader(views=False) as con:
        info = _summary(con, run)
        rows = con.execute(f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE run = ? "
                           "ORDER BY step", [run]).fetchall()
    checkpoints = [_checkpoint(r) for r in rows]
    every, last = info["checkpoint_every"], info["last_step"]
    expected = list(range(every - 1, last + 1, every)) if every and last is not None else []
    have = {c["step"] for c in checkpoints}
    result = {"run": run, "checkpoint_every": every, "last_step": last,
              "checkpoints": checkpoints, "expected": len(expected) if every else None,
              "missing": [s for s in expected if s not in have], "nearest": None}
    if nearest is not None:
        usable = [c for c in checkpoints if c["step"] <= nearest and c["ok"]]
        if not usable:
            raise NotFoundError(f"run {run!r} has no good checkpoint at or before step "
                                f"{nearest} (checkpoints: "
                                f"{', '.join(str(c['step']) for c in checkpoints) or 'none'})")
        result["nearest"] = {**usable[-1], "replays": nearest - usable[-1]["step"]}
        result["nearest_to"] = nearest
    return result
