"""Questions about runs: which exist, how far each got, which steps were clipped or skipped."""

from __future__ import annotations

from typing import Any

from lineage.errors import UnknownObjectError
from lineage.store import Store


def list_runs(store: Store) -> list[dict[str, Any]]:
    with store.reader(views=False) as con:
        names = [r[0] for r in con.execute("SELECT name FROM runs ORDER BY name").fetchall()]
        return [_summary(con, name) for name in names]


def get_run(store: Store, name: str) -> dict[str, Any]:
    with store.reader(views=False) as con:
        return _summary(con, name, detail=True)


def _summary(con: Any, name: str, *, detail: bool = False) -> dict[str, Any]:
    row = con.execute("SELECT name, stream, world_size, chain, algorithm, genesis FROM runs "
                      "WHERE name = ?", [name]).fetchone()
    if row is None:
        known = [r[0] for r in con.execute("SELECT name FROM runs ORDER BY name").fetchall()]
        raise UnknownObjectError(f"no run named {name!r} (runs: {', '.join(known) or 'none yet'})")
    keys = ("name", "stream", "world_size", "chain", "algorithm", "genesis")
    run = dict(zip(keys, row, strict=True))
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
            dict(zip(("step", "structure_ok", "checksums_ok", "matches_chain"), r, strict=True))
            for r in con.execute(
                "SELECT step, structure_ok, checksums_ok, matches_chain FROM checkpoints "
                "WHERE run = ? ORDER BY step", [name]).fetchall()]
    return run
