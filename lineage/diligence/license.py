"""Which licence a model folder claims: model card front matter, LICENSE files, GGUF."""

from __future__ import annotations

from pathlib import Path
from typing import Any

_KNOWN = (
    ("Apache License", "Apache-2.0"), ("MIT License", "MIT"),
    ("GNU GENERAL PUBLIC LICENSE", "GPL"), ("Creative Commons Attribution", "CC-BY"),
    ("LLAMA 3", "llama3"), ("Llama 2 Community License", "llama2"),
    ("Gemma Terms of Use", "gemma"), ("BSD", "BSD"),
)  # fmt: skip
_MAX = 256 * 1024


def _readable(path: Path) -> bool:
    """A regular file, not a link; or a hub cache snapshot's vetted link to its blob."""
    from lineage.formats.hf_cache import vetted_blob

    return path.is_file() and (not path.is_symlink() or vetted_blob(path) is not None)


def find_license(folder: Path, gguf_license: str | None = None) -> dict[str, Any]:
    sources: list[dict[str, str]] = []
    card = folder / "README.md"
    if _readable(card):
        value = _front_matter_license(card.read_bytes()[:_MAX].decode("utf-8", "replace"))
        if value:
            sources.append({"file": "README.md", "license": value, "how": "front matter"})
    for path in sorted(folder.glob("LICEN[CS]E*")):
        if _readable(path):
            text = path.read_bytes()[:_MAX].decode("utf-8", "replace")
            guess = next((spdx for marker, spdx in _KNOWN if marker.lower() in text.lower()),
                         "unrecognised text")
            sources.append({"file": path.name, "license": guess, "how": "licence text"})
    if gguf_license:
        sources.append({"file": "*.gguf", "license": str(gguf_license),
                        "how": "general.license"})
    names = sorted({s["license"] for s in sources})
    return {"license": names[0] if len(names) == 1 else (names or None),
            "sources": sources}


def _front_matter_license(text: str) -> str | None:
    if not text.startswith("---"):
        return None
    for line in text.splitlines()[1:200]:
        if line.strip() == "---":
            break
        key, _, value = line.partition(":")
        if key.strip() == "license" and value.strip():
            return value.strip().strip("'\"")
    return None
