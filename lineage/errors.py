"""Exceptions raised by lineage, and the exit code each maps to.

    LineageError                  any failure lineage reports (exit 2)
    ├── UsageError                arguments that cannot work together
    ├── InputError                a bad input file: names the file, the place and the rule
    │   └── RuleError             ... from a format reader, with a rule id (`.rule_id`)
    ├── ConflictError             the store already holds other content under that name
    ├── UnknownObjectError        a named corpus, stream, run, step, experiment or
    │                             checkpoint does not exist: an error in the question
    ├── NotFoundError             a lookup answered "no" (exit 1)
    └── StoreError                the store is missing, damaged or of an unknown schema
        ├── StoreBusyError        another process holds the catalog for too long
        ├── StoreFullError        the disk filled up during a write (nothing was committed)
        ├── StoreWriteError       the file system failed a write otherwise (EIO, read-only)
        ├── CommitUnknownError    a write failed at its commit and the catalog cannot say
        │                         now whether it committed (its files were kept)
        └── DamagedPartError      a Parquet part's bytes differ from what the catalog recorded

The command line maps these to exit codes in one place (`lineage.cli.main`), following
grep: 0 ok or yes, 1 a check or lookup answered no, 2 an error, 130 interrupted.
"No" is an answer about something that exists (`trained-on` found no match, a chain is
broken, a check failed); asking about something that does not exist (`corpus show nope`,
`docs --stream nope`, a missing path) is an error, exit 2.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_NO = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


class LineageError(Exception):
    """Base class: the message is one line that says what, where, and what to do."""

    exit_code = EXIT_ERROR


class UsageError(LineageError):
    """Arguments that cannot work together."""


def too_little_memory(setting: str, work: str, exc: Exception) -> UsageError:
    """The error for DuckDB running out of the memory budget a user gave it."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return UsageError(f"{setting} is too small for this {work} ({first}); give it more")


class InputError(LineageError):
    """An input file breaks a rule; the message names the file and the place."""

    def __init__(self, path: object, rule: str, *, where: str | None = None) -> None:
        self.path = str(path)
        self.rule = rule
        self.where = where
        place = f"{self.path}:{where}" if where else self.path
        super().__init__(f"{place}: {rule}")

    def __reduce__(self) -> tuple[object, ...]:  # survives a trip through a process pool
        return (_rebuild_input_error, (self.path, self.rule, self.where))


def _rebuild_input_error(path: str, rule: str, where: str | None) -> InputError:
    return InputError(path, rule, where=where)


class RuleError(InputError):
    """An InputError from a format reader that names its rule by id.

    `.rule_id` is the id (e.g. "header-length"), `.message` the detail, and `.rule` reads
    "<id>: <message>". Each reader subclasses it so callers can tell formats apart.
    """

    def __init__(
        self, path: object, rule_id: str, message: str, *, where: str | None = None
    ) -> None:
        self.rule_id = rule_id
        self.message = message
        super().__init__(path, f"{rule_id}: {message}", where=where)

    def __reduce__(self) -> tuple[object, ...]:  # keeps the class and rule id across processes
        return (_rebuild_rule_error, (type(self), self.path, self.rule_id, self.message,
                                      self.where))


def _rebuild_rule_error(
    cls: type[RuleError], path: str, rule_id: str, message: str, where: str | None
) -> RuleError:
    return cls(path, rule_id, message, where=where)


class ConflictError(LineageError):
    """The store already holds different content under the requested name."""


class UnknownObjectError(LineageError):
    """The question names something the store does not hold (a corpus, stream, run, step,
    experiment or checkpoint): an error in the question, not a "no" (exit 2)."""


class NotFoundError(LineageError):
    """A lookup about something that exists answered "no" (exit 1)."""

    exit_code = EXIT_NO


class StoreError(LineageError):
    """The store is missing, damaged, or written by an unknown schema version."""


class StoreBusyError(StoreError):
    """Another process held the catalog longer than the wait budget."""

    def __init__(self, path: object, pid: int | None, waited: float) -> None:
        self.pid = pid
        holder = f"pid {pid}" if pid is not None else "another process"
        super().__init__(
            f"store busy ({holder}): {path} stayed locked for {waited:.1f} s; "
            "retry when that process finishes, or raise LINEAGE_BUSY_TIMEOUT"
        )


class StoreFullError(StoreError):
    """The disk filled up; the partial write was removed and nothing was committed."""


class StoreWriteError(StoreError):
    """The file system failed a write (an I/O error, a read-only disk); the partial write
    was removed and nothing was committed."""


class CommitUnknownError(StoreError):
    """A write failed at its commit, and reading the catalog again could not tell whether
    the commit happened; the parts it renamed into place were kept (garbage if not)."""

    def __init__(self, root: object, exc: BaseException) -> None:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        super().__init__(
            f"{root}: the write failed at its commit ({first}) and the catalog cannot be "
            "read to tell whether it committed; run `lineage store repair`, then re-run "
            "(the write is idempotent)")


class DamagedPartError(StoreError):
    """A Parquet part a query was about to read differs from what was written."""

    def __init__(self, path: object, what: str,
                 remedy: str = "run `lineage store verify`") -> None:
        self.path, self.what = str(path), what
        super().__init__(f"{path}: damaged part: {what}; {remedy}")
