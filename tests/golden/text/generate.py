"""Write the golden vectors of lineage-text/1 and lineage-fingerprint/1 from the plain
reference implementation (tests/text_reference.py):

    .venv/bin/python tests/golden/text/generate.py

vectors-1.json: texts with their normalized form, text hash, first gram hashes and
fingerprints. winnow-1.json: winnowing alone on hash lists full of ties, with what robust
winnowing would select instead. Changing any value needs a new spec version.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

import text_reference as ref  # noqa: E402

TEXTS = [
    "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n"
    "Rough winds do shake the darling buds of May,\nAnd summer's lease hath all too short "
    "a date;",
    "Ｆｕｌｌ-width ＴＥＸＴ, ﬁne ligatures, STRASSE vs Straße, ΟΔΥΣΣΕΥΣ and ὈΔΥΣΣΕΎΣ, "
    "co\u00adoperate, x² + y² = z², naïve café (NFD: cafe\u0301), 東京は大きい — 123 456 789 one "
    "two three four five six seven eight nine ten.",
    "Too short.",
    # Ties: every gram of a refrain is the same gram, so every window holds its minimum
    # many times; rightmost-on-ties keeps a new position per window.
    " ".join(["la"] * 30),
    # A period of 6 words: each of the 6 distinct grams, the minimum too, is in every
    # 20-gram window three or four times.
    "Tomorrow and tomorrow and tomorrow creeps; " * 8,
    # Fewer than w grams with a repeated minimum: one window, its rightmost minimum.
    "yes no " * 6,
]

WINNOW_CASES = [
    {"hashes": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5], "w": 4},
    {"hashes": [7] * 10, "w": 4},
    {"hashes": [2, 1, 1, 2, 1, 3, 1, 1], "w": 3},
    {"hashes": [5, 2, 2, 9], "w": 20},
    {"hashes": [2**64 - 1, 2**64 - 1, 0, 2**64 - 1, 2**63, 2**63], "w": 2},
    {"hashes": [], "w": 20},
]


def text_vectors() -> list[dict[str, object]]:
    cases = []
    for text in TEXTS:
        words = ref.words(text)
        hashes = ref.gram_hashes(words)
        cases.append({"text": text, "normalized": ref.normalized(text),
                      "text_hash": ref.text_hash(text), "first_gram_hashes": hashes[:8],
                      "fingerprints": [list(p) for p in ref.winnow(hashes)]})
    return cases


def winnow_vectors() -> list[dict[str, object]]:
    return [{**case, "selected": [list(p) for p in ref.winnow(case["hashes"], case["w"])],
             "robust_winnowing_would_select": [
                 list(p) for p in ref.robust_winnow(case["hashes"], case["w"])]}
            for case in WINNOW_CASES]


def render(cases: list[dict[str, object]]) -> str:
    return json.dumps(cases, indent=1, ensure_ascii=False) + "\n"


def main() -> None:
    (HERE / "vectors-1.json").write_text(render(text_vectors()), encoding="utf-8")
    (HERE / "winnow-1.json").write_text(render(winnow_vectors()), encoding="utf-8")


if __name__ == "__main__":
    main()
