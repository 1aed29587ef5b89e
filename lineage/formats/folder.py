"""What a model folder holds, and ONE structure verdict for it.

`lineage verify`, `lineage inspect` / `report` and the gate of `lineage exp run` all call
`read_folder`, so no two commands disagree about one folder. It lists the folder once
(`list_folder`: every file below it, links not followed), decides what each file is, which
files form a set, and runs each format's own structure check with the format readers:

    safetensors  `model.safetensors`, or shards with `model.safetensors.index.json`:
                 `safetensors.check_folder`, once per directory holding *.safetensors
    gguf         one file, or split parts `x-0000i-of-0000N.gguf` whose `split.no`,
                 `split.count` and `split.tensors.count` agree with the names and each other
    onnx         a graph (`onnx_reader.read_onnx`) and the external data files it names,
                 which must stay inside the folder
    pickle       torch.save archives (zip or legacy) and plain pickles (.bin .pt .pth .ckpt
                 .pkl), decoded as opcode streams (`pickle_scan`), never loaded: a stream that
                 does not decode to its end (STRUCTURAL_FINDINGS) fails the structure

A folder may mix them; every set must pass. A file's format comes from its bytes
(`lineage.formats.files.sniff`), then from what the other files say: a file an ONNX graph
names as external data is `onnx-data` (whatever its suffix), `X.bin` beside `X.xml` is
OpenVINO data, and a download in progress, a git-LFS pointer or an error page is named for
what it is (`lineage.formats.downloads`) and not read as weights.

The verdict: {ok, files, tensors, parameters, formats {format: files}, sets [{format, kind,
files}], errors, warnings}. Each error and warning is {file, rule, message, action}, the file
relative to the folder ("." for the folder itself). Errors are ordered download problems
first, then format rules, so the first error names the most useful action. Warnings (a
transformers folder without config or tokenizer) never fail the verdict. Config JSON that
cannot be read fails it (`json`, `config`, `unreadable`, hf_config's rules).

Pickle scans, configs and the GGUF chat-template flag are kept on the `FolderModel` so
risks (`lineage.diligence.risks`) reuse them instead of reading the files again.
`list_folder` is the one listing every check starts from. In a hub cache snapshot
(`lineage.formats.hf_cache`) the links into the repository's own blobs are vetted there
and read as files, by every format check; any other link stays a link (and a risk).
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineage.errors import InputError
from lineage.formats import downloads, gguf, hf_cache, hf_config, onnx_reader
from lineage.formats import safetensors as st
from lineage.formats.file_hash import gc_paused
from lineage.formats.files import SPECIAL, special_kind
from lineage.formats.names import parse_model_name
from lineage.formats.pickle_scan import PickleScan, scan_pickle_file
from lineage.userfiles import NOT_REGULAR, file_kind

__all__ = ["ACTIONS", "STRUCTURAL_FINDINGS", "FolderModel", "failure_type", "list_folder",
           "read_folder"]

WEIGHT_KINDS = ("safetensors", "gguf", "onnx", "pickle")
# Pickle findings that mean the stream or archive is damaged, not merely suspicious.
STRUCTURAL_FINDINGS = frozenset({"broken-opcode", "unknown-opcode", "stack-error", "bad-zip",
                                 "crc-mismatch", "read-error", "legacy-layout"})
_DOWNLOAD_RULES = ("download-in-progress", "lfs-pointer", "error-page", "incomplete-set")
_UNFINISHED = "is the download finished? compare byte counts with the source"
_REFETCH = "re-fetch the files named; then check their hashes"

# Rule -> (failure type, the action it calls for), as the gate and verify report them.
ACTIONS: dict[str, tuple[str, str]] = {
    "download-in-progress": ("download in progress", "wait for the downloader to exit (or "
                             "resume it), then verify again; never use a folder being written"),
    "lfs-pointer": ("LFS pointer", "fetch the LFS object (git lfs pull), then check it against "
                    "the pointer's sha256 and size"),
    "error-page": ("error page", "the server sent a page, not the file: check the URL, "
                   "revision and access, then fetch the file again"),
    "incomplete-set": ("incomplete set", "fetch the missing parts of the same revision; never "
                       "mix parts of two revisions"),
    "missing-config": ("not runnable", "fetch config.json of the same revision"),
    "missing-tokenizer": ("not runnable", "fetch the tokenizer files of the same revision"),
    "no-weights": ("no weights", "the folder holds no safetensors, GGUF, ONNX or torch "
                   "pickle file"),
    "short-prefix": ("short prefix", _UNFINISHED),
    "header-length": ("bad header length", _UNFINISHED),
    "truncated": ("truncated", _UNFINISHED),
    "index-mismatch": ("index mismatch", "quarantine extra files; do not edit the index to "
                       "fit unknown weights"),
    "missing-index": ("index missing", "several shards without an index: fetch the index of "
                      "the same revision"),
    "duplicate-tensor": ("index mismatch", "a tensor is in two shards: quarantine the shard "
                         "from another revision"),
    "external-missing": ("files missing", "fetch the ONNX external data file of the same "
                         "revision into the folder"),
    "json": ("bad config", "re-fetch the JSON file named; never edit it to fit"),
    "config": ("bad config", "re-fetch the JSON file named; never edit it to fit"),
    NOT_REGULAR: ("special file", "remove it from the model folder: a loader that opens a "
                  "FIFO waits forever, one that reads a device never ends"),
}
_CORRUPT = ("corrupt shard", _REFETCH)


def failure_type(rule: str) -> tuple[str, str]:
    """(failure type, action) for a structure rule."""
    return ACTIONS.get(rule, _CORRUPT)


@dataclass
class FolderModel:
    root: Path  # the folder
    files: list[dict[str, Any]]  # list_folder entries, `format` corrected
    links: list[dict[str, Any]]
    structure: dict[str, Any]
    scans: dict[str, PickleScan | InputError] = field(default_factory=dict)
    config: hf_config.ModelConfig | None = None
    tokenizer: hf_config.TokenizerFiles | None = None
    adapter: hf_config.AdapterConfig | None = None
    python: list[str] = field(default_factory=list)
    gguf_chat_template: bool = False
    snapshot: hf_cache.Snapshot | None = None  # when the folder is a hub cache snapshot
    whole: bool = True  # False: one model file (and its split siblings) was read
    # The bytes of the small files read whole while listing (list_files' `whole`): a
    # checksum of the folder hashes them without reading them again.
    contents: dict[str, bytes] = field(default_factory=dict)


def list_folder(folder: Path, *, names: set[str] | None = None,
                heads: dict[str, bytes] | None = None, whole: dict[str, bytes] | None = None
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every file below the folder ({path, format, size, shard, name}) and its symlinks
    (`names`: only these entries of the folder itself; `heads`: filled with each file's
    first bytes; `whole`: with the bytes of the files those are all of). A FIFO, device
    or socket is listed with the format `special`, never opened."""
    from lineage.formats.files import list_files

    return list_files(folder, names=names, heads=heads, whole=whole)


