"""A draft of the EU AI Act public summary of training content (docs/exports.md,
"AI Act summary of training content").

Article 53(1)(d) of the AI Act asks every provider of a general-purpose AI model to
publish a summary of the content used for training, on the Commission's template. This
module fills the fields of that template the store can compute (modality, sizes in the
template's ranges, the recorded sources with their token shares and licences, the top
domain names of web content by size) and writes every other field as "to be completed by
the provider": nothing the store does not record is guessed. No time stamps: the same
store gives the same summary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from lineage.corpora.query import get_corpus
from lineage.errors import UsageError
from lineage.exports.answers import (
    AiActDomain,
    AiActGeneral,
    AiActProcessing,
    AiActScraped,
    AiActSource,
    AiActSources,
    AiActSubject,
    AiActSummary,
    AiActTemplate,
    AiActTextSize,
)
from lineage.runs.query import get_run
from lineage.store.base import BaseStore
from lineage.stream.answers import shown_stream
from lineage.stream.query import get_stream

if TYPE_CHECKING:
    from lineage.corpora.answers import Corpus

TO_COMPLETE = "to be completed by the provider"
TEMPLATE = AiActTemplate(
    title="Explanatory Notice and Template for the Public Summary of Training Content "
          "for general-purpose AI models",
    issuer="European Commission (AI Office)",
    version="2025-07-24",
    legal_basis="Article 53(1)(d) of Regulation (EU) 2024/1689 (AI Act)",
)
# The template's size ranges for text (section 1.3), by their upper bound in tokens.
TEXT_SIZE_RANGES = ((10**9, "less than 1 billion tokens"),
                    (10**13, "1 billion to 10 trillion tokens"),
                    (None, "more than 10 trillion tokens"))
# Section 2.3: the top 10% of all domain names by the size of the content scraped (SMEs
# may list the top 5% or 1,000 names, whichever is lower; the provider says which applies).
DOMAIN_SHARE = 0.10
DOMAIN_RULE = ("the top 10% of all domain names, by the size (bytes) of the content "
               "taken from each, rounded up to a whole name")
WEB_SCHEMES = ("http", "https")


def ai_act_summary(store: BaseStore, *, run: str | None = None,
                   corpus: str | None = None) -> AiActSummary:
    """The summary for `run` (through its stream's corpus) or for `corpus`."""
    if (run is None) == (corpus is None):
        raise UsageError("name exactly one of --run RUN or --corpus CORPUS")
    stream = None
    if run is not None:
        summary = get_run(store, run)  # UnknownObjectError for an unknown run
        if summary.stream is None:
            raise UsageError(f"run {run!r} is bound to no stream: the store records no "
                             "training data for it, so there is nothing to summarise")
        stream = shown_stream(get_stream(store, summary.stream))
        corpus = stream.corpus
    assert corpus is not None
    facts = get_corpus(store, corpus)  # UnknownObjectError for an unknown corpus
    return AiActSummary(
        template=TEMPLATE, subject=_subject(run, facts, stream),
        general_information=_general(facts, stream),
        data_sources=_sources(facts, web_content(store, corpus)),
        data_processing=AiActProcessing(opt_out_compliance=TO_COMPLETE,
                                        illegal_content_removal=TO_COMPLETE,
                                        other_information=TO_COMPLETE))


def _subject(run: str | None, corpus: Corpus,
             stream: Mapping[str, Any] | None) -> AiActSubject:
    return AiActSubject(run=run, corpus=corpus.name, manifest_hash=corpus.manifest_hash,
                        stream=stream["name"] if stream else None,
                        stream_spec_hash=stream["spec_hash"] if stream else None)


def _general(corpus: Corpus, stream: Mapping[str, Any] | None) -> AiActGeneral:
    tokens = int(corpus.tokens or 0)
    size = AiActTextSize(range=size_range(tokens), tokens=tokens, tokenizer=corpus.tokenizer,
                         bytes=int(corpus.bytes or 0), documents=int(corpus.documents or 0),
                         stream_tokens=int(stream["tokens"]) if stream else None)
    return AiActGeneral(provider=TO_COMPLETE, model_name=TO_COMPLETE,
                        model_dependencies=TO_COMPLETE, placed_on_market=TO_COMPLETE,
                        modalities=("text",), text_size=size,
                        types_of_content=TO_COMPLETE, knowledge_cutoff=TO_COMPLETE)


def size_range(tokens: int) -> str:
    """The template's text size range that `tokens` falls in."""
    for bound, label in TEXT_SIZE_RANGES:
        if bound is None or tokens < bound:
            return label
    raise AssertionError("the last range has no bound")


def _sources(corpus: Corpus, web: AiActScraped) -> AiActSources:
    recorded = tuple(AiActSource(source=s.source, documents=s.documents, tokens=s.tokens,
                                 bytes=s.bytes, share=s.share, licenses=s.licenses,
                                 kind=TO_COMPLETE) for s in corpus.sources)
    return AiActSources(recorded_sources=recorded, publicly_available_datasets=TO_COMPLETE,
                        private_datasets=TO_COMPLETE, scraped=web, user_data=TO_COMPLETE,
                        synthetic_data=TO_COMPLETE, other_sources=TO_COMPLETE)


def web_content(store: BaseStore, corpus: str) -> AiActScraped:
    """The corpus's documents by where they came from: those whose `uri` is an http(s)
    URL with a host, grouped by host name, and the rest (file paths and other URIs, which
    name no domain). The top domains are the template's share of the hosts by bytes; the
    crawlers and the period of collection are the provider's to say."""
    with store.reader() as con:
        rows = con.execute("SELECT uri, n_bytes, n_tokens FROM documents WHERE corpus = ?",
                           [corpus]).fetchall()
    hosts: dict[str, list[int]] = {}
    other = [0, 0, 0]
    for uri, n_bytes, n_tokens in rows:
        host = domain_of(uri)
        totals = hosts.setdefault(host, [0, 0, 0]) if host else other
        totals[0] += 1
        totals[1] += int(n_bytes or 0)
        totals[2] += int(n_tokens or 0)
    web_bytes = sum(t[1] for t in hosts.values())
    ranked = sorted(hosts.items(), key=lambda item: (-item[1][1], item[0]))
    top = ranked[:math.ceil(DOMAIN_SHARE * len(ranked))]
    return AiActScraped(
        crawlers=TO_COMPLETE, collection_period=TO_COMPLETE,
        web_documents=sum(t[0] for t in hosts.values()), web_bytes=web_bytes,
        web_tokens=sum(t[2] for t in hosts.values()), domains=len(hosts),
        top_domains_rule=DOMAIN_RULE,
        top_domains=tuple(AiActDomain(domain=name, documents=t[0], bytes=t[1], tokens=t[2],
                                      share_of_web_bytes=round(t[1] / web_bytes, 6))
                          for name, t in top),
        other_documents=other[0], other_bytes=other[1])


def domain_of(uri: str | None) -> str | None:
    """The host name of an http(s) URL, lower case, without port or credentials; None for
    anything else (file:// URIs, relative paths, other schemes), which names no domain."""
    if not uri:
        return None
    try:
        parts = urlsplit(uri)
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme.lower() not in WEB_SCHEMES or not host:
        return None
    return host.rstrip(".")
