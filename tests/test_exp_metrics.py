"""`--metrics`: read without hanging or growing (regular files only, 16 MiB at most), a
file that breaks a rule recorded as refused in a record that is committed all the same
(exit 2 when the command itself succeeded), and a metric's history from JSON lines,
shown as a sparkline by `exp show`."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.exp.metrics import MAX_METRICS_BYTES, MAX_POINTS, read_metrics

from .conftest import Cli, spawn_lineage


def _run(cli: Cli, weights: Path, *args: str, code: int = 0) -> dict[str, Any]:
    result = cli("exp", "run", "--weights", str(weights), "--revision", "r", "--json", *args,
                 code=code)
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("make", "kind"), [
    ("mkfifo m.json", "a FIFO"),  # opening it waited for a writer, deaf to SIGINT/SIGTERM
    ("ln -s /dev/zero m.json", "a character device"),  # it was read to 4 GB and beyond
])
def test_a_special_metrics_file_is_refused_at_once_and_the_run_recorded(
    store: Store, weights: Path, tmp_path: Path, make: str, kind: str
) -> None:
    proc = spawn_lineage("--store", str(store.root), "exp", "run", "--weights", str(weights),
                         "--revision", "r", "--name", "special", "--metrics",
                         str(tmp_path / "m.json"), "--json", "--", "bash", "-c",
                         f"cd {tmp_path} && {make}")
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 2, err
    record = json.loads(out)
    assert record["metrics"] == {
        "path": str(tmp_path / "m.json"), "rule": "not-a-regular-file", "refused": True,
        "error": f"{tmp_path / 'm.json'}: not-a-regular-file: {kind}, not a metrics file"}
    assert f"{tmp_path / 'm.json'}: not-a-regular-file: {kind}" in err
    assert Cli(store.root).json("exp", "show", "special")["id"] == record["id"]  # committed


def _deep(depth: int) -> str:
    return "{\"a\": " * depth + "1" + "}" * depth


@pytest.mark.parametrize(("content", "rule"), [
    (_deep(5000), "nesting-depth"),  # was "unexpected RecursionError", the record lost
    ('{"a": "\\ud800"}', "invalid-text"),  # a lone surrogate: no record could hold it
    ('{"loss": 0.5', "invalid-json"),
    ("[0.5]", "not-an-object"),
    ('{"n": ' + "9" * 5000 + "}", "invalid-json"),  # past Python's integer digit limit
])
def test_a_metrics_file_breaking_a_rule_is_refused_in_a_committed_record(
    cli: Cli, weights: Path, tmp_path: Path, content: str, rule: str
) -> None:
    path = tmp_path / "m.json"
    path.write_text(content)
    result = cli("exp", "run", "--weights", str(weights), "--revision", "r", "--metrics",
                 str(path), "--", "true", code=2)
    assert f"{path}: {rule}: " in result.stderr
    (listed,) = cli.json("exp", "list")  # the command ran: its record is kept
    record = cli.json("exp", "show", listed["id"])
    assert record["metrics"]["refused"] and record["metrics"]["rule"] == rule
    assert record["outcome"] == "passed" and record["command"]["exit_code"] == 0


def test_a_metrics_file_over_the_cap_is_refused(cli: Cli, weights: Path,
                                                tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    with path.open("w") as f:
        f.write('{"pad": "')
        f.write("x" * MAX_METRICS_BYTES)
        f.write('"}')
    record = _run(cli, weights, "--metrics", str(path), "--", "true", code=2)
    assert record["metrics"]["rule"] == "too-large"
    assert "over the 16 MiB limit for a metrics file" in record["metrics"]["error"]


def _rows(path: Path, rows: list[dict[str, Any]], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)
    return path


def test_a_jsonl_metrics_file_is_the_metrics_history(cli: Cli, weights: Path,
                                                      tmp_path: Path) -> None:
    rows = [{"step": s, "loss": round(3 * math.exp(-s / 40), 6), "lr": 0.001,
             "phase": "train"} for s in range(0, 200, 2)]
    rows += [{"key": "eval_loss", "value": 1.5, "step": 100, "timestamp": 1700000000},
             {"key": "eval_loss", "value": 1.25, "step": 198},
             {"step": 198, "grad_norm": math.nan}]  # NaN is a value (json.dump writes it)
    path = _rows(tmp_path / "metrics.jsonl", rows, tail='{"step": 200, "lo')  # torn
    _run(cli, weights, "--name", "trained", "--metrics", str(path), "--", "true")
    metrics = cli.json("exp", "show", "trained")["metrics"]  # as stored: NaN is "nan"
    assert metrics["rows"] == len(rows) and metrics["cut_last_line"] is True
    assert metrics["values"] == {"loss": rows[99]["loss"], "lr": 0.001, "phase": "train",
                                 "eval_loss": 1.25, "grad_norm": "nan"}
    assert metrics["history"]["loss"] == {"steps": list(range(0, 200, 2)), "points": 100,
                                          "values": [r["loss"] for r in rows[:100]]}
    assert metrics["history"]["eval_loss"] == {"steps": [100, 198], "values": [1.5, 1.25],
                                               "points": 2}
    assert "phase" not in metrics["history"]  # not a number: a value, not a history
    assert metrics["history"]["grad_norm"]["values"] == ["nan"]
    shown = cli("exp", "show", "trained").stdout
    (line,) = [x for x in shown.splitlines() if x.strip().startswith("loss ")]
    spark = line.split()[1]
    assert len(spark) == 32 and spark[0] == "█" and spark[-1] == "▁"  # it fell
    assert f"3 → {rows[99]['loss']:.4g} (100 points, steps 0–198)" in line
    assert "a last row cut short left out" in shown


def test_a_command_logs_its_metrics_as_mlflow_does(
    cli: Cli, weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # --metrics is relative to the working directory
    script = ("from lineage.exp.providers import log_metric\n"
              "for i in range(5):\n    log_metric('loss', 1 / (i + 1))\n"
              "log_metric('acc', 0.5, step=10)\n")
    record = _run(cli, weights, "--metrics", "m.jsonl", "--", sys.executable, "-c", script)
    history = record["metrics"]["history"]
    assert history["loss"] == {"steps": [0, 1, 2, 3, 4], "values": [1, 0.5, 1 / 3, 0.25, 0.2],
                               "points": 5}
    assert history["acc"] == {"steps": [10], "values": [0.5], "points": 1}
    assert record["metrics"]["path"] == str(tmp_path / "m.jsonl")


def test_a_bad_row_is_refused_with_its_line(cli: Cli, weights: Path, tmp_path: Path) -> None:
    path = _rows(tmp_path / "m.jsonl", [{"step": 0, "loss": 1.0}, {"step": "one", "loss": 2}])
    record = _run(cli, weights, "--metrics", str(path), "--", "true", code=2)
    assert record["metrics"]["rule"] == "invalid-row"
    assert "line 2: step must be an integer" in record["metrics"]["error"]


_number = st.one_of(st.integers(-10**6, 10**6),
                    st.floats(allow_nan=False, allow_infinity=False, width=32))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.dictionaries(st.sampled_from(["loss", "acc", "lr"]), _number,
                                     min_size=1), max_size=40),
       steps=st.booleans())
def test_history_holds_each_row_in_file_order(
    tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, Any]], steps: bool
) -> None:
    written = [{**row, "step": 10 * i} if steps else row for i, row in enumerate(rows)]
    path = _rows(tmp_path_factory.mktemp("m") / "m.jsonl", written)
    metrics = read_metrics(path)
    for key in ("loss", "acc", "lr"):
        having = [(10 * i, row[key]) for i, row in enumerate(rows) if key in row]
        if not steps:  # without a step, a point's step counts the metric's points before it
            having = [(n, value) for n, (_, value) in enumerate(having)]
        if not having:
            assert key not in metrics["history"]
            continue
        assert metrics["history"][key] == {"steps": [s for s, _ in having],
                                           "values": [v for _, v in having],
                                           "points": len(having)}
        assert metrics["values"][key] == having[-1][1]


def test_a_long_history_is_thinned_to_its_cap_with_the_last_point(tmp_path: Path) -> None:
    path = _rows(tmp_path / "m.jsonl", [{"loss": float(i)} for i in range(MAX_POINTS * 3 + 7)])
    history = read_metrics(path)["history"]["loss"]
    assert history["points"] == MAX_POINTS * 3 + 7 and len(history["values"]) <= MAX_POINTS
    assert history["steps"][0] == 0 and history["steps"][-1] == MAX_POINTS * 3 + 6
    assert history["values"] == [float(s) for s in history["steps"]]


def test_a_report_file_swapped_for_a_device_is_an_error_in_the_record(
    cli: Cli, weights: Path
) -> None:
    record = _run(cli, weights, "--", "bash", "-c",
                  'rm -f "$LINEAGE_EXP_REPORT"; ln -s /dev/zero "$LINEAGE_EXP_REPORT"')
    assert "not-a-regular-file: a character device" in record["report"]["error"]


def test_export_refuses_to_write_over_a_fifo(cli: Cli, weights: Path, tmp_path: Path) -> None:
    record = _run(cli, weights, "--", "true")
    fifo = tmp_path / "out.zip"
    os.mkfifo(fifo)
    result = cli("exp", "export", str(record["id"]), "-o", str(fifo), code=2)
    assert "it is a FIFO, not a regular file" in result.stderr
    assert subprocess.run(["test", "-p", str(fifo)], check=False).returncode == 0
