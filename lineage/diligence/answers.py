"""The typed answers of the due-diligence questions (lineage.answer explains the pattern).

`FolderVerification` is what `lineage verify --json` prints, `Inspection` what `lineage
inspect --json` prints (and `lineage report --format json` writes). The parts people reach
for are typed (verdicts, risk findings, checksums, files, the weights summary, memory,
quantization, provenance, licence, hashes); the deep, format-specific remainder (the
model's architecture, config and tokenizer summaries, buffers, links) stays a plain
`dict[str, Any]`, as the field comments say.
"""

from __future__ import annotations

from typing import Any, ClassVar

from lineage.answer import Answer, optional
from lineage.diligence.document import Document, ScalarDocument

# -- shared by verify and inspect ------------------------------------------------------------


class Issue(Answer):
    """A structure error or warning: which file broke which rule, and what to do."""

    file: str  # relative to the folder; "." for the folder itself
    rule: str  # e.g. header-overlap, missing-tokenizer, lfs-pointer
    message: str
    action: str


class WeightSet(Answer):
    """One set of weight files read together (a single file, a sharded set, a graph)."""

    format: str  # safetensors, gguf, onnx, pickle
    kind: str  # single, sharded, split, graph, ...
    files: tuple[str, ...]


class Structure(Answer):
    """The structure verdict: every weights file against its format's rules."""

    ok: bool | None  # None: not run (`verify --sums` of a folder with no weights at all)
    files: int  # weights files read
    tensors: int
    parameters: int
    formats: dict[str, int]  # weights files per format
    sets: tuple[WeightSet, ...]
    errors: tuple[Issue, ...]  # any error fails the verdict
    warnings: tuple[Issue, ...]  # never fail it (no config, no tokenizer, ...)


class RiskFinding(Answer):
    """One risk: a file that could run code or leave the folder when opened."""

    file: str
    kind: str  # e.g. pickle-code, python-code, auto-map, symlink-outside, chat-template
    severity: str  # dangerous, unknown, unverifiable or info
    detail: str
    allowed: bool | None = optional()  # verify only: the kind was accepted by name


# -- lineage verify ---------------------------------------------------------------------------


class ChecksumFile(ScalarDocument):
    """One file checked against its expected hash."""

    path: str
    expected: str | None  # hex SHA-256 (a cache blob's name: SHA-256 or Git SHA-1)
    actual: str | None  # what the file hashed to; None when it was not read
    status: str  # ok, mismatch, missing or refused
    line: int | None  # its line in the SHA256SUMS list
    algorithm: str | None  # hub cache snapshots only: sha256 or git-sha1


class ChecksumProblem(Answer):
    """Why a checksum check failed or warns (a line of the list, a file, a rule)."""

    line: int | None
    path: str | None
    rule: str
    message: str


class Checksums(Document):
    """The checksums verdict; `ok` and `source` are None when nothing was checked."""

    ok: bool | None
    source: str | None  # "sums-list", "hf-cache-blobs", or None
    list: str | None  # the SHA256SUMS list given
    files: tuple[ChecksumFile, ...]
    problems: tuple[ChecksumProblem, ...]
    unlisted: tuple[str, ...]  # files on disk the list does not name
    bytes_hashed: int | None  # None when nothing was checked


class AuthenticityProblem(Answer):
    """Why the list's signature failed (missing-signature, signature-format, signature,
    not-allowed, key-id, trusted-comment, key-expired, key-revoked)."""

    rule: str
    message: str


class Authenticity(Answer):
    """The authenticity verdict: the SHA256SUMS list's signature against a trusted key;
    `ok` and `method` are None when no key was given."""

    ok: bool | None
    method: str | None  # ssh, minisign or openpgp (from the key file's format)
    key: str | None  # the key file given (--sums-key)
    signature: str | None  # the signature file looked for beside the list
    signer: str | None  # ssh: the principals allowed for the key; openpgp: its user id
    key_id: str | None  # ssh: SHA256 fingerprint; minisign: key id; openpgp: fingerprint
    problems: tuple[AuthenticityProblem, ...]


class RiskVerdict(Answer):
    """The risks verdict: not ok while a dangerous or unknown finding is not allowed."""

    ok: bool
    findings: tuple[RiskFinding, ...]
    allowed: tuple[str, ...]  # the kinds accepted by name (--allow-risk)


