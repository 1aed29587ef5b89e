"""Which licence a model folder claims: model card metadata, LICENSE files, config.json,
GGUF; and where those claims disagree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lineage.diligence.card import declared_license, readable
from lineage.errors import InputError
from lineage.userfiles import open_regular, read_regular

_KNOWN = (
    ("Apache License", "Apache-2.0"), ("MIT License", "MIT"),
    ("GNU GENERAL PUBLIC LICENSE", "GPL"), ("Creative Commons Attribution", "CC-BY"),
    ("LLAMA 3", "llama3"), ("Llama 2 Community License", "llama2"),
    ("Gemma Terms of Use", "gemma"), ("BSD", "BSD"),
)  # fmt: skip
_MAX = 256 * 1024
UNRECOGNISED = "unrecognised text"


def find_license(folder: Path, gguf_license: str | None = None,
                 card: dict[str, Any] | None = None) -> dict[str, Any]:
    """The licence claims of the folder; `card` is its `card` section (lineage.diligence.card)."""
    sources: list[dict[str, str]] = []
    declared = declared_license(card)
    if declared:
        sources.append({"file": "README.md", "license": declared, "how": "front matter"})
    for path in sorted(folder.glob("LICEN[CS]E*")):
        if readable(path):
            text = _head(path, _MAX).decode("utf-8", "replace")
            guess = next((spdx for marker, spdx in _KNOWN if marker.lower() in text.lower()),
                         UNRECOGNISED)
            sources.append({"file": path.name, "license": guess, "how": "licence text"})
    config_license = _config_license(folder / "config.json")
    if config_license:
        sources.append({"file": "config.json", "license": config_license, "how": "license"})
    if gguf_license:
        sources.append({"file": "*.gguf", "license": str(gguf_license),
                        "how": "general.license"})
    names = sorted({s["license"] for s in sources})
    found: dict[str, Any] = {"license": names[0] if len(names) == 1 else (names or None),
                             "sources": sources}
    disagreements = _disagreements(sources)
    if disagreements:
        found["disagreements"] = disagreements
    return found


def _config_license(path: Path) -> str | None:
    """config.json's top-level `license` string, if it has one (a broken config is the
    structure verdict's to report, not this one's)."""
    if not readable(path):
        return None
    try:
        document = json.loads(read_regular(path, what="config.json", max_bytes=_MAX * 16))
    except (ValueError, OSError, InputError):
        return None
    value = document.get("license") if isinstance(document, dict) else None
    return value.strip() if isinstance(value, str) and value.strip() else None


def _head(path: Path, limit: int) -> bytes:
    """The first `limit` bytes of a licence text (b"" when it cannot be read)."""
    try:
        with open_regular(path, what="licence text") as handle:
            return handle.read(limit)
    except (InputError, OSError):
        return b""


def _disagreements(sources: list[dict[str, str]]) -> list[str]:
    """Each pair of claims naming different licences (unrecognised text is not a claim)."""
    claims = [s for s in sources if s["license"] != UNRECOGNISED]
    out = []
    for i, first in enumerate(claims):
        for second in claims[i + 1:]:
            if not same_license(first["license"], second["license"]):
                out.append(f"{first['file']} ({first['how']}) says {first['license']} but "
                           f"{second['file']} ({second['how']}) says {second['license']}")
    return out


def same_license(a: str, b: str) -> bool:
    """Whether two claims name the same licence. Licence texts are read only to a family
    (GPL, CC-BY, BSD), so a family agrees with each of its versions (gpl-3.0)."""
    a, b = a.strip().lower(), b.strip().lower()
    short, long = sorted((a, b), key=len)
    return short == long or (long.startswith(short) and long[len(short)] in "-._")
