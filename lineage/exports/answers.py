"""The typed answers of the exports (lineage.answer explains the pattern)."""

from __future__ import annotations

from lineage.answer import Answer, optional


class ModelCardMetadata(Answer):
    """The card's metadata block (its YAML front matter), keys in sorted order."""

    datasets: tuple[str, ...]  # the corpus the run's stream orders
    license: str  # the one SPDX id of every source, lower case; else "other"
    license_name: str | None = optional()  # with "other": the one non-list id, or "mixed"
    tags: tuple[str, ...]


class ModelCardEvidence(Answer):
    """The hashes the card states, for a program to compare with the store."""

    run: str
    chain: str  # the chain spec, e.g. lineage-chain/2
    chain_head: str  # the state_hash of the run's last recorded step
    closed: bool  # the step log ends with an end record
    corpus: str
    manifest_spec: str
    manifest_hash: str
    stream: str
    stream_spec: str
    spec_hash: str
    occurrences_digest: str
    checkpoint: int  # the step the checkpoint was saved after
    weights_digest: str | None  # computed from the checkpoint's tensors
    chain_weights_digest: str | None  # the chain's record for that step
    matches_chain: bool | None  # None: the chain has no digest to compare
    state_digest: str | None
    chain_state_digest: str | None
    matches_state: bool | None


class ModelCard(Answer):
    """`lineage export model-card`: the card's metadata, its whole text (what `-o` writes)
    and the evidence it states."""

    metadata: ModelCardMetadata
    text: str
    evidence: ModelCardEvidence
