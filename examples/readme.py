"""Run the command transcripts of README.md and check, or rewrite, the output they show.

    .venv/bin/python examples/readme.py            # exit 1 with a diff when README.md is stale
    .venv/bin/python examples/readme.py --write    # rewrite the output from a real run

(`make readme` is the second.) A transcript is a ```console block whose first line starts
with `$ `: each `$ ` line (with its continuation lines) is run by bash, in order, in a
fresh folder where `examples/` is this repository's and the store is `lineage-store`;
the lines after it, up to the next `$ ` line, are its output (stdout and stderr as a
terminal would interleave them). A `<!-- readme-run: COMMAND -->` line runs COMMAND at
that point without showing it (e.g. the training run the chain blocks read). A ```python
block runs at its point too and must succeed (its output is not shown). Durations
(`0.6 s` at the end of a line) are the only output not compared.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
_HIDDEN = re.compile(r"^<!-- readme-run: (.+) -->$")
_DURATION = re.compile(r"\d+(\.\d+)? s$")


@dataclass
class Step:
    command: str
    shown: bool
    first_line: int = 0  # index in the README's lines of the command's first line
    output_end: int = 0  # one past its last output line
    command_lines: int = 1
    must_succeed: bool = False  # a Python example: its exit code is checked, not its output


def parse(lines: list[str]) -> list[Step]:
    """Every command of the README's transcripts and hidden runs, in order."""
    steps: list[Step] = []
    in_block = transcript = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if not in_block and (hidden := _HIDDEN.match(line)):
            steps.append(Step(hidden.group(1), shown=False))
        elif line.startswith("```") and in_block:
            if steps and steps[-1].output_end == -1:
                steps[-1].output_end = i
            in_block = transcript = False
        elif line.strip() == "```python":
            end = lines.index("```", i + 1)
            code = "\n".join(lines[i + 1:end])
            steps.append(Step(f"python - <<'EOF'\n{code}\nEOF", False, must_succeed=True))
            i = end
        elif line.startswith("```"):
            in_block = True
            transcript = (line.strip() == "```console" and i + 1 < len(lines)
                          and lines[i + 1].startswith("$ "))
        elif in_block and transcript and line.startswith("$ "):
            if steps and steps[-1].output_end == -1:
                steps[-1].output_end = i
            start, text = i, line[2:]
            while _continues(text):
                i += 1
                text += "\n" + lines[i]
            steps.append(Step(text, True, start, -1, i - start + 1))
        i += 1
    return steps


def _continues(command: str) -> bool:
    if command.endswith("\\"):
        return True
    try:
        shlex.split(command)
    except ValueError:  # an open quote: the string goes on on the next line
        return True
    return False


def run(steps: list[Step]) -> list[list[str]]:
    """The output lines of every step, run in order in a fresh folder."""
    env = {k: v for k, v in os.environ.items() if k not in ("LINEAGE_STORE", "COLUMNS")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr in the order they were written
    outputs = []
    with tempfile.TemporaryDirectory(prefix="lineage-readme-") as folder:
        os.symlink(REPO / "examples", Path(folder) / "examples")
        for step in steps:
            done = subprocess.run(["bash", "-c", step.command], cwd=folder, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=300)
            outputs.append([line.rstrip() for line in done.stdout.splitlines()])
            if step.must_succeed and done.returncode != 0:
                raise RuntimeError(f"README example failed (exit {done.returncode}):\n"
                                   f"{step.command}\n{done.stdout}")
    return outputs


def rewritten(lines: list[str], steps: list[Step], outputs: list[list[str]]) -> list[str]:
    """The README's lines with each shown step's output replaced by `outputs`."""
    result = list(lines)
    for step, output in reversed(list(zip(steps, outputs, strict=True))):
        if step.shown:
            first_output = step.first_line + step.command_lines
            if _masked(result[first_output:step.output_end]) != _masked(output):
                result[first_output:step.output_end] = output  # durations alone: kept
    return result


def _masked(lines: list[str]) -> list[str]:
    return [_DURATION.sub("N s", line) for line in lines]


def stale_lines(readme: Path = README) -> list[str]:
    """A unified diff of the README against a real run; empty when it is current."""
    lines = readme.read_text(encoding="utf-8").splitlines()
    steps = parse(lines)
    fresh = rewritten(lines, steps, run(steps))
    return list(difflib.unified_diff(_masked(lines), _masked(fresh), "README.md",
                                     "a real run", lineterm=""))


def write(readme: Path = README) -> None:
    lines = readme.read_text(encoding="utf-8").splitlines()
    steps = parse(lines)
    fresh = rewritten(lines, steps, run(steps))
    readme.write_text("\n".join(fresh) + "\n", encoding="utf-8")


def main() -> int:
    if sys.argv[1:] == ["--write"]:
        write()
        return 0
    diff = stale_lines()
    print("\n".join(diff) or "README.md is current")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
