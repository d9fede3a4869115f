# `make test` is the one test command (CI runs it through .ci/run); it builds .venv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test lint style clean branch bench

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

# The fix as a stack of upstream-style pull requests on transformers 5.14.1 (a branch, patch and PR text per step)
branch: $(STAMP)
	$(PY) utils/export_upstream_branch.py

# Cache.crop benchmarks, stock vs fixed (issue 5): writes docs/source/en/benchmarks.md and crop_latency.png
bench: $(STAMP)
	$(PY) benchmarks/bench_crop.py
