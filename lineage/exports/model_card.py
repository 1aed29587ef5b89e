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
from collections.abc import Mapping, Sequence
from typing import Any

from lineage.corpora.query import get_corpus
from lineage.errors import UnknownObjectError, UsageError
from lineage.exports.answers import ModelCard, ModelCardEvidence, ModelCardMetadata
from lineage.exports.card_text import CardFacts, CheckpointFacts, card_text
from lineage.runs.answers import Run
from lineage.runs.query import get_run
from lineage.store.base import BaseStore
from lineage.stream.answers import shown_stream
from lineage.stream.query import get_stream

TAGS = ("lineage",)
# An SPDX license-list identifier by its form (the list itself is not shipped): letters,
# digits, '.', '-', '+'. LicenseRef-/DocumentRef- ids and the two special values are not
# on the list, so the metadata cannot name them as `license:`.
_SPDX_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+-]*")
_NOT_LISTED = ("licenseref-", "documentref-")
_SPECIAL = ("NOASSERTION", "NONE")


def model_card(store: BaseStore, *, run: str, checkpoint: int) -> ModelCard:
    """The card of `run`'s checkpoint saved after step `checkpoint`: its metadata, text
    and evidence."""
    facts = card_facts(store, run, checkpoint)
    metadata = card_metadata(facts.corpus.name, facts.corpus.sources)
    return ModelCard(metadata=metadata, text=card_text(facts, metadata),
                     evidence=card_evidence(facts))


def card_facts(store: BaseStore, run: str, step: int) -> CardFacts:
    summary = get_run(store, run)  # UnknownObjectError for an unknown run
    if summary.stream is None:
        raise UsageError(f"run {run!r} is bound to no stream: the store records no training "
                         "data for it, so there is no card to write")
    _check_step(summary, step)
    stream = shown_stream(get_stream(store, summary.stream))
    corpus = get_corpus(store, stream.corpus)
    with store.reader(views=False) as con:
        row = con.execute(
            "SELECT weights_digest, chain_weights_digest, matches_chain, state_digest, "
            "chain_state_digest, matches_state, structure_ok, checksums_ok, risks "
            "FROM checkpoints WHERE run = ? AND step = ?", [run, step]).fetchone()
        head = con.execute("SELECT state_hash FROM steps WHERE run = ? AND state_hash IS NOT "
                           "NULL ORDER BY step DESC LIMIT 1", [run]).fetchone()
    if row is None:
        held = [str(c.step) for c in summary.checkpoints]
        raise UnknownObjectError(
            f"run {run!r} has no checkpoint ingested at step {step} (ingested: "
            f"{', '.join(held) or 'none'}); record it first with `lineage ingest checkpoint "
            f"FOLDER --run {run} --step {step}`")
    return CardFacts(summary, stream, corpus, CheckpointFacts(step, *row),  # SELECT order
                     head[0] if head else "none")


def _check_step(summary: Run, step: int) -> None:
    first, last = summary.first_step, summary.last_step
    if first is None or last is None or not first <= step <= last:
        recorded = f"steps {first}..{last}" if first is not None else "no steps"
        raise UnknownObjectError(f"run {summary.name!r} has no step {step} "
                                 f"({recorded} recorded)")


def card_metadata(corpus: str, sources: Sequence[Mapping[str, Any]]) -> ModelCardMetadata:
    """The metadata block: the dataset, the licence when one SPDX id covers every source,
    the tag. Its fields are in sorted order, as the YAML is written."""
    licence = license_fields(sources)
    return ModelCardMetadata(datasets=(corpus,), license=licence["license"],
                             license_name=licence.get("license_name"), tags=TAGS)


def license_fields(sources: Sequence[Mapping[str, Any]]) -> dict[str, str]:
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


def card_evidence(facts: CardFacts) -> ModelCardEvidence:
    run, stream, corpus, ckpt = facts.run, facts.stream, facts.corpus, facts.checkpoint
    return ModelCardEvidence(
        run=run.name, chain=run.chain, chain_head=facts.chain_head, closed=run.closed,
        corpus=corpus.name, manifest_spec=corpus.manifest_spec,
        manifest_hash=corpus.manifest_hash, stream=stream["name"],
        stream_spec=stream["spec"], spec_hash=stream["spec_hash"],
        occurrences_digest=stream["occurrences_digest"], checkpoint=ckpt.step,
        weights_digest=ckpt.weights_digest, chain_weights_digest=ckpt.chain_weights_digest,
        matches_chain=ckpt.matches_chain, state_digest=ckpt.state_digest,
        chain_state_digest=ckpt.chain_state_digest, matches_state=ckpt.matches_state)
