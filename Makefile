# Every target bootstraps its own virtualenv in .venv/ from the committed lock file.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
TRAINERS := $(VENV)/.trainers
RAY    := $(VENV)/.ray
BENCH  := $(VENV)/.bench

.PHONY: install demo readme test test-faults typecheck lint bench lock clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(PY) -m compileall -q lineage ingest cli schemas  # as a wheel install would: faster start
	touch $(STAMP)

# The real trainers (torch on the CPU, megatron-core, OLMo-core) that the order importers'
# tests check token for token; not dependencies of lineage.
$(TRAINERS): $(STAMP) tests/orders/install_trainers.sh
	bash tests/orders/install_trainers.sh $(VENV)
	touch $(TRAINERS)

# The `ray` extra (--engine ray, docs/scale.md) from its own lock: requirements.lock's
# pins plus Ray's. Not needed by `make install` or `make demo`.
$(RAY): $(STAMP) requirements-ray.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements-ray.lock
	touch $(RAY)

# The `bench` extra (datasette, the served-lookup peer of bench/headline.py) from its own
# lock: requirements.lock's pins plus datasette's. Never a dependency of lineage.
$(BENCH): $(STAMP) requirements-bench.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements-bench.lock
	touch $(BENCH)

demo: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash examples/demo.sh

# pytest exits 5 when it collected nothing: an empty suite must fail, not pass.
# Rewrite the command transcripts of README.md from a fresh run (tests/test_readme.py
# compares them).
readme: install
	$(PY) examples/readme.py --write

# The suite runs on two workers (pytest-xdist), the cores of the machine CI runs on.
test: install $(TRAINERS) $(RAY)
	$(VENV)/bin/ruff check .
	$(MAKE) --no-print-directory typecheck
	@$(PY) -m pytest -q -n 2; status=$$?; \
	if [ $$status -eq 5 ]; then echo "no tests were collected" >&2; exit 1; fi; exit $$status

# The whole fault matrix (docs/store.md, "Faults tested"): ENOSPC, EIO and SIGKILL at every
# write point of every writing command; `make test` runs each point once.
test-faults: install
	LINEAGE_FAULT_MATRIX=full $(PY) -m pytest -q -n 2 tests/faults

# mypy (strict) over the whole package. mypy finds a module in a folder of its name, but
# lineage.ingest, lineage.cli and lineage.schemas are installed from ingest/, cli/ and
# schemas/ (pyproject's package-dir), so it reads the package through a tree of links laid
# out as installed; its messages name files as lineage/ingest/..., lineage/cli/....
TYPED := build/typecheck
typecheck: install
	rm -rf $(TYPED) && mkdir -p $(TYPED)/lineage
	ln -s $(CURDIR)/lineage/* $(TYPED)/lineage/
	ln -s $(CURDIR)/ingest $(CURDIR)/cli $(CURDIR)/schemas $(TYPED)/lineage/
	cd $(TYPED) && $(CURDIR)/$(VENV)/bin/mypy --config-file $(CURDIR)/pyproject.toml \
		--cache-dir $(CURDIR)/.mypy_cache -p lineage

lint: install
	$(VENV)/bin/ruff check .

# Every headline figure beside its floor or peer, in one run; rewrites the "Current
# figures" table at the top of docs/performance.md.
bench: $(BENCH)
	@command -v b3sum >/dev/null || echo "note: no b3sum here (apt install b3sum): the folder rows go without their peer"
	nice -n 5 $(PY) bench/headline.py --write

# Re-pin every dependency (run after changing pyproject.toml). requirements-ray.lock starts
# from requirements.lock's pins, so the two agree on every package they share.
lock:
	$(PYTHON) -m pip install --quiet pip-tools
	$(PYTHON) -m piptools compile --quiet --strip-extras --extra dev --allow-unsafe \
		--generate-hashes -o requirements.lock pyproject.toml
	cp requirements.lock requirements-ray.lock
	$(PYTHON) -m piptools compile --quiet --strip-extras --extra dev --extra ray \
		--allow-unsafe --generate-hashes -o requirements-ray.lock pyproject.toml
	cp requirements.lock requirements-bench.lock
	$(PYTHON) -m piptools compile --quiet --strip-extras --extra dev --extra bench \
		--allow-unsafe --generate-hashes -o requirements-bench.lock pyproject.toml

clean:
	rm -rf $(VENV) demo-store build *.egg-info
