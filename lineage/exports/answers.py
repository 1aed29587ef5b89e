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


# `lineage export ai-act-summary`: the Commission's template, section by section. A str
# field the store cannot fill holds "to be completed by the provider".


class AiActTemplate(Answer):
    """The template the summary follows, and its version."""

    title: str
    issuer: str
    version: str  # the date the Commission published it
    legal_basis: str


class AiActSubject(Answer):
    """What the summary was drawn from, with the hashes that pin it."""

    run: str | None
    corpus: str
    manifest_hash: str
    stream: str | None
    stream_spec_hash: str | None


class AiActTextSize(Answer):
    """Section 1: the size of the text, in the template's range and as recorded."""

    range: str  # one of the template's text size ranges
    tokens: int  # the corpus's tokens, as its tokenizer counted them
    tokenizer: str
    bytes: int
    documents: int
    stream_tokens: int | None  # the tokens the run's stream orders (with --run)


class AiActGeneral(Answer):
    """Section 1, general information."""

    provider: str
    model_name: str
    model_dependencies: str
    placed_on_market: str
    modalities: tuple[str, ...]
    text_size: AiActTextSize
    types_of_content: str
    knowledge_cutoff: str


class AiActSource(Answer):
    """One source the corpus records; its kind in the template's list is the provider's."""

    source: str
    documents: int
    tokens: int
    bytes: int
    share: float  # of the corpus's tokens, 6 places
    licenses: tuple[str, ...]
    kind: str


class AiActDomain(Answer):
    """One of the top domain names of the web content, by bytes."""

    domain: str
    documents: int
    bytes: int
    tokens: int
    share_of_web_bytes: float


class AiActScraped(Answer):
    """Section 2.3, data crawled and scraped from online sources: what the documents'
    URLs show. Documents without an http(s) URL (file paths) name no domain."""

    crawlers: str
    collection_period: str
    web_documents: int
    web_bytes: int
    web_tokens: int
    domains: int
    top_domains_rule: str
    top_domains: tuple[AiActDomain, ...]
    other_documents: int
    other_bytes: int


class AiActSources(Answer):
    """Section 2, the list of data sources."""

    recorded_sources: tuple[AiActSource, ...]
    publicly_available_datasets: str
    private_datasets: str
    scraped: AiActScraped
    user_data: str
    synthetic_data: str
    other_sources: str


class AiActProcessing(Answer):
    """Section 3, data processing aspects: none is recorded by the store."""

    opt_out_compliance: str
    illegal_content_removal: str
    other_information: str


class AiActSummary(Answer):
    """`lineage export ai-act-summary`: the draft public summary of training content."""

    template: AiActTemplate
    subject: AiActSubject
    general_information: AiActGeneral
    data_sources: AiActSources
    data_processing: AiActProcessing
