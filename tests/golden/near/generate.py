"""Writes near-1.json: `lineage-near/1` signatures and band keys of a few texts.

Run from the repository root: python tests/golden/near/generate.py
"""

import json
from pathlib import Path

from lineage.text.identity import normalize
from lineage.text.minhash import band_keys, signature

TEXTS = [
    "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:",
    "SHALL i compare   thee to a summer’s day — thou art more LOVELY and more temperate",
    "Shall I compare thee to a winter's day? Thou art more lovely and temperate:",
    "Straße",
    "the the the the the",
    "Ｆｕｌｌ-width ﬁne ligatures, café and cafe\u0301",
    "!!! ...",
]


def main() -> None:
    vectors = []
    for text in TEXTS:
        words = normalize(text).split()
        sig = signature(words)
        vectors.append({"text": text, "normalized": " ".join(words), "signature": sig,
                        "band_keys": band_keys(sig) if sig is not None else None})
    out = Path(__file__).with_name("near-1.json")
    out.write_text(json.dumps(vectors, indent=1, ensure_ascii=False) + "\n", "utf-8")


if __name__ == "__main__":
    main()
