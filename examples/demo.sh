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

# What the store can say for others: a model card for checkpoint 99 and a draft of the
# EU AI Act public summary of the run's training content (fields lineage cannot know are
# left to the provider).
step lineage export model-card --run tiny --checkpoint 99 -o demo-run/MODEL_CARD.md
step lineage export ai-act-summary --run tiny --format md -o demo-run/ai-act-summary.md
head -n 24 demo-run/ai-act-summary.md
# The same run as OpenLineage events (the corpus ingest, the stream build, the training run
# with its checkpoint), one JSON event per line, for Marquez, DataHub or any OpenLineage
# consumer (`--url` sends them there); read back, every lineage_ facet matches the store.
step lineage export openlineage --run tiny -o demo-run/openlineage.jsonl
step lineage ingest openlineage demo-run/openlineage.jsonl
echo "OpenLineage events of run tiny: $(pwd)/demo-run/openlineage.jsonl"

# An external look at that checkpoint, and an experiment gated behind the same checks.
step lineage report demo-run/checkpoint-99 --format md
lineage sums demo-run/checkpoint-199 -o demo-run/checkpoint-199.SHA256SUMS 2>/dev/null
step lineage exp run --weights demo-run/checkpoint-199 --revision tiny@199 \
    --sums demo-run/checkpoint-199.SHA256SUMS --name local-check -- python examples/exp_check.py
step lineage exp show local-check
step lineage exp logs local-check

# Auditing a run: volunteers replay one step each with the trainer's own replay function
# and attest the state hash they got. A short run declares an interval of 4 steps; ada
# starts from its published checkpoint after step 3, the others relay from the state the
# previous auditor saved, and the four matching steps confirm interval 1 (steps 4-7).
rm -rf audit-run relay-4 relay-5 relay-6
step python examples/tiny_run.py --store "$LINEAGE_STORE" --stream main --steps 12 \
    --checkpoint-every 4 --out audit-run
step lineage ingest steps audit-run/steps.jsonl --run audited --stream main --world-size 2
step lineage ingest checkpoint audit-run/checkpoint-3 --run audited --step 3
step lineage audit claim audited --steps 4-7 --auditor ada
step lineage audit replay audited --step 4 --replayer examples/tiny_run.py:replay \
    --auditor ada --save relay-4
step lineage audit replay audited --step 5 --replayer examples/tiny_run.py:replay \
    --auditor ben --from relay-4 --save relay-5
step lineage audit replay audited --step 6 --replayer examples/tiny_run.py:replay \
    --auditor cy --from relay-5 --save relay-6
step lineage audit replay audited --step 7 --replayer examples/tiny_run.py:replay \
    --auditor dee --from relay-6
step lineage audit status audited
step lineage audit who audited
# Every record the ledger accepted is a leaf of the store's signed transparency log:
step lineage audit show audited --step 4

# What the store proves, as in-toto attestations signed with an ed25519 key, which
# securesystemslib and in-toto's tools check without lineage (docs/attestations.md).
rm -f demo-key demo-key.pub && ssh-keygen -q -t ed25519 -N "" -C demo -f demo-key
record=$(lineage sql "SELECT id FROM audit_records WHERE kind = 'attestation' ORDER BY created_at, id LIMIT 1" --json \
    | python -c "import json, sys; print(json.load(sys.stdin)[0]['id'])")
step lineage attest corpus example --key demo-key -o demo-run/corpus.intoto.json
step lineage attest stream main --key demo-key -o demo-run/stream.intoto.json
step lineage attest run tiny --key demo-key -o demo-run/run.intoto.json
step lineage attest audit "$record" --key demo-key -o demo-run/audit.intoto.json
step lineage attest exp local-check --key demo-key -o demo-run/exp.intoto.json
for kind in corpus stream run audit exp; do
    step lineage attest verify "demo-run/$kind.intoto.json" --key demo-key.pub
done
# A checkpoint, signed as OpenSSF model signing does (an elliptic-curve key), and checked
# by model signing's own command; the binding to the chain is checked against the store.
python -c "from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import serialization as s
k = ec.generate_private_key(ec.SECP256R1())
open('demo-run/ec.pem', 'wb').write(k.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption()))
open('demo-run/ec.pub', 'wb').write(k.public_key().public_bytes(s.Encoding.PEM, s.PublicFormat.SubjectPublicKeyInfo))"
step lineage attest checkpoint tiny --step 99 --key demo-run/ec.pem -o demo-run/checkpoint-99.sig
step model_signing verify key demo-run/checkpoint-99 --signature demo-run/checkpoint-99.sig \
    --public_key demo-run/ec.pub
step lineage attest verify demo-run/checkpoint-99.sig.lineage.json --key demo-run/ec.pub
step lineage store verify

# The same store over HTTP: the JSON API (each answer exactly a command's --json) and the
# web explorer, on loopback until Ctrl-C (docs/serve.md).
printf '\nServe the demo store:  lineage --store %s serve   (then open http://127.0.0.1:8000/)\n' \
    "$LINEAGE_STORE"
