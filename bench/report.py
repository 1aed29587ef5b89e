"""Render bench/out/results.json as the Markdown tables of docs/performance.md.

    python bench/report.py [bench/out/results.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _runs(values: list[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def _throughput(entry: dict[str, Any]) -> str:
    if "mb_per_s" in entry:
        return f"{entry['mb_per_s']:,.0f} MB/s"
    return f"{entry['docs_per_s'] / 1e6:.2f} M docs/s"


def _floor_throughput(entry: dict[str, Any]) -> str:
    floor = entry.get("floor", {})
    if "mb_per_s" in floor:
        return f"{floor['mb_per_s']:,.0f} MB/s"
    if "docs_per_s" in floor:
        return f"{floor['docs_per_s'] / 1e6:.2f} M docs/s"
    return "n/a"


def render(payload: dict[str, Any]) -> str:
    lines = []
    machine = payload["machine"]
    measured = machine.get("measured", {})
    lines.append(f"Mode {payload['mode']}, {payload['runs']} timed runs each, "
                 f"{payload['generated_at']}, library commit "
                 f"`{str(measured.get('commit', '?'))[:12]}` ({measured.get('from', '?')}).")
    lines.append("")
    lines.append("| benchmark | input | median | runs (s) | throughput | floor | floor median "
                 "(runs) | floor throughput | ingest / floor | target | met |")
    lines.append("|---|---|---:|---|---:|---|---|---:|---:|---|---|")
    machine_rows = []
    for e in payload["results"]:
        if e["kind"] == "machine":
            machine_rows.append(e)
            continue
        floor = e.get("floor", {})
        floor_runs = (f"{floor['median_s']:.2f} s ({_runs(floor['runs_s'])})"
                      if "median_s" in floor else "n/a")
        ratio = f"{e['ratio_vs_floor']:.2f}x" if "ratio_vs_floor" in e else "n/a"
        met = {True: "**yes**", False: "**no**", None: "-"}[e.get("met")]
        if e.get("contended_runs") or floor.get("contended_runs"):
            met += " (contended run kept)"
        lines.append(
            f"| {e['name']} | {e.get('inputs', '')} | {e['median_s']:.2f} s | "
            f"{_runs(e['runs_s'])} | {_throughput(e)} | {floor.get('name', 'n/a')} | "
            f"{floor_runs} | {_floor_throughput(e)} | {ratio} | {e['target']['text']} | {met} |"
        )
    if machine_rows:
        lines.append("")
        lines.append("| machine limit | input | median | runs (s) | throughput |")
        lines.append("|---|---|---:|---|---:|")
        for e in machine_rows:
            lines.append(f"| {e['name'].removeprefix('machine: ')} | {e['inputs']} | "
                         f"{e['median_s']:.3f} s | {_runs(e['runs_s'])} | "
                         f"{e['mb_per_s']:,.0f} MB/s |")
    for e in payload["results"]:
        run = e.get("phase_run")
        if not run:
            continue
        lines.append("")
        lines.append(f"Phases of one extra `{e['name']}` run (workers={run['workers']}), "
                     f"{run['seconds']:.2f} s:")
        lines.append("")
        lines.append("| s | share | calls | phase |")
        lines.append("|---:|---:|---:|---|")
        for row in run["phases"]:
            if row["seconds"] < 0.0005 and row["depth"] > 0:
                continue
            indent = "&nbsp;&nbsp;" * 2 * row["depth"]
            share = 100 * row["seconds"] / run["seconds"]
            lines.append(f"| {row['seconds']:.3f} | {share:.1f}% | {row['calls']} | "
                         f"{indent}{row['phase']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else Path(__file__).resolve().parent / "out" / "results.json"
    sys.stdout.write(render(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