class Snapshot(Answer):
    """The Hugging Face cache snapshot a folder is."""

    repo_id: str
    kind: str  # model, dataset or space
    revision: str  # the commit the snapshot folder is named by
    refs: tuple[str, ...]  # branch and tag names pointing at it
    folder: str


class FolderVerification(Answer):
    """`lineage verify DIR`: five separate verdicts on a model or checkpoint folder."""

    folder: str
    ok: bool  # every verdict that ran passed
    structure: Structure
    risks: RiskVerdict
    checksums: Checksums
    authenticity: Authenticity
    load: str  # always "not-tested": lineage never loads or runs a model
    snapshot: Snapshot | None


# -- lineage verify --cache ------------------------------------------------------------------


class CachedSnapshot(Answer):
    """One snapshot of a hub cache, checked against its repository's blob names."""

    repo_id: str
    kind: str  # model, dataset or space
    revision: str  # the snapshot folder's name: the commit
    refs: tuple[str, ...]  # branch and tag names pointing at it
    folder: str
    ok: bool  # it has files, and every one was vetted and matches its blob's name
    files: int  # entries checked (vetted or refused)
    matched: int  # files whose digest is their blob's name
    bytes: int  # bytes of its files read
    problems: tuple[ChecksumProblem, ...]  # mismatches, refused links, missing blobs


class CacheProblem(Answer):
    """A repository folder of the cache that holds no snapshot to check."""

    repository: str  # the folder's name, e.g. models--ORG--NAME
    rule: str  # no-snapshot
    message: str


class CacheVerification(Answer):
    """`lineage verify --cache`: every snapshot of every repository of a hub cache."""

    ROWS: ClassVar[str | None] = "snapshots"

    cache: str  # the hub cache folder
    ok: bool  # every snapshot passed and no repository folder is broken
    repositories: int
    snapshots: tuple[CachedSnapshot, ...]
    problems: tuple[CacheProblem, ...]
    bytes_hashed: int  # each distinct blob once


# -- lineage inspect ---------------------------------------------------------------------------


class Generated(Answer):
    """Which lineage wrote an inspection, and when."""

    lineage: str  # the version
    at: str  # UTC, ISO 8601 to the second


class InspectedFile(Answer):
    """One file of the folder: format, size and what its name says."""

    path: str
    format: str  # sniffed from the bytes: safetensors, gguf, onnx, pickle, json, ...
    size: int  # bytes
    shard: tuple[int, int] | None  # (number, count) from a -00001-of-00004 name
    name: dict[str, Any]  # what the file name says (quantization, size, format, ...)


class WeightsPresence(Answer):
    """Whether the folder holds weights, and why not."""

    present: bool
    reason: str | None


class Quantization(Answer):
    """How the weights are stored and what the config and file names claim."""

    method: str | None
    stored: str | None  # e.g. "all F32", "Q4_K 80%, F32 20%"
    bits_per_weight: float | None
    declared: tuple[dict[str, Any], ...]  # claims of config files, with whether they agree
    name_hint: dict[str, Any] | None  # what a file name claims
    disagreements: tuple[str, ...]
    evidence: tuple[str, ...]
    reason: str | None  # why there is no answer, when there is none


class ModelNote(Answer):
    """A fact of the model that changes how it is run or judged, with its evidence."""

    topic: str  # experts, quantization, chat template, vision
    text: str
    evidence: tuple[str, ...]


class MachineFit(Answer):
    """Whether the estimate fits one kind of machine."""

    machine: str  # e.g. "GPU 24 GB", "Mac 36 GB unified"
    memory_bytes: int
    usable_bytes: int  # all of a GPU's; about 2/3 (<= 36 GB) or 3/4 of a Mac's
    fits: bool


class Memory(Answer):
    """The memory estimate at a context length and batch size (bytes)."""

    estimated: bool
    reason: str | None
    weights_bytes: int
    kv_cache_bytes: int | None  # 0: the model caches nothing; None: unknown
    kv_cache_note: str
    overhead_bytes: int | None
    total_bytes: int | None
    context: int  # the context used (clamped to max_positions)
    context_requested: int
    context_clamped: bool
    max_positions: int | None
    batch: int
    assumptions: tuple[str, ...]
    fits: tuple[MachineFit, ...]  # empty when there is no total to compare


