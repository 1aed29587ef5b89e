"""Requested is not obtained: ONNX Runtime execution providers (docs/experiments.md).

A missing provider is a silent fallback: the session is created, inference runs, exit
code 0. What counts is `session.get_providers()`. A command run by `lineage exp run`
calls `record_providers` with its session, and the obtained list lands in the record,
with the session's settings as the session reports them (`session`: graph optimisation
level, execution mode, intra- and inter-op threads), which change its numerics too.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

from lineage.errors import InputError, UsageError

REPORT_ENV = "LINEAGE_EXP_REPORT"
METRICS_ENV = "LINEAGE_EXP_METRICS"  # the --metrics file, when it is JSON lines


def providers_report(requested: list[str], obtained: list[str], available: list[str],
                     *, session: Any = None) -> dict[str, Any]:
    missing = [p for p in requested if p not in obtained]
    report = {"requested": requested, "obtained": obtained, "available": available,
              "missing": missing, "fallback": bool(missing)}
    if session is not None:
        from lineage.exp.ort_session import session_settings

        report["session"] = session_settings(session)
    return report


def check_providers(model: str, requested: list[str]) -> dict[str, Any]:
    """Create a session with the requested providers and report what it really got."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise UsageError("onnxruntime is not installed: pip install onnxruntime") from exc
    if not os.path.isfile(model):
        raise InputError(model, "no such model file")
    options = ort.SessionOptions()
    options.log_severity_level = 3  # the fallback warning is what this report replaces
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # a fallback is announced as a UserWarning: keep it
        try:
            session = ort.InferenceSession(model, sess_options=options, providers=requested)
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise InputError(model, f"onnxruntime could not create a session "
                                    f"({str(exc).splitlines()[0]})") from exc
    report = providers_report(requested, list(session.get_providers()),
                              list(ort.get_available_providers()), session=session)
    report["warnings"] = [str(w.message) for w in caught]
    return report


def record_providers(session: Any, requested: list[str], **facts: Any) -> dict[str, Any]:
    """For commands run under `lineage exp run`: add providers (and any other facts, e.g.
    first_load="ok", output_digest=...) to the experiment's report file."""
    import onnxruntime as ort

    report = providers_report(requested, list(session.get_providers()),
                              list(ort.get_available_providers()), session=session)
    record_facts(providers=report, **facts)
    return report


def record_facts(**facts: Any) -> None:
    """Merge facts into the report file named by $LINEAGE_EXP_REPORT (no-op without it)."""
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    current: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            current = json.load(handle)
    current.update(facts)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(current, handle, sort_keys=True)


def log_metric(key: str, value: float, step: int | None = None) -> None:
    """For commands run under `lineage exp run --metrics FILE.jsonl`: append one row
    `{"key", "value", "step"}` to that file (named by $LINEAGE_EXP_METRICS), as MLflow's
    `log_metric(key, value, step)` logs a point of a metric's history; no-op without it.
    Without `step`, the point's step is the count of that metric's points before it."""
    path = os.environ.get(METRICS_ENV)
    if not path:
        return
    row: dict[str, Any] = {"key": key, "value": value}
    if step is not None:
        row["step"] = step
    with open(path, "a", encoding="utf-8") as handle:  # one write a row: a kill tears one
        handle.write(json.dumps(row) + "\n")
