"""The text of a model card: the YAML metadata block, then the training-data section
(docs/exports.md, "Model card"). Every value comes from the store's records; numbers are
written as the store holds them (integers without separators, shares to 6 places), so a
program can read them back and compare. Names and hashes are code spans and table cells
text, both written by `lineage.markup`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lineage.markup import md_code, md_table, md_text

if TYPE_CHECKING:
    from lineage.corpora.answers import Corpus
    from lineage.runs.answers import Run

_SAID = {True: "yes", False: "NO", None: "no record to compare"}


@dataclass(frozen=True)
class CheckpointFacts:
    """The checkpoints row of the card's step: its digests and checks."""

    step: int
    weights_digest: str | None
    chain_weights_digest: str | None
    matches_chain: bool | None
    state_digest: str | None
    chain_state_digest: str | None
    matches_state: bool | None
    structure_ok: bool
    checksums_ok: bool | None
    risks: str | None  # the pickle scan's JSON report; None: not scanned


@dataclass(frozen=True)
class CardFacts:
    """What the card states, as the store records it. The text reads the run, stream and
    corpus by key (as their JSON objects say them), so their JSON objects serve too."""

    run: Run  # lineage.runs.query.get_run
    stream: Mapping[str, Any]  # lineage.stream.query.get_stream
    corpus: Corpus  # lineage.corpora.query.get_corpus
    checkpoint: CheckpointFacts
    chain_head: str


def card_text(facts: CardFacts, metadata: Mapping[str, Any]) -> str:
    sections = [front_matter(metadata), _intro(), _corpus(facts.corpus, metadata),
                _stream(facts.stream), _run(facts.run, facts.chain_head),
                _checkpoint(facts.checkpoint), _how_to_check(facts)]
    return "\n".join(sections)


def front_matter(metadata: Mapping[str, Any]) -> str:
    """The `---` delimited YAML block the Hub reads, written with a safe dumper."""
    import yaml

    body = yaml.safe_dump(dict(metadata), sort_keys=True, allow_unicode=True,
                          default_flow_style=False)
    return f"---\n{body}---\n"


def _intro() -> str:
    return ("## Training data\n\n"
            "Written by `lineage export model-card` from the records of a lineage store. "
            "Every name, number and hash below is the store's, and the commands at the end "
            "check them again.\n")


def _corpus(corpus: Mapping[str, Any], metadata: Mapping[str, Any]) -> str:
    lines = ["### Corpus", "",
             f"- Name: {md_code(corpus['name'])}",
             f"- Manifest hash: {md_code(corpus['manifest_hash'])} "
             f"({md_code(corpus['manifest_spec'])})",
             f"- Documents: {corpus['documents']}; tokens: {corpus['tokens']} "
             f"(counted by {md_code(corpus['tokenizer'])}); bytes: {corpus['bytes']}", ""]
    lines += md_table(["Source", "Documents", "Tokens", "Share of tokens", "Licences"],
                      [[s["source"], s["documents"], s["tokens"], f"{s['share']:.6f}",
                        ", ".join(s["licenses"]) or "none recorded"]
                       for s in corpus["sources"]], align="-rrr-")
    lines += ["", _license_note(metadata)]
    return "\n".join(lines) + "\n"


def _license_note(metadata: Mapping[str, Any]) -> str:
    if metadata["license"] != "other":
        return ("Every source carries the one licence above, so the metadata says "
                f"{md_code('license: ' + metadata['license'])}. The licence of the model "
                "itself is to be confirmed by the provider.")
    return ("The sources do not share one SPDX licence, so the metadata says `license: "
            f"other` ({md_code('license_name: ' + metadata['license_name'])}). The licence "
            "of the model itself is to be completed by the provider.")


