#!/usr/bin/env bash
# Install the real trainers the order importers are proven against (megatron-core,
# OLMo-core) and the CPU build of torch they need into a virtualenv (default .venv), so
# tests/orders/test_megatron_proof.py and test_olmo_core_real.py run instead of skipping.
# None is a dependency of lineage: the importers read the trainers' files with numpy.
# `make test` runs this once per virtualenv.
set -euo pipefail
venv="${1:-.venv}"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
# 2.13.0 is the CPU build (ai2-olmo-core 3.0.0 wants torch >=2.10,<2.14).
"${pip[@]}" torch==2.13.0
# 0.16.1 is the newest megatron-core for Python 3.11; its wheel carries the compiled
# dataset helpers and needs nothing beyond torch, numpy and packaging.
"${pip[@]}" megatron-core==0.16.1
# --no-deps: ai2-olmo-core pins filelock<4, and cached-path rich<14 and
# huggingface-hub<2, below the lock's; OLMo-core's data and train modules import fine
# with the lock's versions. These are what they import (cached-path imports boto3 and
# google-cloud-storage at start-up).
"${pip[@]}" --no-deps ai2-olmo-core==3.0.0 cached-path==1.8.10 dataclass-extensions==0.5.0 \
    bettermap==1.3.1 dill==0.4.1 boto3==1.44.8 botocore==1.44.8 s3transfer==0.19.3 \
    jmespath==1.1.0
"${pip[@]}" google-cloud-storage==3.17.1
"$venv/bin/python" -c "import olmo_core.data, olmo_core.train.callbacks, olmo_core.version as v; print('ai2-olmo-core', v.VERSION)"
"$venv/bin/python" -c "import megatron.core.datasets.gpt_dataset; from importlib.metadata import version; print('megatron-core', version('megatron-core'))"
