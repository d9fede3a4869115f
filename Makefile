# `make test` is the one test command (CI runs it through .ci/run); it builds .venv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test lint style clean branch bench mutate

install: $(STAMP)

$(STAMP): requirements-dev.txt pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: lint
	$(PY) -m pytest

style: $(STAMP)
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

clean:
	rm -rf build dist .pytest_cache .ruff_cache .hypothesis

# The upstream-style branch `fix-cache-crop` of transformers 5.14.1 with the fix, its patch and PR description
branch: $(STAMP)
	$(PY) utils/export_upstream_branch.py

# Cache.crop benchmarks, stock vs fixed (issue 5): writes docs/source/en/benchmarks.md and crop_latency.png
bench: $(STAMP)
	$(PY) benchmarks/bench_crop.py

# Mutation testing of the overlay with cosmic-ray (issue 13): `make mutate` (every target whose transformers is
# installed) or `make mutate TARGET=v5_14 JOBS=2`; writes build/mutation/<target>/report.md.
TARGET ?=
JOBS ?= 1
mutate: $(STAMP)
	$(PY) -m pip install --quiet -r requirements-mutate.txt
	nice $(PY) utils/mutation_testing.py --jobs $(JOBS) $(TARGET)
