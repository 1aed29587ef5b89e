"""`lineage ingest windows`: a stream a run recorded itself, in the occurrence shape.

Runs that did not use the canonical order log which document segments each window
held: rows of `step, rank, window, doc_id, token_start, token_end` (Parquet or JSONL),
`window` counted over the whole run and `token_start/token_end` offsets inside the
document. Within a window, segments follow the file's order, packed back to back with
K separator tokens after each segment that ends its document (separators that do not
fit spill into the next window). Unknown doc_ids, impossible offsets, overfull windows,
missing windows and a document that does not continue where it stopped are reported
(the first few, with their rows), and nothing is stored. Every query then works on the
recorded stream as on a canonical one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from lineage.api import Store
from lineage.corpora.manifest import NAME_RULE, is_valid_name
from lineage.errors import ConflictError, InputError, UnknownObjectError, UsageError
from lineage.ingest.input_rules import check_unchanged, hash_regular, stat_of
from lineage.ingest.value_rules import COUNT, STRING, check_jsonl, check_parquet_types
from lineage.store.durable import guarded_write, remove_quietly
from lineage.store.part_select import part_files
from lineage.store.parts import Progress
from lineage.store.scratch import new_staging_dir, spilling_connection
from lineage.stream.build import Built, commit_stream, first_batch
from lineage.stream.query import stream_row
from lineage.stream.record import SCHEDULE_KEYS
from lineage.stream.schedule import BatchSchedule, RankRule
from lineage.stream.spec import RecordedSpec, earlier_spec_hash, occurrences_spec
from lineage.stream.tables import write_occurrences

REQUIRED = ("step", "rank", "window", "doc_id", "token_start", "token_end")
_FIELDS = {"step": COUNT, "rank": COUNT, "window": COUNT, "doc_id": STRING,
           "token_start": COUNT, "token_end": COUNT}
_SHOW = 3  # problems named per rule


@guarded_write
def ingest_windows(
    store: Store,
    path: str | Path,
    *,
    stream: str,
    corpus: str,
    seq_len: int,
    batch: int | None = None,
    schedule: BatchSchedule | None = None,
    rank_rule: RankRule | None = None,
    separator_tokens: int = 0,
    progress: Progress = None,
) -> dict[str, Any]:
    """Check a recorded window log against the corpus and store it as stream `stream`.

    The run's steps took `batch` windows each, or windows by a `schedule`; `rank_rule`
    says how its ranks split them (as for `stream build`)."""
    started = time.monotonic()
    path = Path(path)
    if not is_valid_name(stream):
        raise UsageError(f"--stream {stream!r}: {NAME_RULE}")
    batch = first_batch(batch, schedule)
    if seq_len < 1 or batch < 1 or separator_tokens < 0:
        raise UsageError("--seq-len and --batch must be at least 1, --separator-tokens >= 0")
    if not path.exists() and not path.is_symlink():
        raise InputError(path, "no such file")
    before = stat_of(path)
    log_hash = "blake3:" + hash_regular(path, keep=False)[0]
    with store.reader(views=False) as con:
        row = con.execute("SELECT manifest_hash FROM corpora WHERE name = ?", [corpus]).fetchone()
        if row is None:
            raise UnknownObjectError(f"no corpus named {corpus!r}")
        documents = part_files(con, store, "documents", corpus)
        existing = stream_row(con, stream)
    spec = RecordedSpec(row[0], seq_len, batch, separator_tokens, log_hash,
                        schedule=schedule, rank_rule=rank_rule)
    if existing is not None:
        if existing.spec_hash not in (spec.spec_hash, earlier_spec_hash(spec)):
            raise ConflictError(f"stream {stream!r} exists with other content; choose another")
        return {**existing.to_row(), "status": "unchanged"}
    staging = new_staging_dir(store.staging_dir)
    try:
        built = _build(store, path, stream, corpus, documents, spec, staging, progress)
        check_unchanged(path, before)  # the log hashed is the log read
        status = commit_stream(store, stream, corpus, spec, built)
    finally:
        remove_quietly(staging)
    declared = {key: value for key, value in json.loads(spec.canonical_json()).items()
                if key in SCHEDULE_KEYS}
    return {"name": stream, "status": status, "spec": spec.spec, "spec_hash": spec.spec_hash,
            "corpus": corpus, "manifest_hash": spec.manifest_hash, "log_hash": log_hash,
            **declared, "windows": built.windows, "steps": built.steps, "tokens": built.tokens,
            "occurrences": built.occurrences, "occurrences_digest": built.digest,
            "seconds": round(time.monotonic() - started, 3)}


def _build(store: Store, path: Path, stream: str, corpus: str, documents: list[str],
           spec: RecordedSpec, staging: Path, progress: Progress) -> Built:
    con = spilling_connection(staging)
    try:
        _load(con, path)
        con.execute("CREATE TABLE docs AS SELECT doc_id, source, n_tokens, content_hash, uri "
                    "FROM read_parquet(?)", [documents])
        _place(con, spec.seq_len, spec.separator_tokens)
        _check(con, path, spec)
        _carry_separators(con, spec.seq_len)
        problems = _layout_problems(con, spec)
        if problems:
            raise InputError(path, "; ".join(problems) + " (nothing stored)")
        windows = int((con.execute("SELECT max(win) + 1 FROM placed").fetchone() or (0,))[0])
        con.execute(
            """
            CREATE TABLE ordered AS
            SELECT doc_id, source, epoch, token_end - token_start AS n_tokens, content_hash,
                   uri, token_start AS doc_offset, stream_start,
                   row_number() OVER (ORDER BY stream_start) - 1 AS ordinal
            FROM placed
            """
        )
        written = write_occurrences(con, store, stream, corpus, progress,
                                    digest_spec=occurrences_spec(spec.spec))
        steps = spec.step_schedule.steps_for(windows)  # the last step may be partial
        return Built(windows * spec.seq_len, windows, steps, written.occurrences,
                     written.digest, written.parts, written.hash_parts)
    finally:
        con.close()


def _load(con: Any, path: Path) -> None:
    import duckdb

    lowered = path.name.lower()
    if lowered.endswith(".parquet"):
        source = "read_parquet(?, file_row_number = true)"
        row = "file_row_number + 1"
    elif lowered.endswith((".jsonl", ".jsonl.gz", ".jsonl.zst", ".ndjson")):
        columns = ("{step: 'BIGINT', rank: 'BIGINT', \"window\": 'BIGINT', "
                   "doc_id: 'VARCHAR', token_start: 'BIGINT', token_end: 'BIGINT'}")
        source = f"read_json(?, format = 'newline_delimited', columns = {columns})"
        row = "row_number() OVER ()"
    else:
        raise InputError(path, "expected a .parquet or .jsonl window log")
    if lowered.endswith(".parquet"):
        check_parquet_types(path, _FIELDS)
    else:
        check_jsonl(path, _FIELDS)
    try:
        con.execute("SET preserve_insertion_order = true")
        present = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}",
                                             [str(path)]).fetchall()}
        missing = [c for c in REQUIRED if c not in present]
        if missing:
            raise InputError(path, f"window log lacks column(s): {', '.join(missing)}")
        # `window` is an SQL keyword: it is called `win` from here on.
        con.execute(
            "CREATE TABLE log AS SELECT CAST(step AS BIGINT) AS step, "
            'CAST(rank AS BIGINT) AS rank, CAST("window" AS BIGINT) AS win, '
            "CAST(doc_id AS VARCHAR) AS doc_id, CAST(token_start AS BIGINT) AS token_start, "
            f"CAST(token_end AS BIGINT) AS token_end, {row} AS row FROM {source}",
            [str(path)],
        )
    except duckdb.Error as exc:
        raise InputError(path, f"cannot be read ({str(exc).splitlines()[0]})") from exc


def _place(con: Any, seq_len: int, separator: int) -> None:
    """Segment positions: packed in file order inside each window, K after a document end."""
    con.execute(
        f"""
        CREATE TABLE placed AS
        WITH joined AS (
            SELECT l.*, d.source, d.n_tokens, d.content_hash, d.uri,
                   (l.token_end - l.token_start)
                   + CASE WHEN l.token_end = d.n_tokens THEN {separator} ELSE 0 END AS width
            FROM log l LEFT JOIN docs d USING (doc_id)
        )
        SELECT *, win * {seq_len} + coalesce(sum(width) OVER (
                   PARTITION BY win ORDER BY row
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS stream_start,
               sum(CASE WHEN token_start = 0 THEN 1 ELSE 0 END) OVER (
                   PARTITION BY doc_id ORDER BY win, row) - 1 AS epoch
        FROM joined
        """
    )


def _carry_separators(con: Any, seq_len: int) -> None:
    """Separators after a document that ends a window spill into the next window."""
    widths = con.execute(
        "SELECT win, sum(width) FROM placed GROUP BY win ORDER BY win").fetchall()
    carries, carry = [], 0
    for window, width in widths:
        carries.append((window, carry))
        carry = max(0, carry + int(width) - seq_len)
    con.execute("CREATE TABLE carry (win BIGINT, carry BIGINT)")
    con.executemany("INSERT INTO carry VALUES (?, ?)", carries)
    con.execute("UPDATE placed SET stream_start = stream_start + carry.carry FROM carry "
                "WHERE placed.win = carry.win")


_RULES: tuple[tuple[str, str], ...] = (
    ("doc_id is not in the corpus", "n_tokens IS NULL"),
    ("missing step, rank, window or offsets",
     "step IS NULL OR rank IS NULL OR win IS NULL OR token_start IS NULL "
     "OR token_end IS NULL"),
    ("offsets must satisfy 0 <= token_start < token_end <= the document's n_tokens",
     "token_start < 0 OR token_end <= token_start OR token_end > n_tokens"),
    ("step must be window // batch", "step != $step_of_window"),
    ("negative rank or window", "rank < 0 OR win < 0"),
    ("rank-range: rank must be below --batch (each rank reads at least one window of a "
     "step)", "rank >= $windows_of_step"),
)
# The same rules worded for a run whose batch size followed a schedule.
_SCHEDULED = {"step must be window // batch": "step must be the schedule's step of the window",
              "rank-range: rank must be below --batch (each rank reads at least one window "
              "of a step)": "rank-range: rank must be below the step's windows by the "
                            "schedule (each rank reads at least one window of a step)"}


def _step_sql(schedule: BatchSchedule) -> dict[str, str]:
    """SQL for the step of window `win` and the windows of step `step`, by the schedule
    (for a fixed batch B: `win // B` and `B`)."""
    firsts = [(first, schedule.first_window(first), windows)
              for first, windows in schedule.segments]
    step_of = f"win // {firsts[0][2]}"
    windows_of = str(firsts[0][2])
    for first, start, windows in firsts[1:]:
        step_of = f"CASE WHEN win >= {start} THEN {first} + (win - {start}) // {windows} " \
                  f"ELSE {step_of} END"
        windows_of = f"CASE WHEN step >= {first} THEN {windows} ELSE {windows_of} END"
    return {"$step_of_window": step_of, "$windows_of_step": windows_of}


def _check(con: Any, path: Path, spec: RecordedSpec) -> None:
    problems: list[str] = []
    sql = _step_sql(spec.step_schedule)
    for rule, predicate in _RULES:
        for name, text in sql.items():
            predicate = predicate.replace(name, text)
        if spec.schedule is not None:
            rule = _SCHEDULED.get(rule, rule)
        rows = con.execute(
            f"SELECT row FROM placed WHERE {predicate} ORDER BY row LIMIT {_SHOW}").fetchall()
        if rows:
            problems.append(f"rows {', '.join(str(r[0]) for r in rows)}: {rule}")
    if problems:
        raise InputError(path, "; ".join(problems) + " (nothing stored)")


def _layout_problems(con: Any, spec: RecordedSpec) -> list[str]:
    problems = []
    over = con.execute(
        "SELECT win FROM placed GROUP BY win "
        f"HAVING max(stream_start + token_end - token_start) > (win + 1) * {spec.seq_len} "
        f"ORDER BY win LIMIT {_SHOW}").fetchall()
    if over:
        problems.append(f"windows {', '.join(str(r[0]) for r in over)}: more than "
                        f"{spec.seq_len} tokens (overfull)")
    gaps = con.execute(
        "SELECT w FROM range((SELECT max(win) + 1 FROM placed)) t(w) "
        f"WHERE w NOT IN (SELECT win FROM placed) ORDER BY w LIMIT {_SHOW}").fetchall()
    if gaps:
        problems.append(f"windows {', '.join(str(r[0]) for r in gaps)}: missing (gap)")
    broken = con.execute(
        f"""
        SELECT row, doc_id, token_start, prev_end FROM (
            SELECT row, doc_id, token_start,
                   lag(token_end) OVER (PARTITION BY doc_id ORDER BY win, row) AS prev_end
            FROM placed)
        WHERE prev_end IS NOT NULL AND token_start != 0 AND token_start != prev_end
        ORDER BY row LIMIT {_SHOW}
        """).fetchall()
    for row, doc_id, start, prev_end in broken:
        kind = "overlaps" if start < prev_end else "leaves a gap after"
        problems.append(f"row {row}: {doc_id!r} restarts at token {start}, which {kind} "
                        f"the previous segment's end {prev_end}")
    return problems
