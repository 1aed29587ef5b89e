"""What each `lineage audit` command does, one function each, so that the command line,
the server and Python share them: make a claim, add files of records, replay a step and
record it, export and import bundles, sign files of records, write the coverage page.

    added = add_record_files(store, [Path("alice.jsonl")])
    added.added, added.present                # record ids

The command line parses its options, calls one of these and renders the answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.store.base import BaseStore
from lineage.userfiles import check_output_path, write_output

if TYPE_CHECKING:
    from lineage.audit.answers import (
        AuditReport,
        BundleImported,
        BundleWritten,
        ClaimMade,
        RecordsAdded,
        RecordsSigned,
        ReplayOutcome,
    )
    from lineage.audit.bundle import LogExport


def signed_with(records: list[dict[str, Any]], key: str | Path | None) -> list[dict[str, Any]]:
    """The records signed with `key`, or as they are without one."""
    if key is None:
        return records
    from lineage.audit.sshsig import sign_record

    return [sign_record(record, key) for record in records]


def make_claim(store: BaseStore, run: str, *, first_step: int, last_step: int, auditor: str,
               expires: timedelta = timedelta(days=7), sign_key: str | Path | None = None,
               payout: str | None = None) -> ClaimMade:
    """Claim steps first_step..last_step of `run` for `auditor` until `expires` from now,
    signed with `sign_key` when one is given, and add the claim to the ledger."""
    from lineage.audit.answers import ClaimMade
    from lineage.audit.ledger import add_records, run_head
    from lineage.audit.records import auditor as auditor_of
    from lineage.audit.records import claim, record_id

    record = claim(run=run, chain_head=run_head(store, run), first_step=first_step,
                   last_step=last_step, auditor=auditor_of(auditor, payout=payout),
                   expires=expires)
    (record,) = signed_with([record], sign_key)
    added = add_records(store, [record], source="claim")
    return ClaimMade(id=record_id(record), added=bool(added.added), record=record)


def add_record_files(store: BaseStore, paths: Iterable[str | Path]) -> RecordsAdded:
    """Add the records of JSON or JSONL files made elsewhere; every file is read before
    any record is added, and a record the ledger holds is left as it is."""
    from lineage.audit.answers import RecordsAdded
    from lineage.audit.ledger import add_records

    batches = [(path, read_records(path)) for path in paths]
    added: list[str] = []
    present: list[str] = []
    newly_signed: list[str] = []
    for path, records in batches:
        result = add_records(store, records, source=str(path))
        added += result.added
        present += result.present
        newly_signed += result.newly_signed
    return RecordsAdded(added=tuple(added), present=tuple(present),
                        newly_signed=tuple(newly_signed))


def read_records(path: str | Path) -> list[Any]:
    """The values of a JSON file (one record, or a list of them) or a JSONL file (one
    record a line), unchecked: the ledger checks each one."""
    from lineage.audit.record_files import read_records_file

    return read_records_file(path)[0]


def replay_and_record(store: BaseStore, run: str, step: int, *, replayer: str,
                      start: Path | None = None, save: Path | None = None,
                      auditor: str | None = None, sign_key: str | Path | None = None,
                      record: bool = True, payout: str | None = None,
                      requirements: Path | None = None, force: bool = False) -> ReplayOutcome:
    """Replay step `step` of `run` with the replay function `replayer` names
    (MODULE:FUNCTION, imported and run: the caller's own code), sign the records with
    `sign_key` when one is given, and add them to the ledger unless `record` is False."""
    from lineage.audit.answers import ReplayOutcome
    from lineage.audit.replay import load_replayer, replay_step

    public_key = None
    if sign_key is not None:  # read the key first: a bad key must not cost a replay
        from lineage.audit.sshsig import public_key_line

        public_key = public_key_line(sign_key)
    function, source = load_replayer(replayer)
    result = replay_step(store, run, step, function, replayer_name=replayer,
                         replayer_source=source, start=start, save=save,
                         auditor=auditor or user_name(), public_key=public_key,
                         payout=payout, requirements=requirements, force=force)
    made = [r for r in (result["attestation"], result["checkpoint"]) if r is not None]
    records = signed_with(made, sign_key)
    if record:
        from lineage.audit.ledger import add_records

        add_records(store, records, source="replay")
    return ReplayOutcome(attestation=records[0],
                         checkpoint=records[1] if len(records) > 1 else None)


def user_name() -> str:
    """Who runs this, for a record made without a name."""
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no user name in the environment or password database
        return "anonymous"


def export_bundle(store: BaseStore, run: str, out: str | Path) -> BundleWritten:
    """Write the run's records as a bundle at `out`."""
    from lineage.audit.answers import BundleWritten
    from lineage.audit.bundle import write_bundle
    from lineage.audit.ledger import iter_records
    from lineage.runs.query import get_run

    check_output_path(out)
    get_run(store, run)  # an unknown run is an error, not an empty bundle
    records = iter_records(store, run)
    written = write_bundle(records, out, run=run, log=_log_export(store, records))
    return BundleWritten(bundle=written["bundle"], spec=written["spec"], run=written["run"],
                         records=written["records"], digest=written["digest"])


def _log_export(store: BaseStore, records: list[dict[str, Any]]) -> LogExport:
    """The store's log as a bundle carries it; a store whose ledger predates its log (a
    migrated one, not written since) starts the log first."""
    from lineage.audit.bundle import LogExport
    from lineage.audit.log import all_tiles, append_records, latest_positions, own_head
    from lineage.audit.records import record_id

    with store.reader(views=False) as con:
        head = own_head(con)
    if head is None:
        with store.writer() as con:
            append_records(con, store.root, [])
    with store.reader(views=False) as con:
        head = own_head(con)
        assert head is not None
        positions = latest_positions(con, head.origin, [record_id(r) for r in records])
        return LogExport(head.checkpoint, head.verifier_key, head.size,
                         all_tiles(con, head.origin), positions)


def import_bundle(store: BaseStore, path: str | Path, *,
                  allowed_signers: str | Path | None = None,
                  require_signed: bool = False) -> BundleImported:
    """Check a bundle whole (ids, digests, signatures, and with `allowed_signers` whose
    keys may sign), then add the records the ledger does not hold."""
    from lineage.audit.answers import BundleImported
    from lineage.audit.bundle import read_bundle_log
    from lineage.audit.ledger import add_records

    records, log_copy = read_bundle_log(path, allowed_signers=allowed_signers,
                                        require_signed=require_signed)  # checked whole
    added = add_records(store, records, source=f"bundle {Path(path).name}", log_copy=log_copy)
    return BundleImported(
        bundle=str(path), records=len(records),
        signed=sum(1 for record in records if record.get("signature") is not None),
        added=tuple(added.added), already_present=tuple(added.present),
        newly_signed=tuple(added.newly_signed))


def sign_file(path: str | Path, key: str | Path, *,
              out: str | Path | None = None) -> tuple[RecordsSigned, str]:
    """Sign the records of a file with `key`; write them to `out` when given, in the form
    the file had. Returns the answer and the signed records' text."""
    from lineage.audit.answers import RecordsSigned
    from lineage.audit.bundle import records_text, sign_records_file
    from lineage.audit.records import record_id

    if out is not None:
        check_output_path(out)  # before the key and the records are read
    signed, form = sign_records_file(path, key)
    text = records_text(signed, form)
    if out is not None:
        write_output(out, text)
    return RecordsSigned(
        file=str(path), output=str(out) if out else None,
        ids=tuple(record_id(record) for record in signed),
        public_key=signed[0]["auditor"]["public_key"] if signed else None,
        records=None if out else tuple(signed)), text


def write_report(store: BaseStore, run: str, fmt: str = "md", *,
                 out: str | Path | None = None) -> tuple[AuditReport, str]:
    """The run's coverage page in `fmt` (html, md or json), written to `out` when given
    (atomically); returns the answer and the page."""
    from lineage.audit.report import check_format, coverage_report, render

    check_format(fmt)  # before the ledger is read
    if out is not None:
        check_output_path(out)
    answer = coverage_report(store, run)
    text = render(answer, fmt)
    if out is not None:
        write_output(out, text)
    return answer, text
