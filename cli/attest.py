"""`lineage attest ...`: signed in-toto attestations of what the store records
(docs/attestations.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lineage.cli import output
from lineage.cli.common import JsonOption, current_store
from lineage.errors import EXIT_NO

app = typer.Typer(help="Signed in-toto attestations (DSSE) of corpora, streams, runs, ledger "
                  "records and experiments, checked by standard tools.", no_args_is_help=True)

KeyOption = Annotated[Path, typer.Option(
    "--key", metavar="KEY", help="The ed25519 private key to sign with (OpenSSH format, as "
    "ssh-keygen writes it).")]
OutOption = Annotated[Path, typer.Option("-o", "--output", help="The envelope file to write.")]


def _write(ctx: typer.Context, kind: str, name: str, key: Path, out: Path, json: bool) -> None:
    from lineage.attest.actions import attest

    written = attest(current_store(ctx), kind, name, key=key, out=out)
    if json:
        output.emit_json(written.to_dict())
    else:
        output.emit_lines([f"wrote {written.path}: {written.kind} {written.subject}, "
                           f"{written.subjects} subject(s), {written.predicate_type}, signed "
                           f"by key {written.keyid[:16]}"])


@app.command("corpus")
def corpus(ctx: typer.Context, name: Annotated[str, typer.Argument(help="The corpus.")],
           key: KeyOption, out: OutOption, json: JsonOption = False) -> None:
    """The corpus manifest: its Parquet parts and manifest hash, its counts and sources."""
    _write(ctx, "corpus", name, key, out, json)


@app.command("stream")
def stream(ctx: typer.Context, name: Annotated[str, typer.Argument(help="The stream.")],
           key: KeyOption, out: OutOption, json: JsonOption = False) -> None:
    """The stream: its occurrence parts, spec, parameters and the manifest it reads."""
    _write(ctx, "stream", name, key, out, json)


@app.command("run")
def run(ctx: typer.Context, name: Annotated[str, typer.Argument(help="The run.")],
        key: KeyOption, out: OutOption, json: JsonOption = False) -> None:
    """The run's chain: its checkpoints' files by digest, chain head, genesis, skip rule."""
    _write(ctx, "run", name, key, out, json)


@app.command("audit")
def audit(ctx: typer.Context,
          record: Annotated[str, typer.Argument(help="The ledger record's id (blake3:...).")],
          key: KeyOption, out: OutOption, json: JsonOption = False) -> None:
    """A ledger record: the states a step started from and ended in, the record and its
    leaf in the store's signed log."""
    _write(ctx, "audit", record, key, out, json)


@app.command("exp")
def exp(ctx: typer.Context,
        experiment: Annotated[str, typer.Argument(help="The experiment's id, a unique id "
                                                  "prefix, a name or NAME#N.")],
        key: KeyOption, out: OutOption, json: JsonOption = False) -> None:
    """An experiment record: its weights files by digest, and the record."""
    _write(ctx, "exp", experiment, key, out, json)


@app.command("checkpoint")
def checkpoint(
    ctx: typer.Context, run: Annotated[str, typer.Argument(help="The run.")],
    step: Annotated[int, typer.Option("--step", help="The checkpoint's step.", min=0)],
    key: Annotated[Path, typer.Option(
        "--key", metavar="KEY", help="An elliptic-curve private key (PEM, P-256/384/521), "
        "as OpenSSF model signing takes.")],
    out: Annotated[Path, typer.Option("-o", "--output", help="The model signature to write "
                                      "(the lineage binding goes to OUTPUT.lineage.json).")],
    path: Annotated[Path | None, typer.Option(
        "--path", help="The checkpoint's folder, when it moved since it was ingested.")] = None,
    json: JsonOption = False,
) -> None:
    """Sign a recorded checkpoint as OpenSSF model signing does (`model_signing verify`
    checks it), with a lineage Statement binding the same files to the run's chain."""
    from lineage.attest.actions import attest_checkpoint

    written = attest_checkpoint(current_store(ctx), run, step, key=key, out=out, folder=path)
    if json:
        output.emit_json(written.to_dict())
    else:
        output.emit_lines([f"wrote {written.path} (model signing) and {written.path}"
                           f".lineage.json: {run} step {step}, {written.subjects - 1} "
                           "file(s)"])


@app.command("verify")
def verify(ctx: typer.Context,
           path: Annotated[Path, typer.Argument(help="An attestation (DSSE envelope).")],
           key: Annotated[Path, typer.Option(
               "--key", metavar="KEY", help="The signer's ed25519 public key (an OpenSSH "
               ".pub file), or its private key.")],
           json: JsonOption = False) -> None:
    """Check the signature, then the Statement against the store (exit 1 unless both
    hold)."""
    from lineage.attest.actions import verify as verify_attestation

    result = verify_attestation(current_store(ctx), path, key=key)
    if json:
        output.emit_json(result.to_dict())
    else:
        lines = [f"signature    {'ok' if result.signature else 'FAILED'} (key {key})",
                 f"statement    {result.kind or result.predicate_type} {result.subject or ''}: "
                 f"{result.store}" + (f" ({', '.join(result.differences)})"
                                      if result.differences else "")]
        lines.append("ok" if result.ok else "FAILED")
        output.emit_lines(lines)
    if not result.ok:
        raise typer.Exit(EXIT_NO)
