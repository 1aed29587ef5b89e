"""The audit ledger (docs/audit-spec.md, lineage-audit/1): volunteers replay a run's
steps, a step each, record what they found, and anyone can see how far the run is covered.

`records` defines the records (ids, validation, builders), `ledger` stores and reads them,
`status` applies the status rules, typed by `answers`; `replay` runs an audit unit with
the auditor's own replay function (`state_files`, `machine` serve it); `sshsig` signs and
checks records in the format of `ssh-keygen -Y`, and `bundle` carries ledgers between
machines; `report` draws the coverage page; `actions` is what each `lineage audit`
command does, one function each, for the command line, the server and Python alike.

Layer 7. May import: lineage.runs, lineage.stream, lineage.corpora, lineage.formats,
lineage.store, lineage.errors, lineage.version.
"""
