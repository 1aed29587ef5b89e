"""Regenerate the golden stream vectors from the plain reference implementation.

    .venv/bin/python tests/golden/generate.py

Run it only when the spec version changes; the vectors pin `lineage-stream/1`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from stream_reference import occurrences_digest, reference_stream  # noqa: E402

from lineage.corpora.manifest import manifest_hash_of_rows  # noqa: E402
from lineage.stream.spec import StreamSpec, parse_epochs  # noqa: E402

CASES = {
    "two-sources": {
        "documents": [{"doc_id": f"web/{i}", "source": "web", "n_tokens": 3 + i % 5}
                      for i in range(12)]
        + [{"doc_id": f"code/{i}", "source": "code", "n_tokens": 7 + i % 3} for i in range(4)],
        "parameters": {"seed": 42, "seq_len": 8, "batch": 2, "separator_tokens": 1},
    },
    "fractional-epochs-and-budget": {
        "documents": [{"doc_id": f"d{i:02d}", "source": "dclm", "n_tokens": 10 + i}
                      for i in range(10)]
        + [{"doc_id": f"p{i:02d}", "source": "proof-pile", "n_tokens": 4} for i in range(6)],
        "parameters": {"seed": 2026, "seq_len": 16, "batch": 1, "separator_tokens": 1,
                       "epochs": {"dclm": "0.89", "proof-pile": "2.5"}, "token_budget": 200},
    },
    "no-separator-unicode-ids": {
        "documents": [{"doc_id": name, "source": "poems", "n_tokens": n}
                      for name, n in [("ode", 11), ("élégie", 5), ("sonnet-018", 14),
                                      ("haïku", 3), ("Ωmega", 9), ("ballade", 7)]],
        "parameters": {"seed": 18446744073709551615, "seq_len": 5, "batch": 3,
                       "separator_tokens": 0, "epochs": {"poems": "2"}},
    },
}


def manifest_rows(documents: list[dict[str, object]]) -> list[dict[str, object]]:
    # The same rows tests/test_stream_build.py ingests as a ready manifest.
    return [{"doc_id": d["doc_id"], "source": d["source"], "n_bytes": max(int(d["n_tokens"]), 1),
             "n_tokens": d["n_tokens"], "content_hash": f"{i:064x}", "license": None}
            for i, d in enumerate(documents)]


def main() -> None:
    for name, case in CASES.items():
        docs, params = case["documents"], case["parameters"]
        result = reference_stream(docs, **params)
        sources = sorted({str(d["source"]) for d in docs})
        spec = StreamSpec(
            manifest_hash=manifest_hash_of_rows(manifest_rows(docs)),
            seed=params["seed"], seq_len=params["seq_len"], batch=params["batch"],
            separator_tokens=params.get("separator_tokens", 1),
            epochs=parse_epochs(params.get("epochs"), sources),
            token_budget=params.get("token_budget"),
        )
        out = {"spec": "lineage-stream/1", "documents": docs, "parameters": params,
               "manifest_hash": spec.manifest_hash, "spec_hash": spec.spec_hash,
               "canonical_parameters": spec.canonical_json(),
               "steps": result["steps"], "tokens": result["tokens"],
               "occurrences_digest": occurrences_digest(result["occurrences"]),
               "occurrences": result["occurrences"]}
        (HERE / f"{name}.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n",
                                          encoding="utf-8")


if __name__ == "__main__":
    main()
