"""A model card for a checkpoint of a recorded run (docs/exports.md, "Model card").

The card is made only from the store's records: the metadata block names the corpus the
run's stream orders and, when every source of that corpus carries the same one SPDX
licence, that licence; the training-data section states the corpus, its sources, the
stream, the run's chain and the checkpoint's digests, each with the hash that pins it.
What the store does not record (the model's purpose, its evaluation, its own licence
terms) is not written. The same store gives the same bytes: no time stamps.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lineage.corpora.query import get_corpus
from lineage.errors import UnknownObjectError, UsageError
from lineage.exports.card_text import CardFacts, card_text
from lineage.runs.query import get_run
from lineage.store.base import BaseStore
from lineage.stream.query import get_stream

TAGS = ("lineage",)
# An SPDX license-list identifier by its form (the list itself is not shipped): letters,
# digits, '.', '-', '+'. LicenseRef-/DocumentRef- ids and the two special values are not
# on the list, so the metadata cannot name them as `license:`.
_SPDX_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+-]*")
_NOT_LISTED = ("licenseref-", "documentref-")
_SPECIAL = ("NOASSERTION", "NONE")


def model_card(store: BaseStore, *, run: str, checkpoint: int) -> dict[str, Any]:
    """The card of `run`'s checkpoint saved after step `checkpoint`, as the `ModelCard`
    answer's JSON object: {"metadata", "text", "evidence"}."""
    facts = card_facts(store, run, checkpoint)
    metadata = card_metadata(facts.corpus["name"], facts.corpus["sources"])
    return {"metadata": metadata, "text": card_text(facts, metadata),
            "evidence": card_evidence(facts)}


def card_facts(store: BaseStore, run: str, step: int) -> CardFacts:
    summary = get_run(store, run)  # UnknownObjectError for an unknown run
    if summary["stream"] is None:
        raise UsageError(f"run {run!r} is bound to no stream: the store records no training "
                         "data for it, so there is no card to write")
    _check_step(summary, step)
    stream = get_stream(store, summary["stream"])
    corpus = get_corpus(store, stream["corpus"])
    with store.reader(views=False) as con:
        row = con.execute(
            "SELECT weights_digest, chain_weights_digest, matches_chain, state_digest, "
            "chain_state_digest, matches_state, structure_ok, checksums_ok, risks "
            "FROM checkpoints WHERE run = ? AND step = ?", [run, step]).fetchone()
        head = con.execute("SELECT state_hash FROM steps WHERE run = ? AND state_hash IS NOT "
                           "NULL ORDER BY step DESC LIMIT 1", [run]).fetchone()
    if row is None:
        held = [str(c["step"]) for c in summary["checkpoints"]]
        raise UnknownObjectError(
            f"run {run!r} has no checkpoint ingested at step {step} (ingested: "
            f"{', '.join(held) or 'none'}); record it first with `lineage ingest checkpoint "
            f"FOLDER --run {run} --step {step}`")
    keys = ("weights_digest", "chain_weights_digest", "matches_chain", "state_digest",
            "chain_state_digest", "matches_state", "structure_ok", "checksums_ok", "risks")
    found = dict(zip(keys, row, strict=True))
    return CardFacts(summary, stream, corpus, {"step": step, **found},
                     head[0] if head else "none")


def _check_step(summary: dict[str, Any], step: int) -> None:
    first, last = summary["first_step"], summary["last_step"]
    if first is None or not first <= step <= last:
        recorded = f"steps {first}..{last}" if first is not None else "no steps"
        raise UnknownObjectError(f"run {summary['name']!r} has no step {step} "
                                 f"({recorded} recorded)")


def card_metadata(corpus: str, sources: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The metadata block: the dataset, the licence when one SPDX id covers every source,
    the tag. Keys sorted, as the YAML is written."""
    return dict(sorted({"datasets": [corpus], "tags": list(TAGS),
                        **license_fields(sources)}.items()))


def license_fields(sources: Sequence[dict[str, Any]]) -> dict[str, str]:
    """`license` (and `license_name` with `other`) from the sources' licences.

    One licence on every source and on the SPDX list: that id, in the lower case the Hub's
    `license` values use. Otherwise `other`, named by the one id when there is one (e.g. a
    LicenseRef-), `mixed` when the sources differ or one carries several, `unrecorded` when
    no source records a licence.
    """
    per_source = [tuple(s["licenses"]) for s in sources]
    distinct = sorted({lic for lics in per_source for lic in lics})
    if len(distinct) == 1 and all(lics == (distinct[0],) for lics in per_source):
        only = distinct[0]
        if is_spdx_list_id(only):
            return {"license": only.lower()}
        return {"license": "other", "license_name": only.lower()}
    return {"license": "other", "license_name": "mixed" if distinct else "unrecorded"}


def is_spdx_list_id(value: str) -> bool:
    """Whether `value` has the form of an SPDX license-list id (a single id, not an
    expression, not a LicenseRef-, not NOASSERTION or NONE)."""
    return (_SPDX_ID.fullmatch(value) is not None
            and not value.lower().startswith(_NOT_LISTED)
            and value.upper() not in _SPECIAL)


def card_evidence(facts: CardFacts) -> dict[str, Any]:
    run, stream, corpus, ckpt = facts.run, facts.stream, facts.corpus, facts.checkpoint
    return {"run": run["name"], "chain": run["chain"], "chain_head": facts.chain_head,
            "closed": run["closed"], "corpus": corpus["name"],
            "manifest_spec": corpus["manifest_spec"], "manifest_hash": corpus["manifest_hash"],
            "stream": stream["name"], "stream_spec": stream["spec"],
            "spec_hash": stream["spec_hash"],
            "occurrences_digest": stream["occurrences_digest"], "checkpoint": ckpt["step"],
            **{key: ckpt[key] for key in ("weights_digest", "chain_weights_digest",
                                           "matches_chain", "state_digest",
                                           "chain_state_digest", "matches_state")}}
