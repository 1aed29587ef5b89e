"""Start-up of the lean `--json` path against the DuckDB floor, optionally beside another
checkout (to see what a change cost): medians of interleaved runs.

    python bench/startup.py STORE FILE [--base OTHER_CHECKOUT] [--runs 61]

STORE holds a stream; FILE is looked up with `trained-on`. Each checkout is run with its
own `.venv` (make install), so both are byte-compiled as a wheel install would be.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def commands(store: str, file: str, base: Path | None) -> dict[str, list[str]]:
    floor = [sys.executable, "-c", "import duckdb; duckdb.connect(':memory:').execute('select 1')"]
    found = {"floor": floor}
    for tag, root in (("base", base), ("this", REPO)):
        if root is None:
            continue
        lineage = str(root / ".venv" / "bin" / "lineage")
        found[f"{tag}: docs --json"] = [lineage, "--store", store, "docs", "--step", "2",
                                        "--json"]
        found[f"{tag}: trained-on --json"] = [lineage, "--store", store, "trained-on", file,
                                              "--json"]
        found[f"{tag}: import lineage"] = [str(root / ".venv" / "bin" / "python"), "-c",
                                           "import lineage"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store")
    parser.add_argument("file")
    parser.add_argument("--base", type=Path)
    parser.add_argument("--runs", type=int, default=61)
    args = parser.parse_args()
    cmds = commands(args.store, args.file, args.base)
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(args.runs):  # interleaved, so a busy moment hits every command alike
        for name, cmd in cmds.items():
            started = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - started)
    floor = statistics.median(times["floor"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:28s} {median * 1000:7.1f} ms  {median / floor:5.2f}× floor")


if __name__ == "__main__":
    main()
