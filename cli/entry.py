"""The console script: the lean path for machine queries first, else the full CLI."""

from __future__ import annotations

import sys


def run() -> None:
    from lineage.cli.fast import run_fast
    from lineage.errors import EXIT_ERROR, EXIT_INTERRUPTED

    try:
        code = run_fast(sys.argv[1:])
    except BrokenPipeError:
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:  # plain stderr: this path does not load rich
        sys.stderr.write("error: interrupted: nothing was committed\n")
        sys.exit(EXIT_INTERRUPTED)
    if code is not None:
        sys.exit(code)
    from lineage.cli.main import run as run_full

    run_full()
