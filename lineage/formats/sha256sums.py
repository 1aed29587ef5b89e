"""SHA256SUMS lists: a strict reader, a verifier and a writer.

Accepted line forms (the ones `sha256sum`, `shasum -a 256` and BSD `sha256` write):

    <64 hex>  <name>          GNU text mode
    <64 hex> *<name>          GNU binary marker (same bytes on POSIX)
    <64 hex> <name>           BSD `sha256 -r` (name must not start with a space or `*`)
    SHA256 (<name>) = <64 hex>   BSD / `--tag`

A line that starts with `\\` carries a GNU-escaped name (`\\\\`, `\\n`, `\\r`). Hex may be
upper case (stored lower case), CRLF endings and blank lines are accepted, and lines that
start with `#` are comments, as `sha256sum -c` treats them. Everything else is refused,
with the line number and a rule id; stricter than `sha256sum -c` on purpose: leading
white space, tabs, other algorithms and truncated hashes are refused, not skipped.

Names are normalised (`./a//b` -> `a/b`) so two spellings of one file count as duplicates.
A duplicate with the same hash is kept and reported by `verify_sums` as the warning
`duplicate-entry`, which does not make the report fail: the list still names exactly one
expected content per file. A duplicate with another hash is `conflicting-entry`: refused.
A list with no entries is refused (`empty-list`): it proves nothing and is usually a
truncated transfer.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineage.errors import InputError
from lineage.formats.file_hash import Outcome, Progress, gc_paused, hash_files
from lineage.formats.file_hash import Refusal as _Refusal
from lineage.formats.file_hash import kind as _kind
from lineage.formats.file_hash import reason as _reason
from lineage.formats.file_hash import sha256_files as sha256_files  # re-exported
from lineage.userfiles import read_regular

SUMS_NAME = "SHA256SUMS"
MAX_LIST_BYTES = 64 << 20  # about 600,000 lines of 110 bytes
WARNING_RULES = frozenset({"duplicate-entry"})  # reported, but `ok` stays True
_SIGNATURE_SUFFIXES = (".asc", ".sig", ".gpg", ".minisig", ".sigstore")
_HUB_METADATA = ".cache/huggingface"  # written by `hf download --local-dir`
_HEX_LEN = 64
_HEX = re.compile(r"[0-9a-fA-F]{64}")
_HEX_RUN = re.compile(r"[0-9a-fA-F]*")
_PLAIN_LINE = re.compile(r"([0-9a-fA-F]{64}) [ *](.+)", re.DOTALL)  # `<hex>  <name>`
_TAG = re.compile(r"([A-Za-z0-9][A-Za-z0-9-]*) ?\(")
_UNESCAPE = {"\\": "\\", "n": "\n", "r": "\r"}

@dataclass(frozen=True)
class SumEntry:
    line: int
    path: str  # normalised, '/'-separated, relative to the listed folder
    sha256: str  # lowercase hex


@dataclass(frozen=True)
class SumProblem:
    line: int | None
    path: str | None
    rule: str
    message: str


@dataclass
class SumsReport:
    ok: bool
    files: list[dict[str, Any]] = field(default_factory=list)
    problems: list[SumProblem] = field(default_factory=list)
    bytes_hashed: int = 0
    unlisted: list[str] = field(default_factory=list)  # on disk, not named by the list
    source: str = "sums-list"  # where the expected hashes came from


# --- reading -------------------------------------------------------------------------------


def read_sums(path: Path) -> list[SumEntry]:
    """Parse a sums file; InputError names the file, the line and the rule broken."""
    if not os.path.lexists(path):
        raise InputError(path, "missing-file: no such SHA256SUMS list")
    try:  # a FIFO or device is refused before it is read; so is a list past the cap
        data = read_regular(path, what="SHA256SUMS list", max_bytes=MAX_LIST_BYTES)
    except OSError as exc:
        raise InputError(path, f"unreadable-file: cannot read ({exc.strerror or exc})") from exc
    try:
        lines: list[bytes] | list[str] = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:  # line by line, so the refusal names the line
        lines = data.split(b"\n")
    return _parse_lines(lines, source=str(path))


def parse_sums(text: str, *, source: str = "<sums>") -> list[SumEntry]:
    """Parse sums text; InputError (with `source` as the file) on the first bad line."""
    return _parse_lines(text.split("\n"), source=source)


@gc_paused()
def _parse_lines(lines: Iterable[bytes | str], *, source: str) -> list[SumEntry]:
    entries: list[SumEntry] = []
    first_seen: dict[str, SumEntry] = {}
    for number, raw in enumerate(lines, start=1):
        try:
            entry = _parse_line(number, raw if isinstance(raw, str) else _decode(raw))
            if entry is None:
                continue
            earlier = first_seen.setdefault(entry.path, entry)
            if earlier.sha256 != entry.sha256:
                raise _Refusal("conflicting-entry",
                               f"{entry.path!r} listed on line {earlier.line} with another hash")
        except _Refusal as refusal:
            raise InputError(source, str(refusal), where=f"line {number}") from None
        entries.append(entry)
    if not entries:
        raise InputError(source, "empty-list: no checksum lines (a truncated transfer?)")
    return entries


def _decode(raw: bytes | str) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Refusal("malformed-line", "not valid UTF-8") from None


def _parse_line(number: int, line: str) -> SumEntry | None:
    """One entry, or None for a blank or comment line."""
    plain = _PLAIN_LINE.fullmatch(line)  # the common line, already in normal form:
    if plain is not None and "\r" not in plain[2] and _is_normal_name(plain[2]):
        return SumEntry(line=number, path=plain[2], sha256=plain[1].lower())  # no more rules
    return _parse_any_line(number, line)


def _is_normal_name(name: str) -> bool:
    """True when `_normalise_name` would return `name` itself (and refuse nothing): no
    empty, '.' or '..' part, not absolute, no trailing '/', no NUL, not '-'."""
    framed = f"/{name}/"
    return not (name in ("", "-") or "//" in framed or "/./" in framed or "/../" in framed
                or "\0" in name)


def _parse_any_line(number: int, line: str) -> SumEntry | None:
    if line.endswith("\r"):  # CRLF lists from Windows editors or transfers
        line = line[:-1]
    if not line.strip() or line.startswith("#"):
        return None
    escaped = line.startswith("\\")
    body = line[1:] if escaped else line
    if body.startswith("\ufeff"):
        raise _Refusal("malformed-line", "starts with a byte-order mark")
    if body[:1].isspace():
        raise _Refusal("malformed-line", "starts with white space")
    digest, name = _split_tagged(body) if _is_tagged(body) else _split_gnu(body)
    if escaped:
        name = _unescape(name)
    return SumEntry(line=number, path=_normalise_name(name), sha256=digest)


def _is_tagged(body: str) -> bool:
    # every algorithm tag has a non-hex letter, so a BSD -r name starting with '(' stays GNU
    match = _TAG.match(body)
    return match is not None and not _HEX_RUN.fullmatch(match.group(1))


def _split_gnu(body: str) -> tuple[str, str]:
    run = _HEX_RUN.match(body)
    run_len = run.end() if run else 0
    if run_len != _HEX_LEN or not body[run_len:].startswith(" "):
        raise _Refusal("malformed-line", _hash_complaint(body, run_len))
    rest = body[_HEX_LEN + 1 :]
    name = rest[1:] if rest[:1] in (" ", "*") else rest  # two-char GNU or one-space BSD -r
    return body[:_HEX_LEN].lower(), name


def _hash_complaint(body: str, run_len: int) -> str:
    if run_len == len(body) and run_len == _HEX_LEN:
        return "missing file name after the hash"
    if run_len == _HEX_LEN:
        return "the hash must be followed by one space, then ' ' or '*' and the name"
    if run_len and (run_len == len(body) or body[run_len] in " *\t"):
        return f"hash has {run_len} hex digits; SHA-256 needs {_HEX_LEN}"
    if len(body.split(" ", 1)[0]) == _HEX_LEN:
        return "hash has characters that are not hex digits"
    return f"expected '<{_HEX_LEN} hex>  <name>' or 'SHA256 (<name>) = <hex>'"


def _split_tagged(body: str) -> tuple[str, str]:
    match = _TAG.match(body)
    assert match is not None
    if match.group(0) != "SHA256 (":
        raise _Refusal("malformed-line", f"algorithm tag {match.group(1)!r}; only "
                       "'SHA256 (<name>) = <hex>' is accepted")
    head, sep, digest = body[len("SHA256 (") :].rpartition(") = ")
    if not sep:
        raise _Refusal("malformed-line", "tagged line lacks ') = <hash>'")
    if not _HEX.fullmatch(digest):
        raise _Refusal("malformed-line", f"hash {digest[:80]!r} is not {_HEX_LEN} hex digits")
    return digest.lower(), head


def _unescape(name: str) -> str:
    out: list[str] = []
    chars = iter(name)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        code = next(chars, "")
        if code not in _UNESCAPE:
            raise _Refusal("malformed-line", f"unknown escape '\\{code}' in the name")
        out.append(_UNESCAPE[code])
    return "".join(out)


def _normalise_name(name: str) -> str:
    """Check the path rules and return the '/'-joined name without '.' or empty parts."""
    if not name:
        raise _Refusal("malformed-line", "missing file name")
    if name == "-":
        raise _Refusal("stdin-not-allowed", "'-' means standard input, not a file")
    if "\0" in name:
        raise _Refusal("malformed-line", "file name contains a NUL byte")
    if name.startswith("/"):
        raise _Refusal("absolute-path", f"{name!r} is absolute; lists name files relatively")
    parts = name.split("/")
    if ".." in parts:
        raise _Refusal("parent-path", f"{name!r} has a '..' component")
    if name.endswith("/"):
        raise _Refusal("not-a-regular-file", f"{name!r} ends with '/' (a directory)")
    kept = [part for part in parts if part not in ("", ".")]
    if not kept:
        raise _Refusal("not-a-regular-file", f"{name!r} names the folder itself")
    return "/".join(kept)


# --- verifying -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Check:
    """What one entry became before hashing: a resolved target, or a refusal."""

    entry: SumEntry
    target: str | None = None  # a string: 300,000 Path objects cost more than the hashing
    status: str = "pending"
    problem: SumProblem | None = None


@gc_paused()
def verify_sums(
    folder: Path,
    entries: list[SumEntry],
    *,
    workers: int | None = None,
    progress: Progress | None = None,
    list_path: Path | None = None,
    strict: bool = False,
    vetted_links: Mapping[str, Path] | None = None,
    only: Collection[str] | None = None,
    contents: Mapping[str, bytes] | None = None,
) -> SumsReport:
    """Check every entry against the files below `folder`; never raises for a file.

    `ok` only when there is at least one entry and every entry is present, regular, inside
    the folder and matches. Files below the folder that the list does not name are
    reported in `unlisted` (rule `unlisted-file`): a warning, or a failure when `strict`.
    The list itself (`list_path`, or any file with its name) and its signatures are not
    counted. `vetted_links` maps names to the files a caller vetted them to link to (a hub
    cache snapshot's blobs); other links must stay inside the folder. `progress(done,
    total)` is called after each distinct file.

    `only`: check these files alone (one model file and its split parts): entries naming
    other files are left out, and a file of `only` the list does not name fails the check.
    `contents`: the bytes of files below the folder already read whole, by name, as
    `read_folder` keeps them (opened without following a link, regular by fstat): a file
    the folder's listing still shows as a regular file, with no link on its path, is
    hashed from them instead of being read again.
    """
    root = Path(folder).resolve()
    if only is not None:
        entries = [entry for entry in entries if entry.path in only]
        strict = True  # a file the list does not name was not checked at all
    locate = _Locator(root, contents or {})
    vetted = {rel: str(blob) for rel, blob in (vetted_links or {}).items()}
    checks = [_classify(locate, entry, vetted) for entry in entries]
    _refuse_conflicts(checks)
    warnings = _duplicate_warnings(checks)
    targets = list(dict.fromkeys(c.target for c in checks if c.target is not None))
    digests = _hash(targets, locate.read, workers=workers, progress=progress)
    files = [_finish(check, digests) for check in checks]
    listed = {e.path for e in entries}
    unlisted = find_unlisted(root, listed, list_path=list_path) if only is None else \
        sorted(set(only) - listed)
    problems = [c.problem for c in checks if c.problem is not None] + warnings + [
        SumProblem(None, rel, "unlisted-file", "on disk but not in the list") for rel in unlisted]
    if not entries and only is None:
        problems.append(SumProblem(None, None, "empty-list", "the list has no entries"))
    problems.sort(key=lambda p: (p.line or 0, p.rule, p.path or ""))
    allowed = WARNING_RULES if strict else WARNING_RULES | {"unlisted-file"}
    failed = any(p.rule not in allowed for p in problems)
    bytes_hashed = sum(d[1] for d in digests.values() if not isinstance(d, _Refusal))
    return SumsReport(ok=not failed, files=files, problems=problems, bytes_hashed=bytes_hashed,
                      unlisted=unlisted)


def find_unlisted(
    folder: Path, listed: set[str], *, list_path: Path | None = None
) -> list[str]:
    """Sorted names of the files below `folder` (links included, not followed) not in `listed`.

    A list's own companions are skipped: a file named like the list or SHA256SUMS, those
    names plus a signature suffix (.asc .sig .gpg .minisig .sigstore), and the hub's local
    download metadata (`.cache/huggingface/`). A linked folder counts as listed when the
    list names a file through it.
    """
    root = Path(folder)
    list_name = list_path.name if list_path is not None else SUMS_NAME
    companions = {name + suffix for name in (list_name, SUMS_NAME)
                  for suffix in ("", *_SIGNATURE_SUFFIXES)}
    own = os.path.realpath(list_path) if list_path is not None else None
    own_rel = _inside(own, os.path.realpath(root)) if own is not None else None
    found: list[str] = []
    stack = [(str(root), "")]
    while stack:  # os.walk's walk, on the listing's own types: no stat per file
        here, prefix = stack.pop()
        if prefix == _HUB_METADATA + "/":
            continue
        try:
            with os.scandir(here) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            rel = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                stack.append((entry.path, rel + "/"))
            elif rel in listed or entry.name in companions or rel == own_rel:
                continue
            elif entry.is_symlink() and (os.path.realpath(entry.path) == own
                                         or _listed_through(rel, entry.path, listed)):
                continue
            else:
                found.append(rel)
    return sorted(found)


def _inside(path: str, root: str) -> str | None:
    """`path` relative to `root` ('/'-joined) when it lies below it, else None."""
    rel = os.path.relpath(path, root)
    return None if rel == os.curdir or rel.startswith(os.pardir) else Path(rel).as_posix()


def _listed_through(rel: str, path: str, listed: set[str]) -> bool:
    """A linked folder counts as listed when the list names a file through it."""
    return os.path.isdir(path) and any(p.startswith(rel + "/") for p in listed)


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


class _Locator:
    """`_locate`, with a shortcut for the common case: a regular file in a folder whose
    path inside the root has no link. Each such folder is checked once and listed once
    (its entries' types come with the listing), not each file lstat-ed; the hashing opens
    the file without following a link and checks it is regular all the same."""

    def __init__(self, root: Path, contents: Mapping[str, bytes]) -> None:
        self.root = root
        self.prefix = os.path.join(root, "")
        self.regular: dict[str, frozenset[str]] = {}  # folder -> its regular files' names
        self.contents = contents
        self.read: dict[str, bytes] = {}  # target -> its bytes, for the files in `contents`

    def __call__(self, rel: str) -> str:
        folder, _, name = rel.rpartition("/")
        regular = self.regular.get(folder)
        if regular is None:
            regular = self.regular[folder] = self._regular_files(folder)
        if name not in regular:
            return str(_locate(self.root, rel))  # missing, a link, not regular: the full rules
        target = self.prefix + rel
        data = self.contents.get(rel)
        if data is not None:
            self.read[target] = data
        return target

    def _regular_files(self, folder: str) -> frozenset[str]:
        """The names of the regular files in a folder with no link on its path (none for
        any other folder, or one that cannot be listed: each file then takes _locate)."""
        lexical = self.prefix + folder if folder else str(self.root)  # the root: resolved
        if folder and os.path.realpath(lexical) != lexical:
            return frozenset()
        try:
            with os.scandir(lexical) as listing:
                return frozenset(entry.name for entry in listing
                                 if entry.is_file(follow_symlinks=False))
        except OSError:
            return frozenset()


def _hash(targets: list[str], read: Mapping[str, bytes], *, workers: int | None,
          progress: Progress | None) -> dict[str, Outcome]:
    """hash_files of the targets, those already read hashed from memory first."""
    digests: dict[str, Outcome] = {}
    for target in targets:
        data = read.get(target)
        if data is not None:
            digests[target] = (hashlib.sha256(data).hexdigest(), len(data))
    total, done = len(targets), len(digests)
    if progress is not None and done:
        progress(done, total)
    rest = [target for target in targets if target not in digests] if done else targets
    step = None if progress is None else (lambda n, _: progress(done + n, total))
    digests.update(hash_files(rest, workers=workers, progress=step))
    return digests


def _classify(locate: _Locator, entry: SumEntry, vetted: Mapping[str, str]) -> _Check:
    """Apply the list rules again (entries may be built by hand), then locate the file."""
    check = _Check(entry)
    try:
        if not _is_normal_name(entry.path) and entry.path != _normalise_name(entry.path):
            raise _Refusal("malformed-line", f"{entry.path!r} is not a normalised name")
        if not _HEX.fullmatch(entry.sha256):
            raise _Refusal("malformed-line", f"expected hash is not {_HEX_LEN} hex digits")
        check.target = vetted.get(entry.path) or locate(entry.path)
    except _Refusal as refusal:
        status = "missing" if refusal.rule == "missing-file" else "refused"
        _fail(check, status, refusal.rule, refusal.message)
    return check


def _locate(root: Path, rel: str) -> Path:
    """The resolved file for `rel`: missing, escaping and non-regular targets are refused."""
    lexical = root / rel
    try:
        target = lexical.resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError):
        why = "dangling symlink" if os.path.islink(lexical) else "no such file"
        raise _Refusal("missing-file", why) from None
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        raise _Refusal("unreadable-file", _reason(exc)) from None
    if target != root and root not in target.parents:
        raise _Refusal("symlink-escapes", f"resolves to {target}, outside {root}")
    try:
        mode = target.stat().st_mode
    except OSError as exc:
        raise _Refusal("unreadable-file", _reason(exc)) from None
    if not stat.S_ISREG(mode):  # checked before open: opening a FIFO or device has effects
        raise _Refusal("not-a-regular-file", _kind(mode))
    return target


def _refuse_conflicts(checks: list[_Check]) -> None:
    """Hand-built lists can disagree with themselves; then no entry of that path counts."""
    first: dict[str, str] = {}
    conflicting: set[str] = set()
    for check in checks:
        path, digest = check.entry.path, check.entry.sha256.lower()
        if first.setdefault(path, digest) != digest:
            conflicting.add(path)
    for check in checks if conflicting else ():
        if check.entry.path in conflicting and check.status != "refused":
            _fail(check, "refused", "conflicting-entry", "listed with different hashes")
            check.target = None


def _duplicate_warnings(checks: list[_Check]) -> list[SumProblem]:
    problems: list[SumProblem] = []
    first: dict[str, int] = {}
    for check in checks:
        entry = check.entry
        if entry.path in first and check.status == "pending":
            problems.append(SumProblem(entry.line, entry.path, "duplicate-entry",
                                       f"also listed on line {first[entry.path]}, same hash"))
        first.setdefault(entry.path, entry.line)
    return problems


def _fail(check: _Check, status: str, rule: str, message: str) -> None:
    check.status = status
    check.problem = SumProblem(check.entry.line, check.entry.path, rule, message)


def _finish(check: _Check, digests: dict[str, Outcome]) -> dict[str, Any]:
    entry = check.entry
    expected = entry.sha256.lower()
    row: dict[str, Any] = {"path": entry.path, "expected": expected, "actual": None,
                           "status": check.status, "line": entry.line}
    if check.target is None:
        return row
    outcome = digests[check.target]
    if isinstance(outcome, _Refusal):
        status = "missing" if outcome.rule == "missing-file" else "refused"
        _fail(check, status, outcome.rule, outcome.message)
    elif outcome[0] != expected:
        _fail(check, "mismatch", "hash-mismatch",
              f"sha256 {outcome[0][:16]}…, list says {expected[:16]}…")
        row["actual"] = outcome[0]
    else:
        check.status = "ok"
        row["actual"] = outcome[0]
    row["status"] = check.status
    return row


# --- writing -------------------------------------------------------------------------------


def write_sums(
    folder: Path,
    files: list[Path] | None = None,
    *,
    workers: int | None = None,
    sums_name: str = SUMS_NAME,
) -> str:
    """GNU-format lines that `sha256sum -c` accepts, sorted by '/'-separated relative path.

    By default every regular file below `folder` (and every in-folder symlink to one) except
    `<folder>/<sums_name>`. `files` may be absolute or relative to `folder`. Raises
    InputError for a file outside the folder, missing, not regular or with a non-UTF-8 name.
    """
    if not Path(folder).is_dir():
        problem = "not a directory" if os.path.lexists(folder) else "no such directory"
        raise InputError(folder, f"no-folder: {problem}")
    root = Path(folder).resolve()
    rels = _walk(root, sums_name) if files is None else [_relative(root, f) for f in files]
    rels = sorted(set(rels))
    if not rels:
        raise InputError(folder, "empty-list: no regular files to list")
    targets: dict[str, Path] = {}
    for rel in rels:
        try:
            targets[rel] = _locate(root, rel)
        except _Refusal as refusal:
            raise InputError(root / rel, str(refusal)) from None
    return format_sums(targets, workers=workers, where=root)


def format_sums(
    targets: Mapping[str, Path], *, workers: int | None = None, where: Path | None = None
) -> str:
    """GNU-format lines for vetted files: listed name -> resolved regular file, sorted.

    The names must already be normalised; `where` (the listed folder) only names a file
    that fails to hash in the InputError.
    """
    digests = hash_files(sorted(set(targets.values())), workers=workers)
    base = where if where is not None else Path()
    return "".join(_format_line(rel, _digest_of(base / rel, digests[targets[rel]]))
                   for rel in sorted(targets))


def _digest_of(path: Path, outcome: Outcome) -> str:
    if isinstance(outcome, _Refusal):
        raise InputError(path, str(outcome))
    return outcome[0]


def _format_line(rel: str, digest: str) -> str:
    """Escape as GNU does: a leading backslash announces escapes in the name."""
    if any(char in rel for char in "\\\n\r"):
        name = rel.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return f"\\{digest}  {name}\n"
    return f"{digest}  {rel}\n"


def _walk(root: Path, sums_name: str) -> list[str]:
    """Relative names of regular files and symlinks below root (symlinks checked later)."""
    found: list[str] = []
    for dirpath, _dirs, names in os.walk(root):  # does not descend into symlinked dirs
        for name in names:
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            if rel == sums_name:
                continue
            mode = path.lstat().st_mode
            if stat.S_ISREG(mode) or (stat.S_ISLNK(mode) and _points_at_file(path)):
                found.append(_listable(path, rel))
    return found


def _points_at_file(link: Path) -> bool:
    """Symlinks to regular files are listed (and must stay inside); others are skipped."""
    try:
        return stat.S_ISREG(link.stat().st_mode)
    except OSError:
        return False


def _relative(root: Path, file: Path) -> str:
    file = Path(file)
    if file.is_absolute():
        absolute = Path(os.path.normpath(file))
        resolved_parent = absolute.parent.resolve()  # keep the final symlink as given
        candidate = resolved_parent / absolute.name
        if candidate != root and root not in candidate.parents:
            raise InputError(file, f"outside-folder: not below {root}")
        rel = candidate.relative_to(root).as_posix()
    else:
        rel = file.as_posix()
    return _listable(file, rel)


def _listable(path: Path, rel: str) -> str:
    """The normalised name, if a reader could take it back: UTF-8, and not '-' (stdin)."""
    try:
        rel.encode("utf-8")
        return _normalise_name(rel)
    except UnicodeEncodeError:
        raise InputError(path, "malformed-name: file name is not valid UTF-8") from None
    except _Refusal as refusal:
        raise InputError(path, str(refusal)) from None
