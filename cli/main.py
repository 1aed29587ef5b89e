"""The `lineage` application: global options, sub-commands, and error → exit code mapping."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any, NoReturn

import click
import typer
from typer.core import TyperGroup

from lineage import __version__
from lineage.cli import output
from lineage.errors import EXIT_ERROR, EXIT_INTERRUPTED, LineageError


class LineageGroup(TyperGroup):
    """Maps library errors to one-line messages and grep-style exit codes.

    Living in the group (not in `run`) means CliRunner tests see exactly what users see.
    """

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:  # a bad global option
            _usage_error(exc)

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return self._invoke(ctx)
        finally:
            from lineage.store.base import take_notices

            for notice in take_notices():  # e.g. a commit left in the catalog's log
                output.warning(notice)

    def _invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # an unknown command, a bad option or value
            _usage_error(exc)
        except LineageError as exc:
            if _debug(ctx):
                raise
            # The whole message: a newline in it belongs to a value (a path, a name), and
            # output.error shows it escaped, on the one line.
            output.error(str(exc).strip() or type(exc).__name__)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            if _debug(ctx):
                raise
            output.error("interrupted: nothing was committed")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except (typer.Exit, typer.Abort, click.exceptions.ClickException):  # usage: Typer reports
            raise
        except BrokenPipeError:  # the reader went away (`... --help | head`): not a bug
            raise
        except OSError as exc:  # the system refused (a disk error the command did not map)
            if _debug(ctx):
                raise
            where = f"{exc.filename}: " if exc.filename else ""
            output.error(f"{where}{exc.strerror or exc}")
            raise typer.Exit(EXIT_ERROR) from None
        except Exception as exc:  # a bug: still one line, with the way to the traceback
            if _debug(ctx):
                raise
            first = (str(exc).strip().splitlines() or [""])[0]
            output.error(f"unexpected {type(exc).__name__}: {first} (re-run with --debug)")
            raise typer.Exit(EXIT_ERROR) from None


def _usage_error(exc: click.UsageError) -> NoReturn:
    """Click's usage errors as one line too, pointing at the help (exit 2)."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # the help was asked for by omission
        raise exc
    where = f" (see `{exc.ctx.command_path} -h`)" if exc.ctx else ""
    output.error(exc.format_message() + where)
    raise click.exceptions.Exit(exc.exit_code) from None


def _debug(ctx: typer.Context) -> bool:
    state = ctx.obj if isinstance(ctx.obj, dict) else {}
    return bool(state.get("debug")) or os.environ.get("LINEAGE_DEBUG") == "1"


def _new_app() -> typer.Typer:
    return typer.Typer(
        cls=LineageGroup,
        name="lineage",
        help="Provenance and lineage of training data: what went in, in which order, "
        "with evidence.",
        epilog="Exit codes: 0 ok, 1 a check or lookup answered no, 2 an error (a missing "
        "path, an unknown name, a bad option value), 130 interrupted.",
        no_args_is_help=True,
        add_completion=False,
        context_settings={"help_option_names": ["-h", "--help"]},
        pretty_exceptions_enable=False,
    )


def _version(value: bool) -> None:
    if value:
        output.emit_lines([f"lineage {__version__}"])
        raise typer.Exit()


def main(
    ctx: typer.Context,
    store: Annotated[
        str | None,
        typer.Option(
            "--store", metavar="PATH", envvar="LINEAGE_STORE", show_envvar=True,
            help="The store directory (default ./lineage-store).",
        ),
    ] = None,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    ctx.obj = {"store": store, "debug": debug}


# Every top-level command in help order: (name, module under lineage.cli, attribute, whether
# the attribute is a sub-application).
_COMMANDS: tuple[tuple[str, str, str, bool], ...] = (
    ("ingest", "ingest", "app", True),
    ("corpus", "corpus", "app", True),
    ("stream", "stream", "app", True),
    ("run", "run", "app", True),
    ("chain", "run", "chain_app", True),
    ("exp", "exp", "app", True),
    ("audit", "audit", "app", True),
    ("attest", "attest", "app", True),
    ("export", "export", "app", True),
    ("store", "store", "app", True),
    ("init", "store", "init", False),
    ("sql", "store", "sql", False),
    ("serve", "serve", "serve", False),
    ("docs", "query", "docs", False),
    ("trained-on", "query", "trained_on", False),
    ("trace", "query", "trace", False),
    ("verify", "verify", "verify", False),
    ("sums", "verify", "sums", False),
    ("inspect", "report", "inspect", False),
    ("report", "report", "report", False),
)  # fmt: skip
_GLOBAL_OPTIONS_WITH_VALUE = ("--store",)


def build_app(only: str | None = None) -> typer.Typer:
    """The application with every command, or with `only` that one (what a process that
    runs one command needs: Typer turns every registered command's signature into click
    parameters when it starts, about 50 ms for all of them)."""
    from importlib import import_module

    new = _new_app()
    new.callback()(main)
    for name, module, attribute, is_group in _COMMANDS:
        if only is not None and name != only:
            continue
        target = getattr(import_module(f"lineage.cli.{module}"), attribute)
        if is_group:
            new.add_typer(target, name=name)
        else:
            new.command(name)(target)
    return new


def _command_named(argv: list[str]) -> str | None:
    """The top-level command `argv` runs, when it names one after the global options;
    None (the whole application: help, a typo's suggestions) otherwise."""
    args = iter(argv)
    for arg in args:
        if arg in _GLOBAL_OPTIONS_WITH_VALUE:
            next(args, None)
        elif not arg.startswith("-"):
            return arg if any(arg == name for name, *_ in _COMMANDS) else None
    return None


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole application, for tests and the docs generator
        whole = build_app()
        globals()["app"] = whole
        return whole
    raise AttributeError(name)


def run() -> None:
    """Console-script entry point."""
    from lineage.cli import common

    common.WHOLE_PROCESS = True
    try:
        build_app(_command_named(sys.argv[1:]))(prog_name="lineage")
    except KeyboardInterrupt:  # raised before a command was chosen
        output.error("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        sys.exit(EXIT_ERROR)
