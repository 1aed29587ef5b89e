#!/usr/bin/env bash
# The walk-through of examples/README.md, run by `make demo` on a fresh demo store.
set -euo pipefail
cd "$(dirname "$0")/.."
export LINEAGE_STORE="${LINEAGE_STORE:-demo-store}"
rm -rf "$LINEAGE_STORE"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step lineage init
step lineage ingest corpus examples/corpus --corpus example \
    --license shakespeare=LicenseRef-PublicDomain --license python-stdlib=PSF-2.0 \
    --license debian-copyright=NOASSERTION
step lineage ingest corpus examples/shards/sonnets.jsonl.gz examples/shards/poems.parquet \
    --corpus poems --license LicenseRef-PublicDomain
step lineage corpus list
step lineage corpus show example
step lineage sql "SELECT corpus, doc_id, n_tokens, left(content_hash, 16) AS content_hash
                  FROM documents WHERE doc_id LIKE 'shakespeare/macbeth%' OR doc_id = 'sonnet-018'
                  ORDER BY doc_id"
step lineage ingest corpus examples/corpus --corpus example \
    --license shakespeare=LicenseRef-PublicDomain --license python-stdlib=PSF-2.0 \
    --license debian-copyright=NOASSERTION
step lineage stream build --corpus example --name main --seed 42 --seq-len 1024 --batch 4
step lineage stream show main
step lineage docs --step 2 --stream main
step lineage docs --step 2 --stream main --rank 1 --world-size 2
step lineage trained-on examples/corpus/shakespeare/macbeth.txt examples/corpus/python-stdlib/chunk.py
# A file that is not in the corpus: the answer is "not-found" and the exit code 1.
printf '\n\033[1m$ %s\033[0m\n' "lineage trained-on examples/licenses/python-LICENSE.txt; echo exit=\$?"
lineage trained-on examples/licenses/python-LICENSE.txt || echo "exit=$?"
# A web page quoting Antony's speech: re-wrapped, curly quotes, boilerplate around it.
step lineage trained-on examples/queries/article.txt

# A tiny real training run over that stream: NumPy bigram model, clipping, the skip rule,
# a lineage-chain/2 step log that declares the rule and the checkpoint interval and is
# closed at the end, and checkpoints (weights, optimizer state) every 50 steps.
rm -rf demo-run
step python examples/tiny_run.py --store "$LINEAGE_STORE" --stream main --steps 200 --out demo-run
step lineage ingest steps demo-run/steps.jsonl --run tiny --stream main --world-size 2
step lineage run show tiny
step lineage chain verify tiny
step lineage trace --run tiny --skipped --limit 1
step lineage trained-on --run tiny examples/corpus/python-stdlib/chunk.py
step lineage verify demo-run/checkpoint-99
step lineage ingest checkpoint demo-run/checkpoint-99 --run tiny --step 99
step lineage run checkpoints tiny --nearest 120

# An external look at that checkpoint, and an experiment gated behind the same checks.
step lineage report demo-run/checkpoint-99 --format md
lineage sums demo-run/checkpoint-199 -o demo-run/checkpoint-199.SHA256SUMS 2>/dev/null
step lineage exp run --weights demo-run/checkpoint-199 --revision tiny@199 \
    --sums demo-run/checkpoint-199.SHA256SUMS --name local-check -- python examples/exp_check.py
step lineage exp show local-check
step lineage exp logs local-check
step lineage store verify
