"""Model card metadata: the YAML front matter at the top of a Hugging Face `README.md`.

A card opens with a line `---`, then YAML, then a line `---`; the Markdown below is prose.
Only the front matter is read, and only as data: a safe loader that builds plain scalars,
lists and mappings, refuses every anchor and alias (no "billion laughs" expansion),
refuses non-scalar mapping keys and any tag it does not know (`!!python/object` and the
like), and reads booleans the YAML 1.2 way (`language: no` is Norwegian, not False). The
front matter may be at most `MAX_FRONT_MATTER` bytes. Nothing in the card (templates,
code blocks, links) is run or fetched.

Rule ids of `ModelCardInputError`, each for the whole front matter:

    card-unreadable          README.md cannot be opened or is not a regular file
    front-matter-encoding    the front matter is not UTF-8
    front-matter-unclosed    an opening `---` with no closing `---` line
    front-matter-too-large   the closing `---` lies beyond MAX_FRONT_MATTER bytes
    yaml-alias               an anchor (&a) or alias (*a)
    yaml-tag                 a tag the safe loader does not build (!!python/object, !custom)
    yaml-key                 a mapping key that is a list or mapping
    yaml-too-deep            nesting too deep to read
    yaml-syntax              not YAML
    not-a-mapping            the front matter is a list or a scalar, not key: value pairs

A known field of the wrong shape (`datasets: {a: b}`) is a `field-type` problem of that
field alone: `card_fields` skips it and says so; the other fields are still read.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import yaml

from lineage.errors import InputError, RuleError
from lineage.userfiles import open_regular

CARD_NAME = "README.md"
MAX_FRONT_MATTER = 64 * 1024
# the fields read, by their Hub metadata names (docs/reports.md)
TEXT_FIELDS = ("license", "license_name", "license_link", "pipeline_tag", "library_name")
LIST_FIELDS = ("datasets", "base_model", "language", "tags")
_OPEN = re.compile(rb"\A(?:\xef\xbb\xbf)?---[ \t]*\r?\n")
_CLOSE = re.compile(rb"^---[ \t]*\r?$", re.MULTILINE)
_YAML12_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")


class ModelCardInputError(RuleError):
    """A model card whose front matter breaks a rule (the module docstring lists them)."""


def _fail(path: Path, rule_id: str, message: str) -> NoReturn:
    raise ModelCardInputError(path, rule_id, message)


@dataclass(frozen=True)
class CardBytes:
    """What was read of a card: its digest and size (whole file), and its first bytes."""

    sha256: str
    size: int
    head: bytes  # enough to hold the largest front matter accepted


def read_card(path: Path) -> CardBytes:
    """Hash the whole card, keeping its first bytes for `front_matter`."""
    digest = hashlib.sha256()
    head = b""
    limit = MAX_FRONT_MATTER + 1024  # room for the opening line and the closing `---`
    try:
        stream = open_regular(path, what="model card")  # never waits on a FIFO
    except InputError as exc:
        _fail(path, "card-unreadable", exc.rule)
    try:
        with stream:
            size = 0
            while chunk := stream.read(1 << 20):
                if len(head) < limit:
                    head += chunk[: limit - len(head)]
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        _fail(path, "card-unreadable", f"cannot read ({exc.strerror or exc})")
    return CardBytes(digest.hexdigest(), size, head)


def opens_front_matter(head: bytes) -> bool:
    """Whether a card's first line is `---` (a UTF-8 byte order mark allowed before it)."""
    return _OPEN.match(head) is not None


def front_matter(path: Path, head: bytes) -> bytes | None:
    """The front matter's bytes (None: the card does not open with `---`); raise on an
    unclosed or too large one."""
    opening = _OPEN.match(head)
    if opening is None:
        return None
    close = _CLOSE.search(head, opening.end())
    if close is None:
        if len(head) > MAX_FRONT_MATTER:
            _fail(path, "front-matter-too-large",
                  f"no closing `---` within the first {MAX_FRONT_MATTER:,} bytes")
        _fail(path, "front-matter-unclosed", "the opening `---` has no closing `---` line")
    body = head[opening.end():close.start()]
    if len(body) > MAX_FRONT_MATTER:
        _fail(path, "front-matter-too-large",
              f"{len(body):,} bytes of front matter, more than {MAX_FRONT_MATTER:,}")
    return body


class _CardLoader(yaml.SafeLoader):  # type: ignore[misc]  # pyyaml ships no types
    """SafeLoader without anchors, aliases or non-scalar keys, with YAML 1.2 booleans."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _Refused("yaml-alias", f"anchor or alias {event.anchor!r} at line "
                           f"{event.start_mark.line + 1}: anchors and aliases are refused")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        for key, _value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                raise _Refused("yaml-key", f"a {key.id} used as a key at line "
                               f"{key.start_mark.line + 1}: keys must be scalars")
        return super().construct_mapping(node, deep=deep)


_CardLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_CardLoader.add_implicit_resolver("tag:yaml.org,2002:bool", _YAML12_BOOL, list("tTfF"))


class _Refused(Exception):
    def __init__(self, rule_id: str, message: str) -> None:
        super().__init__(message)
        self.rule_id = rule_id
        self.message = message


def parse_front_matter(path: Path, body: bytes) -> dict[str, Any]:
    """The front matter as a mapping (empty front matter: an empty one)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail(path, "front-matter-encoding", f"not UTF-8 (byte {exc.start + 1} of the "
                                             "front matter)")
    try:
        document = yaml.load(text, Loader=_CardLoader)  # noqa: S506 - a safe loader subclass
    except _Refused as exc:
        _fail(path, exc.rule_id, exc.message)
    except yaml.constructor.ConstructorError as exc:
        _fail(path, "yaml-tag", _yaml_problem(exc))
    except yaml.YAMLError as exc:
        _fail(path, "yaml-syntax", _yaml_problem(exc))
    except RecursionError:
        _fail(path, "yaml-too-deep", "nesting too deep to read")
    if document is None:
        return {}
    if not isinstance(document, dict):
        _fail(path, "not-a-mapping", f"the front matter is a {type(document).__name__}, "
                                     "not key: value pairs")
    return document


def _yaml_problem(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    return f"{problem} at line {mark.line + 1}" if mark is not None else str(problem)


def card_fields(meta: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The known fields, normalized (text: a string; lists: a list of strings), and the
    (field, problem) pairs of the fields skipped for their shape."""
    fields: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for name in TEXT_FIELDS + LIST_FIELDS:
        value = meta.get(name)
        if value is None:
            continue
        items = _strings(value)
        if items is None:
            problems.append((name, f"`{name}` is a {type(value).__name__}, not a string "
                                   "or a list of strings"))
        elif name in LIST_FIELDS:
            fields[name] = items
        elif len(items) == 1:
            fields[name] = items[0]
        elif items:
            problems.append((name, f"`{name}` lists {len(items)} values, not one"))
    return fields, problems


def _strings(value: object) -> list[str] | None:
    """A string or a list of strings as a list of distinct non-empty strings, in order."""
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in values):
        return None
    out: list[str] = []
    for v in values:
        text = str(v).strip()
        if text and text not in out:
            out.append(text)
    return out