def _stream(stream: Mapping[str, Any]) -> str:
    seed = stream["seed"] if stream["seed"] is not None else "none (recorded from a run's log)"
    return "\n".join([
        "### Stream", "",
        f"- Name: {md_code(stream['name'])}; spec {md_code(stream['spec'])}, "
        f"spec hash {md_code(stream['spec_hash'])}",
        f"- Seed: {seed}; sequence length: {stream['seq_len']} tokens; batch: "
        f"{_batch(stream)}; steps: {stream['steps']}; tokens: {stream['tokens']}",
        f"- Occurrences digest: {md_code(stream['occurrences_digest'])}",
    ]) + "\n"


def _batch(stream: Mapping[str, Any]) -> str:
    """`4 windows per step`, or a batch-size schedule by step ranges."""
    schedule = stream.get("schedule")
    if not schedule:
        return f"{stream['batch']} windows per step"
    ranges = ", ".join(f"{windows} from step {first}" for first, windows in schedule)
    return f"windows per step by schedule ({ranges})"


def _run(run: Mapping[str, Any], chain_head: str) -> str:
    return "\n".join([
        "### Run", "",
        f"- Name: {md_code(run['name'])}; chain {md_code(run['chain'])} "
        f"({md_text(run['algorithm'])}), genesis {md_code(run['genesis'])}",
        f"- Steps recorded: {run['steps_recorded']} (steps {run['first_step']} to "
        f"{run['last_step']} of the stream's {run['stream_steps']}); chain closed: "
        f"{'yes' if run['closed'] else 'no'}",
        f"- Chain head (the state hash of the last step): {md_code(chain_head)}",
        f"- Skip rule: {_skip_rule(run['skip_rule'])}",
        f"- Clipped steps: {run['clipped_count']}; skipped steps: {run['skipped_count']}",
    ]) + "\n"


def _skip_rule(rule: Mapping[str, Any] | None) -> str:
    if rule is None:
        return "none declared"
    return (f"a step whose gradient norm before clipping is above {rule['grad_norm_above']} "
            f"is skipped, and so are the {rule['skip_following']} steps after it "
            f"({md_code(rule['rule'])})")


def _checkpoint(ckpt: CheckpointFacts) -> str:
    risks = json.loads(ckpt.risks) if ckpt.risks else None
    checks = ("ok" if ckpt.checksums_ok else "FAILED") \
        if ckpt.checksums_ok is not None else "no checksum list given"
    risk = "not checked" if risks is None else ("none found" if risks["ok"] else "FOUND")
    return "\n".join([
        f"### Checkpoint after step {ckpt.step}", "",
        f"- Weights digest: {md_code(ckpt.weights_digest or 'none')}; the chain's: "
        f"{md_code(ckpt.chain_weights_digest or 'none')}; matches the chain: "
        f"{_SAID[ckpt.matches_chain]}",
        f"- State digest (weights and optimizer state): {md_code(ckpt.state_digest or 'none')}"
        f"; the chain's: {md_code(ckpt.chain_state_digest or 'none')}; matches the chain: "
        f"{_SAID[ckpt.matches_state]}",
        f"- Structure: {'ok' if ckpt.structure_ok else 'FAILED'}; checksums: {checks}; "
        f"pickle risks: {risk}",
    ]) + "\n"


def _how_to_check(facts: CardFacts) -> str:
    run, step = facts.run["name"], facts.checkpoint.step
    commands = [f"lineage corpus show {_arg(facts.corpus['name'])}",
                f"lineage stream show {_arg(facts.stream['name'])}",
                f"lineage chain verify {_arg(run)}",
                f"lineage run checkpoints {_arg(run)}",
                f"lineage ingest checkpoint CHECKPOINT_FOLDER --run {_arg(run)} --step {step}",
                f"lineage export model-card --run {_arg(run)} --checkpoint {step}"]
    return "\n".join([
        "### How to check", "",
        "With the store (or a copy of it): the corpus and its manifest hash, the stream and "
        "its spec hash, the chain from genesis to its head against the stream, and the "
        "checkpoint's digests against the chain; the last command writes this card again, "
        "byte for byte.", "", "```sh", *commands, "```",
    ]) + "\n"


def _arg(value: str) -> str:
    """A name as a shell argument."""
    import shlex

    return shlex.quote(value)