@gc_paused()
def read_folder(
    path: str | Path, *, max_header_bytes: int = st.DEFAULT_MAX_HEADER_BYTES
) -> FolderModel:
    """The folder model of a folder, or of one file in its folder (with its split siblings).

    A hub cache snapshot's links into its own repository's blobs (vetted by `hf_cache`)
    are read as files; every other link stays a link.
    Raises InputError when the path does not exist or is neither a folder nor a regular
    file (a device, FIFO or socket, refused before it is opened); every problem inside a
    folder is reported.
    """
    path = Path(path)
    whole = check_model_path(path)
    root = path if whole else path.parent
    heads: dict[str, bytes] = {}
    contents: dict[str, bytes] = {}
    files, links = list_folder(root, names=None if whole else sibling_names(path), heads=heads,
                               whole=contents)
    # A git clone's object store (.git/lfs/objects holds copies of the weights) is not
    # the model: nothing loads from it.
    files = [f for f in files if not f["path"].startswith(".git/")]
    links = [lk for lk in links if not lk["path"].startswith(".git/")]
    if not whole:
        links = []
    snapshot = hf_cache.find_snapshot(root)
    check = _Check(root, files, links, max_header_bytes, snapshot.blobs if snapshot else {})
    check.heads = heads
    check.run(whole_folder=whole)
    model = check.model()
    model.snapshot = snapshot
    model.whole = whole
    model.contents = contents
    return model


