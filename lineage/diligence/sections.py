"""The report's sections as plain text lines, shared by the Markdown and the HTML renderer.

Every value goes through `show`: an unknown value is written "unknown" (or "—" in a table
cell) with its reason where one is known, lists as comma-separated items and mappings as
"key: value" pairs, so no Python representation (None, dict or tuple syntax) reaches a
reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GIB = 2**30
DASH = "—"
Item = tuple[str, list[str]]  # a line and the lines under it


def show(value: Any, unknown: str = "unknown") -> str:
    """A value as a reader should see it."""
    if value is None or value == "":
        return unknown
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, Mapping):
        return ", ".join(f"{show(k)}: {show(v, unknown)}" for k, v in value.items()) or "none"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(show(v, unknown) for v in value) or "none"
    return str(value)


def count(n: int, word: str) -> str:
    """ "1 tensor", "103 tensors"."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def size(n: int | None, unknown: str = "unknown") -> str:
    if n is None:
        return unknown
    for unit, scale in (("GiB", GIB), ("MiB", 2**20), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def verdict(ok: bool | None) -> str:
    return {True: "pass", False: "FAIL", None: "not checked"}[ok]


def header_items(report: dict[str, Any]) -> list[str]:
    generated = report.get("generated") or {}
    weights = report.get("weights") or {"present": True, "reason": None}
    lines = [f"written by lineage {show(generated.get('lineage'))} at "
             f"{show(generated.get('at'))} (UTC), {show(report.get('spec'))}",
             f"model: {show((report.get('model') or {}).get('summary'))}"]
    if not weights["present"]:
        lines.append(f"NO WEIGHTS in this folder: {show(weights['reason'])}")
    return lines


def integrity_items(report: dict[str, Any]) -> list[Item]:
    integrity = report["integrity"]
    errors = [f"{show(e.get('file'))}: {show(e.get('rule'))}: {show(e.get('message'))}"
              for e in integrity["structure"]["errors"]]
    return [(f"structure: {verdict(integrity['structure']['ok'])}", errors),
            (f"checksums: {verdict(integrity['checksums']['ok'])}", []),
            *_authenticity_items(integrity.get("authenticity")),
            (f"load: {show(integrity['load'])}", [])]


def _authenticity_items(authenticity: dict[str, Any] | None) -> list[Item]:
    """The list's signature, when a key was given (reports without one stay as they were)."""
    if not authenticity or authenticity["ok"] is None:
        return []
    signer = ", ".join(show(v) for v in (authenticity["signer"], authenticity["key_id"]) if v)
    problems = [f"{show(p['rule'])}: {show(p['message'])}" for p in authenticity["problems"]]
    return [(f"authenticity: {verdict(authenticity['ok'])} ({show(authenticity['method'])}"
             f"{': ' + signer if authenticity['ok'] else ''})", problems)]


def weights_items(report: dict[str, Any]) -> list[Item]:
    weights = report.get("weights") or {"present": True, "reason": None}
    if not weights["present"]:
        return [(f"no weights: {show(weights['reason'])}", []),
                *quantization_items(report["quantization"])[1:]]
    total = report["parameters"]
    shares = ", ".join(f"{d} {n:,} ({n / total:.1%})" for d, n in report["dtypes"].items())
    items: list[Item] = [
        (f"parameters: {total:,} in {count(report['tensors'], 'tensor')} (float or quantized "
         "weights)", []),
        (f"dtypes: {shares or 'none counted'}", [])]
    buffers = report.get("buffers") or {}
    if buffers.get("tensors"):
        items.append((f"buffers (not parameters): {count(buffers['tensors'], 'tensor')}, "
                      f"{count(buffers['elements'], 'element')} ({show(buffers['dtypes'])})",
                      [show(buffers["names"])]))
    items += quantization_items(report["quantization"])
    items += [(f"warning: {w}", []) for w in report["precision_warnings"]]
    if report["uncounted_pickles"]:
        items.append(("not counted (pickles are never loaded): "
                      + show(report["uncounted_pickles"]), []))
    return items


def quantization_items(q: dict[str, Any]) -> list[Item]:
    bits = q.get("bits_per_weight")
    bits_text = f"{bits} bits per weight" if bits is not None else \
        f"bits per weight unknown ({show(q.get('reason'), 'no weights counted')})"
    items: list[Item] = [(f"quantization: {show(q.get('method'))}; stored as "
                          f"{show(q.get('stored'), DASH)}; {bits_text}", [])]
    for d in q.get("declared", []):
        check = {True: "agrees with the weights", False: "DISAGREES with the weights",
                 None: "not checkable against the weights"}[d["agrees"]]
        items.append((f"declared by {d['source']}: {d['value']} ({check})", []))
    hint = q.get("name_hint")
    if hint:
        check = {True: "agrees", False: "DISAGREES", None: "cannot be checked"}[hint["agrees"]]
        items.append((f"hint only, from the weights files' names: {hint['value']} ({check})",
                      [show(hint["files"])]))
    items += [(f"disagreement: {x}", []) for x in q.get("disagreements", [])]
    return items


def cost_items(report: dict[str, Any]) -> list[Item]:
    m = report["memory"]
    if not m.get("estimated", True):
        return [(f"not estimated: {show(m.get('reason'))}", [])]
    kv = m["kv_cache_bytes"]
    kv_text = "none" if kv == 0 else size(kv)
    line = (f"at context {m['context']:,} and batch {m['batch']}: weights "
            f"{size(m['weights_bytes'])}, KV cache {kv_text}, overhead "
            f"{size(m['overhead_bytes'])}; total about {size(m['total_bytes'])}")
    return [(line, list(m["assumptions"])), *fit_items(m.get("fits") or [])]


def fit_items(rows: list[dict[str, Any]]) -> list[Item]:
    """The smallest GPU and the smallest Mac that hold the estimate."""
    if not rows:
        return []
    gpu = next((r for r in rows if r["fits"] and r["machine"].startswith("GPU")), None)
    mac = next((r for r in rows if r["fits"] and r["machine"].startswith("Mac")), None)
    return [(f"fits: {gpu['machine'] if gpu else 'no GPU of 80 GB or less'}; "
             + (f"{mac['machine']} (its GPU may use about {size(mac['usable_bytes'])})"
                if mac else "no Mac of 192 GB or less"),
             ["a Mac's GPU may use about 2/3 of its unified memory up to 36 GB, about 3/4 "
              "above (macOS's working-set limit)"])]


def note_items(report: dict[str, Any]) -> list[Item]:
    return [(f"{n['topic']}: {n['text']}", list(n["evidence"]))
            for n in report.get("notes") or []]


def provenance_items(report: dict[str, Any]) -> list[Item]:
    p = report["provenance"]
    return [(f"tier: {p['tier']}", []), *[(f"evidence: {x}", []) for x in p["evidence"]],
            *[(f"missing: {x}", []) for x in p["missing"]]]


def licence_text(report: dict[str, Any]) -> str:
    claimed = report["license"]["license"]
    if isinstance(claimed, list):
        return f"{show(claimed)} (more than one claimed)"
    return show(claimed, "none found")


def licence_items(report: dict[str, Any]) -> list[Item]:
    items: list[Item] = [(licence_text(report), [f"{s['file']} ({s['how']}): {s['license']}"
                                                 for s in report["license"]["sources"]])]
    return items + [(f"DISAGREEMENT: {d}", [])
                    for d in report["license"].get("disagreements") or []]


_CARD_FIELDS = ("license", "license_name", "license_link", "base_model", "datasets",
                "language", "pipeline_tag", "library_name", "tags")


def card_items(card: dict[str, Any]) -> list[Item]:
    """The model card section: which card, its metadata fields, the rules it broke."""
    digest = f"sha256 {card['sha256']}" if card.get("sha256") else "not read"
    items: list[Item] = [(f"{card['file']} ({digest}, {size(card.get('bytes'))})", [])]
    if card.get("sha256") and not card.get("front_matter"):
        items.append(("no metadata: the card does not open with a `---` block", []))
    items += [(f"{name}: {show(card[name])}", []) for name in _CARD_FIELDS
              if card.get(name)]
    items += [(f"finding: {f['rule']}: {f['message']}", []) for f in card["findings"]]
    return items


def risk_rows(report: dict[str, Any]) -> list[list[str]]:
    return [[r["severity"], r["file"], r["kind"], show(r["detail"])] for r in report["risks"]]


def file_rows(report: dict[str, Any]) -> list[list[str]]:
    """file, format, size, sha256, what a weights file's name says (others: —)."""
    digests = (report.get("hashes") or {}).get("files", {})
    rows = []
    for f in report["files"]:
        says = show(f["name"], DASH) if f["format"] in _WEIGHT_FORMATS and f["name"] else DASH
        rows.append([f["path"], f["format"], size(f["size"]), digests.get(f["path"], DASH),
                     says])
    return rows


def hashes_note(report: dict[str, Any]) -> str:
    hashes = report.get("hashes") or {}
    if hashes.get("computed"):
        return f"SHA-256 of every file, computed {show(hashes.get('how'))}."
    return f"SHA-256 not computed: {show(hashes.get('reason'))}."


_WEIGHT_FORMATS = {"safetensors", "gguf", "onnx", "pickle", "onnx-data"}
