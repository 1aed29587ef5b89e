"""Experiment records that travel across rented machines (docs/experiments.md).

The Python face of `lineage exp` (lineage.exp.api; answers in lineage.exp.answers):

    import lineage.exp
    record = lineage.exp.run(store, ["python", "eval.py"], weights="models/m", revision="r1")
    lineage.exp.list(store), lineage.exp.show(store, "exp-1a2b"), lineage.exp.diff(store, a, b)
    lineage.exp.logs(store, "exp-1a2b"), lineage.exp.export_bundle(store, ["exp-1a2b"], "b.zip")
    lineage.exp.import_bundle(store, "b.zip")  # `import` is a Python keyword

`list`, `show`, `diff` and `run` are named after the commands (so `list` here is not the
builtin). Importing this package imports no more than the small lineage.exp.api.

Layer 8. May import: lineage.diligence, lineage.runs, lineage.formats, lineage.store,
lineage.errors, lineage.version.
"""

from lineage.exp.api import diff_experiments as diff
from lineage.exp.api import export_bundle, import_bundle, log_chunks, logs
from lineage.exp.api import list_experiments as list  # noqa: A004
from lineage.exp.api import run_experiment as run
from lineage.exp.api import show_experiment as show

__all__ = ["diff", "export_bundle", "import_bundle", "list", "log_chunks", "logs", "run",
           "show"]
