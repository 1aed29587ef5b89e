"""Prints the fault matrix's size at the end of a run that ran it (from the summaries
test_fault_matrix.py writes under test-artifacts/fault-matrix/)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

SUMMARIES = Path(__file__).resolve().parents[2] / "test-artifacts" / "fault-matrix"
_STARTED = time.time()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not SUMMARIES.is_dir():
        return
    found = [json.loads(p.read_text()) for p in sorted(SUMMARIES.glob("*.json"))
             if p.stat().st_mtime >= _STARTED]
    if not found:
        return
    points = sum(s["points"] for s in found)
    cases = sum(s["cases"] for s in found)
    reached = sum(s["reached"] for s in found)
    how = ("ENOSPC, EIO and SIGKILL at each point" if all(s["full"] for s in found) else
           "each point failed once, the actions in turn; all three at the catalog's")
    terminalreporter.write_line(
        f"fault matrix: {len(found)} commands, {points} write points, {cases} cases "
        f"({how}), {reached} reached")
