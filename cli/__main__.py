"""`python -m lineage.cli` runs the command line."""

from lineage.cli.main import run

run()
