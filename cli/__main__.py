"""`python -m lineage.cli` runs the command line."""

from lineage.cli.entry import run

run()