class InspectedChecksums(Answer):
    """The checksums verdict as an inspection shows it."""

    ok: bool | None
    source: str | None
    files: tuple[ChecksumFile, ...]


class Integrity(Answer):
    """Separate verdicts, never merged."""

    structure: Structure
    checksums: InspectedChecksums
    # the --sums list's signature (ok None without --sums-key); absent in older reports
    authenticity: Authenticity | None = optional()
    load: str  # "not-tested"


class DeclaredDataset(Answer):
    """A training dataset the model card declares, and whether the store records it."""

    name: str  # as the card writes it (a Hub dataset id)
    recorded: bool | None  # None: not looked up (no store)
    corpus: str | None  # the corpus recorded under that name
    manifest_hash: str | None  # that corpus's manifest hash


class Provenance(Answer):
    """How open the model's provenance is, and what is missing for the next tier."""

    tier: str  # closed, open weights, open source, fully auditable
    missing: tuple[str, ...]
    evidence: tuple[str, ...]
    datasets: tuple[DeclaredDataset, ...] | None = optional()  # only when a card names some


class License(Answer):
    """The licence the folder claims, and where each claim is."""

    license: tuple[str, ...] | str | None  # several names when the sources disagree
    sources: tuple[dict[str, Any], ...]  # file, license, how
    disagreements: tuple[str, ...] | None = optional()  # only when two claims differ


class CardFinding(Answer):
    """A rule the model card's front matter broke (the card's metadata is then not used)."""

    rule: str  # e.g. yaml-alias, yaml-tag, front-matter-unclosed, field-type
    message: str


class ModelCard(Answer):
    """The metadata of the folder's model card (README.md front matter), normalized."""

    file: str  # README.md
    sha256: str | None  # of the whole card; None when it could not be read
    bytes: int | None
    front_matter: bool  # whether the card opens with a `---` block
    license: str | None
    license_name: str | None  # with `license: other`
    license_link: str | None
    pipeline_tag: str | None
    library_name: str | None
    datasets: tuple[str, ...]
    base_model: tuple[str, ...]
    language: tuple[str, ...]
    tags: tuple[str, ...]
    findings: tuple[CardFinding, ...]


class Hashes(Answer):
    """SHA-256 of the folder's files (or why not)."""

    computed: bool
    reason: str | None
    how: str | None
    algorithm: str  # "sha256"
    files: dict[str, str]  # path -> hex


class Inspection(Answer):
    """`lineage inspect PATH`: what a model file or folder holds, from its files only.

    `model`, `config`, `tokenizer`, `adapter`, `buffers` and `links` are plain dicts
    (their keys follow the model's format; docs/reports.md lists them). `to_polars()`
    gives one row per file.
    """

    ROWS: ClassVar[str | None] = "files"

    spec: str  # lineage-report/1
    path: str  # absolute
    generated: Generated
    files: tuple[InspectedFile, ...]
    links: tuple[dict[str, Any], ...]  # path, target, inside, cache_blob
    weights: WeightsPresence
    parameters: int | None
    tensors: int | None
    dtypes: dict[str, int]  # parameters per dtype
    buffers: dict[str, Any]  # non-weight tensors (position ids, ...): counts and names
    uncounted_pickles: tuple[str, ...]  # weights in pickles, never loaded, so not counted
    quantization: Quantization
    model: dict[str, Any] | None  # architecture: family, kind, layers, hidden, heads, ...
    memory: Memory
    precision_warnings: tuple[str, ...]
    notes: tuple[ModelNote, ...]  # experts, quantization records, chat templates, projector
    risks: tuple[RiskFinding, ...]  # worst first
    integrity: Integrity
    provenance: Provenance
    license: License
    card: ModelCard | None = optional()  # only when the folder has a README.md
    config: dict[str, Any] | None  # the config.json fields that matter here
    tokenizer: dict[str, Any] | None
    adapter: dict[str, Any] | None
    architecture: str | None  # the model family
    hashes: Hashes
    # only with --supported-ops or --provider: the support used (`supported_ops` and `ops`,
    # or `provider`) and `graphs`, one per ONNX file: nodes, supported_nodes, pieces,
    # supported_pieces, unsupported_pieces, transfers, crossings, unsupported_ops
    partition: dict[str, Any] | None = optional()
