"""The console script: the lean path for machine queries first, else the full CLI."""

from __future__ import annotations

import sys


def run() -> None:
    from lineage.cli.fast import run_fast

    try:
        code = run_fast(sys.argv[1:])
    except BrokenPipeError:
        sys.exit(2)
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted: nothing was committed\n")
        sys.exit(130)
    if code is not None:
        sys.exit(code)
    from lineage.cli.main import run as run_full

    run_full()