def check_model_path(path: Path) -> bool:
    """True for a folder, False for a regular file (a model file); InputError for a path
    that is missing or anything else, before anything is opened."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(path, "no such file or folder") from None
    except OSError as exc:
        raise InputError(path, f"unreadable: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        return True
    if not stat.S_ISREG(mode):
        raise InputError(path, f"{NOT_REGULAR}: {file_kind(mode)}, not a model file or folder")
    return False


def sibling_names(path: Path) -> set[str]:
    """The names a model file is read with: itself and, for a part of a split set
    (`x-00001-of-00003.gguf`), the other parts beside it."""
    name = path.name
    if parse_model_name(name)["shard"] is None:
        return {name}
    stem, suffix = name.rsplit("-", 3)[0], Path(name).suffix
    try:
        present = os.listdir(path.parent)
    except OSError:
        return {name}
    return {name} | {other for other in present if other.endswith(suffix)
                     and other.rsplit("-", 3)[0] == stem
                     and parse_model_name(other)["shard"] is not None}


class _Check:
    def __init__(self, root: Path, files: list[dict[str, Any]], links: list[dict[str, Any]],
                 max_header_bytes: int, vetted_links: Mapping[str, Path]) -> None:
        self.root = root
        self.vetted = vetted_links
        self.files = files
        self.links = links
        self.cap = max_header_bytes
        self.download: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.warnings: list[dict[str, Any]] = []
        self.flagged: set[str] = set()  # files that are not what their name claims
        self.tensors = 0
        self.parameters = 0
        self.sets: list[dict[str, Any]] = []
        self.scans: dict[str, PickleScan | InputError] = {}
        self.chat_template = False
        self.configs: tuple[Any, Any, Any] = (None, None, None)
        self.whole_folder = True
        self.heads: dict[str, bytes] = {}  # first bytes of each file, read when listed

    def run(self, *, whole_folder: bool) -> None:
        self.whole_folder = whole_folder
        self._classify()
        self._download_problems(whole_folder)
        self._safetensors()
        self._gguf()
        self._onnx()
        self._pickles()
        self._configs()
        if whole_folder:
            top = {f["path"] for f in self.files} | {lk["path"] for lk in self.links}
            for warning in downloads.runnable_warnings({n for n in top if "/" not in n}):
                self._add(self.warnings, warning["file"], warning["rule"], warning["message"])
        if not self.sets and not self.download and not self.errors:
            self._add(self.errors, ".", "no-weights",
                      "no safetensors, GGUF, ONNX or torch pickle file in this folder")

    # -- what each file is ------------------------------------------------------------------

    def _classify(self) -> None:
        names = {f["path"] for f in self.files}
        # aria2 writes into the final name and keeps its progress beside it in X.aria2
        written = {n[: -len(".aria2")] for n in names if n.lower().endswith(".aria2")}
        for entry in self.files:
            rel = entry["path"]
            if entry["format"] == SPECIAL:  # listed, never opened
                self.flagged.add(rel)
                self._add(self.download, rel, NOT_REGULAR,
                          f"{special_kind(self.root / rel)} in the model folder: never opened")
                continue
            suffix = downloads.in_progress_suffix(rel) or (".aria2" if rel in written else None)
            if suffix:
                entry["format"] = "partial-download"
                self.flagged.add(rel)
                said = "an aria2 control file beside it" if rel in written else f"named {suffix}"
                self._add(self.download, rel, "download-in-progress",
                          f"{said}: a download still being written (or abandoned)")
                continue
            problem = downloads.content_problem(self.root, rel, entry["size"],
                                                self.heads.get(rel))
            if problem:
                entry["format"] = problem["rule"]
                self.flagged.add(rel)
                self._add(self.download, rel, problem["rule"], problem["message"],
                          _lfs_action(problem) if problem["rule"] == "lfs-pointer" else None)
            elif rel.lower().endswith(".gguf"):
                entry["format"] = "gguf"  # checked by name too: a bad magic must not hide it
            elif rel.endswith(".bin") and rel[:-4] + ".xml" in names:
                entry["format"] = "openvino-data"

    def _download_problems(self, whole_folder: bool) -> None:
        present = {f["path"] for f in self.files}
        sharded = [f["path"] for f in self.files if f["format"] in WEIGHT_KINDS]
        for problem in downloads.shard_name_problems(sharded):
            self._add(self.download, problem["file"], problem["rule"], problem["message"])
        indexes = [f["path"] for f in self.files if f["path"].endswith(".index.json")]
        for index in indexes if whole_folder else []:
            for problem in downloads.index_problems(self.root, index, present):
                self._add(self.download, problem["file"], problem["rule"], problem["message"])

    def _vetted_in(self, directory: str) -> dict[str, Path]:
        """The vetted links of one directory, by their names in it."""
        prefix = f"{directory}/" if directory else ""
        return {rel.removeprefix(prefix): blob for rel, blob in self.vetted.items()
                if rel.startswith(prefix) and "/" not in rel.removeprefix(prefix)}

    # -- each format's own check --------------------------------------------------------------

    def _safetensors(self) -> None:
        named = [f["path"] for f in self.files
                 if f["path"].endswith(".safetensors") and f["path"] not in self.flagged]
        named += [lk["path"] for lk in self.links
                  if lk["path"].endswith(".safetensors") and lk["path"] not in self.vetted]
        directories = sorted({posixpath.dirname(p) for p in named}) if self.whole_folder else []
        for directory in directories:
            result = st.check_folder(self.root / directory, max_header_bytes=self.cap,
                                     vetted_links=self._vetted_in(directory))
            shards = sorted(p for p in named if posixpath.dirname(p) == directory)
            index = posixpath.join(directory, st.INDEX_NAME)
            kind = "sharded" if len(shards) > 1 or index in {f["path"] for f in self.files} \
                else "single"
            self.sets.append({"format": "safetensors", "kind": kind, "files": shards})
            self.tensors += result["tensors"]
            self.parameters += result["parameters"]
            for error in result["errors"]:
                rel = self._rel(error["file"])
                if rel not in self.flagged:
                    self._add(self.errors, rel, error["rule"], error["message"])
        for entry in self.files:  # one file chosen, or safetensors under another name
            if entry["format"] == "safetensors" and not (
                    self.whole_folder and entry["path"].endswith(".safetensors")):
                header, errors = st.check_file(self.root / entry["path"],
                                               max_header_bytes=self.cap)
                self.sets.append({"format": "safetensors", "kind": "single",
                                  "files": [entry["path"]]})
                for error in errors:
                    self._add(self.errors, entry["path"], error.rule, error.message)
                if header is not None:
                    self.tensors += len(header.tensors)
                    self.parameters += header.parameters

    def _gguf(self) -> None:
        parts: dict[tuple[str, int], list[tuple[int, str, gguf.GGUFFile | None]]] = {}
        for entry in self.files:
            if entry["format"] != "gguf":
                continue
            rel = entry["path"]
            model, errors = gguf.check_gguf(self.root / rel)
            for error in errors:
                self._add(self.errors, rel, str(error["rule"]), str(error["message"]))
            if model is not None:
                self.tensors += len(model.tensors)
                self.parameters += model.parameters
                self.chat_template = self.chat_template or model.chat_template is not None
            number, count = entry["shard"] or (1, 1)
            key = (rel.rsplit("-", 3)[0] if entry["shard"] else rel, count)
            parts.setdefault(key, []).append((number, rel, model))
        for (_, count), members in sorted(parts.items()):
            members.sort()
            kind = "split" if count > 1 else "single"
            self.sets.append({"format": "gguf", "kind": kind, "files": [r for _, r, _ in members]})
            for rel, message in _split_problems(count, members):
                self._add(self.download, rel, "incomplete-set", message)

    def _onnx(self) -> None:
        for entry in self.files:
            if entry["format"] != "onnx":
                continue
            rel = entry["path"]
            try:
                model = onnx_reader.read_onnx(self.root / rel)
            except onnx_reader.OnnxInputError as exc:
                self._add(self.errors, rel, exc.rule_id, exc.message)
                self.sets.append({"format": "onnx", "kind": "graph", "files": [rel]})
                continue
            data = sorted({posixpath.normpath(posixpath.join(posixpath.dirname(rel),
                                                             t.external.location))
                           for t in model.initializers if t.external is not None})
            for other in self.files:
                if other["path"] in data:
                    other["format"] = "onnx-data"
            kind = "graph with external data" if data else "graph"
            self.sets.append({"format": "onnx", "kind": kind, "files": [rel, *data]})
            self.tensors += len(model.initializers)
            self.parameters += sum(t.elements for t in model.initializers)

    def _pickles(self) -> None:
        from lineage.formats.files import PICKLE_BEARING  # pickles, archives, NumPy arrays

        for entry in self.files:
            if entry["format"] not in PICKLE_BEARING:
                continue
            rel = entry["path"]
            try:
                scan = scan_pickle_file(self.root / rel)
            except InputError as exc:
                self.scans[rel] = exc
                if entry["format"] == "pickle":
                    self._add(self.errors, rel, "unreadable", exc.rule)
                continue
            self.scans[rel] = scan
            if entry["format"] != "pickle":
                continue  # an archive that is no checkpoint: scanned for risks only
            self.sets.append({"format": "pickle", "kind": scan.format, "files": [rel]})
            for finding in scan.findings:
                if finding.kind in STRUCTURAL_FINDINGS:
                    where = f" ({finding.member})" if finding.member else ""
                    self._add(self.errors, rel, finding.kind, f"{finding.detail}{where}")

    def _configs(self) -> None:
        found: list[Any] = []
        for reader in (hf_config.read_config, hf_config.read_tokenizer_files,
                       hf_config.read_adapter_config):
            try:
                found.append(reader(self.root))
            except InputError as exc:
                found.append(None)
                rel = self._rel(exc.path)
                message = getattr(exc, "message", str(exc))
                rule = NOT_REGULAR if message.startswith(NOT_REGULAR) else \
                    getattr(exc, "rule_id", "json")
                if rel not in self.flagged:  # an LFS pointer config is reported as one
                    self._add(self.errors, rel, rule, message.removeprefix(f"{rule}: "))
        self.configs = (found[0], found[1], found[2])

    # -- the verdict ----------------------------------------------------------------------------

    def _add(self, bucket: list[dict[str, Any]], rel: str, rule: str, message: str,
             action: str | None = None) -> None:
        bucket.append({"file": rel, "rule": rule, "message": message,
                       "action": action or failure_type(rule)[1]})

    def _rel(self, file: str) -> str:
        rel = os.path.relpath(file, self.root)
        return "." if rel == "." else Path(rel).as_posix()

    def model(self) -> FolderModel:
        errors = self.download + self.errors
        formats: dict[str, int] = {}
        for entry in self.files:
            if entry["format"] in (*WEIGHT_KINDS, "onnx-data"):
                formats[entry["format"]] = formats.get(entry["format"], 0) + 1
        structure = {"ok": not errors, "files": sum(formats.values()), "tensors": self.tensors,
                     "parameters": self.parameters, "formats": formats, "sets": self.sets,
                     "errors": errors, "warnings": self.warnings}
        config, tokenizer, adapter = self.configs
        python = hf_config.python_files(self.root) if self.whole_folder else []
        return FolderModel(self.root, self.files, self.links, structure, self.scans, config,
                           tokenizer, adapter, python, self.chat_template)


def _lfs_action(problem: dict[str, Any]) -> str:
    return (f"fetch the LFS object (git lfs pull --include {problem['file']}): "
            f"{problem['oid']}, {problem['size']} bytes; check it against that sha256 and size")


def _split_problems(count: int, members: list[tuple[int, str, gguf.GGUFFile | None]]
                    ) -> list[tuple[str, str]]:
    """Split metadata against the names: part i of N says split.no i-1, split.count N."""
    problems = []
    read = [(n, rel, m) for n, rel, m in members if m is not None]
    for number, rel, model in read:
        said = model.metadata.get("split.count")
        if count == 1 and isinstance(said, int) and said > 1:
            problems.append((rel, f"split.count says {said} parts, but the name is no part name "
                                  "(-0000i-of-0000N.gguf): the other parts are absent"))
        elif count > 1 and said != count:
            problems.append((rel, f"named part {number} of {count}, but split.count is {said}"))
        elif count > 1 and model.metadata.get("split.no") != number - 1:
            problems.append((rel, f"named part {number} of {count}, but split.no is "
                                  f"{model.metadata.get('split.no')} (counted from 0)"))
    if count > 1 and len(read) == count:
        total = sum(len(m.tensors) for _, _, m in read)
        said = read[0][2].metadata.get("split.tensors.count")
        if said != total:
            problems.append((read[0][1], f"split.tensors.count says {said}, the {count} parts "
                                         f"hold {total} tensors"))
    return problems
