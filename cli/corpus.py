"""`lineage corpus list|show|status|duplicates`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from lineage.cli import output
from lineage.cli.common import (
    CascadeOption,
    CsvOption,
    JsonOption,
    NlOption,
    TsvOption,
    current_store,
    remove_and_report,
    rows_format,
)
from lineage.errors import EXIT_NO
from lineage.store.lookup_reads import with_kept_reads

if TYPE_CHECKING:
    from lineage.corpora.answers import CorpusStatus, TextIndex

app = typer.Typer(help="Recorded corpora.", no_args_is_help=True)


@app.command("list")
def list_(ctx: typer.Context, json: JsonOption = False, csv: CsvOption = False,
        tsv: TsvOption = False, nl: NlOption = False) -> None:
    """Every corpus with its totals and manifest hash."""
    fmt = rows_format(json=json, csv=csv, tsv=tsv, nl=nl)
    rows = current_store(ctx).corpora()
    if fmt:
        output.emit_rows(fmt, rows)
        return
    if json:
        output.emit_json(rows.to_list())
        return
    output.emit_table(("name", "documents", "tokens", "bytes", "manifest_hash"),
                      [[row.name, row.documents, row.tokens, row.bytes, row.manifest_hash]
                       for row in rows])


@app.command("show")
def show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The corpus name.")],
    json: JsonOption = False,
    csv: CsvOption = False,
    tsv: TsvOption = False,
    nl: NlOption = False,
) -> None:
    """Sources with document and token counts, shares, licences, and the manifest hash."""
    fmt = rows_format(json=json, csv=csv, tsv=tsv, nl=nl)
    store = current_store(ctx)
    info = with_kept_reads(store, lambda: store.corpus(name))
    if fmt:
        output.emit_rows(fmt, info)
        return
    if json:
        output.emit_json(info.to_dict())
        return
    output.emit_lines([
        f"corpus      {info.name}",
        f"manifest    {info.manifest_hash} ({info.manifest_spec})",
        f"documents   {info.documents:,} ({info.dropped_empty:,} empty dropped)",
        f"tokens      {info.tokens:,} ({info.tokenizer})",
        f"bytes       {info.bytes:,}",
        f"licenses    {', '.join(info.licenses) or '(none recorded)'}",
    ])
    if info.text_index is not None:
        output.emit_lines([_text_index_line(info.text_index)])
    output.emit_table(
        ("source", "documents", "tokens", "share", "licenses"),
        [[s.source, s.documents, s.tokens, f"{s.share:.2%}", list(s.licenses)]
         for s in info.sources],
    )


def _text_index_line(index: TextIndex) -> str:
    share = index.index_bytes / index.text_bytes if index.text_bytes else 0.0
    return (f"text index  {index.fingerprints:,} fingerprints of {index.documents:,} "
            f"documents ({index.words:,} words, {share:.0%} of their size), "
            f"{index.text_spec}, {index.fingerprint_spec} k={index.k} w={index.w}")


@app.command("duplicates")
def duplicates(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The corpus name.")],
    threshold: Annotated[
        float, typer.Option(help="Shingle Jaccard similarity a near-duplicate pair must "
                            "reach, estimated from the bands its signatures share "
                            "(0.4: 3 of 42 bands).", min=0.0, max=1.0)
    ] = 0.4,
    limit: Annotated[int, typer.Option(help="Clusters listed (--json lists every one).",
                                       min=0)] = 20,
    json: JsonOption = False,
) -> None:
    """Clusters of copies in a corpus: exact (the same bytes), text (the same normalized
    text) and near (edited copies: lineage-near/1 signatures agreeing on enough bands),
    across sources, from the stored tables."""
    answer = current_store(ctx).corpus_duplicates(name, threshold=threshold)
    if json:
        output.emit_json(answer.to_dict())
        return
    kinds = ", ".join(f"{count:,} {kind}" for kind, count in answer.clusters_by_kind.items())
    near = (f"near: {answer.near_spec}, Jaccard >= {answer.threshold} ({answer.min_shared_bands}"
            f" of 42 bands)" if answer.near_index else "no near-duplicate index")
    output.emit_lines([f"corpus {output.shown(answer.corpus)}: {len(answer.clusters):,} "
                       f"clusters of copies ({kinds}) holding "
                       f"{answer.documents_in_clusters:,} of {answer.documents:,} documents; "
                       f"{near}"])
    rows = []
    for cluster in answer.clusters[:limit]:
        names = [f"{d.source}/{d.doc_id}" if not d.doc_id.startswith(f"{d.source}/")
                 else d.doc_id for d in cluster.documents]
        shown = ", ".join(names[:3]) + (f", ... {len(names) - 3:,} more"
                                        if len(names) > 3 else "")
        bands = ("" if cluster.shared_bands is None
                 else f"{cluster.shared_bands[0]}-{cluster.shared_bands[1]}")
        rows.append([cluster.kind, cluster.size, bands, shown])
    if rows:
        output.emit_table(("kind", "documents", "shared bands", "doc_ids"), rows)
    if len(answer.clusters) > limit:
        output.emit_lines([f"... {len(answer.clusters) - limit:,} more clusters (--limit, "
                           "--json)"])


@app.command("status")
def status(
    ctx: typer.Context,
    args: Annotated[
        list[str] | None,
        typer.Argument(help="NAME [PATH...]: the recorded corpus, then the local copy's "
                       "folders and shards (default: those it was ingested from). With "
                       "--manifest: PATH... only.", show_default=False, metavar="[NAME] PATH..."),
    ] = None,
    manifest: Annotated[
        str | None, typer.Option(help="Compare with this published ready manifest (JSONL or "
                                 "Parquet), or the manifest parts a Croissant file names, "
                                 "instead of a recorded corpus; needs no store.")
    ] = None,
    source: Annotated[str | None, typer.Option(help="As `ingest corpus --source` "
                                               "(default: what the ingest used).")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="As `ingest corpus --format` "
                                            "(default: what the ingest used).")] = None,
    links: Annotated[str | None, typer.Option(help="As `ingest corpus --links` "
                                              "(default: what the ingest used).")] = None,
    limit: Annotated[int, typer.Option(help="Documents listed of each kind.", min=0)] = 20,
    json: JsonOption = False,
) -> None:
    """Does a local copy still match the recorded corpus (or a published manifest)? Each
    document is new, changed, missing or unchanged, by doc_id and content hash, read as
    `ingest corpus` reads it; nothing is written. Exit 1 when anything differs."""
    from lineage.ingest.status import corpus_status

    names = list(args or [])
    corpus = None if manifest is not None else (names.pop(0) if names else None)
    if manifest is None and corpus is None:
        raise typer.BadParameter("give the corpus NAME (or --manifest FILE)",
                                 param_hint="NAME")
    store = current_store(ctx) if corpus is not None else None
    with output.progress_bar(not json) as progress:
        answer = corpus_status(store, corpus, names, manifest=manifest, source=source,
                               fmt=fmt, links=links, limit=limit, progress=progress)
    if json:
        output.emit_json(answer.to_dict())
    else:
        output.emit_lines(_status_lines(answer))
    if not answer.in_sync:
        raise typer.Exit(EXIT_NO)


def _status_lines(answer: CorpusStatus) -> list[str]:
    verdict = "in sync" if answer.in_sync else "differs"
    lines = [f"{answer.reference} ({answer.reference_hash}): {verdict}",
             f"  {answer.local:,} local documents against {answer.recorded:,}: "
             f"{answer.unchanged:,} unchanged, {answer.new:,} new, {answer.changed:,} "
             f"changed, {answer.missing:,} missing"]
    if answer.local_hash == answer.reference_hash:
        lines.append("  the local copy's manifest hash is the same")
    for kind, count, listed in (("new", answer.new, answer.new_documents),
                                ("missing", answer.missing, answer.missing_documents)):
        lines.extend(f"  {kind:<8} {output.shown(doc_id)}" for doc_id in listed)
        if count > len(listed):
            lines.append(f"  ... and {count - len(listed):,} more {kind}")
    lines.extend(f"  changed  {output.shown(c.doc_id)} ({c.recorded[:16]} -> {c.local[:16]})"
                 for c in answer.changed_documents)
    if answer.changed > len(answer.changed_documents):
        lines.append(f"  ... and {answer.changed - len(answer.changed_documents):,} more "
                     "changed")
    return lines


@app.command("remove")
def remove(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The corpus name.")],
    cascade: CascadeOption = False,
    json: JsonOption = False,
) -> None:
    """Remove the corpus record in one commit (exit 2 when something depends on it, unless
    --cascade); `lineage store gc` then deletes its files. Removing it twice does nothing."""
    remove_and_report(ctx, "corpus", name, cascade=cascade, json=json)
