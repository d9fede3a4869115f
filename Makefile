# `make test` is the one test command (CI runs it through .ci/run); it builds .venv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Each target has its own environment, for its upstream-style tests (tests/<target>/): .venv holds the 5.14 backport and
# the development tools, .venv-v5_24 the 5.24 backport, .venv-v5_25 upstream main (transformers 5.25.x)
VENV_MAIN := .venv-v5_24
PY_MAIN := $(VENV_MAIN)/bin/python
STAMP_MAIN := $(VENV_MAIN)/.installed
VENV_25 := .venv-v5_25
PY_25 := $(VENV_25)/bin/python
STAMP_25 := $(VENV_25)/.installed
# The end-to-end tests that compare numbers computed along two kernel paths; `make test` also runs them on the portable
# kernels (ATEN_CPU_CAPABILITY=default), so that a comparison that holds only on this CPU's kernels fails here
NUMERIC_TESTS := tests/test_generation.py tests/test_generation_hybrid.py tests/test_call_sites.py \
  tests/test_generation_drafter_caches.py tests/test_rollback_schedules.py

.PHONY: install install-main install-v5_25 test test-main test-v5_25 test-default-kernels lint style clean branch bench matrix mutate audit drift never-worse

install: $(STAMP)
install-main: $(STAMP_MAIN)
install-v5_25: $(STAMP_25)

# uv installs several times faster than pip (measured in README.md); it is bootstrapped with pip and given pip's local
# wheels and constraint file (utils/uv_pip.py). Should anything in that path fail, pip does the whole install
# (`make install USE_UV=0` goes straight to pip).
USE_UV ?= 1
$(STAMP): requirements-dev.txt pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	( [ "$(USE_UV)" = 1 ] && $(PY) -m pip install --quiet "$$(grep '^uv==' requirements-dev.txt)" \
	  && UV=$(VENV)/bin/uv $(PY) utils/uv_pip.py install --quiet --python $(PY) --upgrade-package pip pip -r requirements-dev.txt \
	  && UV=$(VENV)/bin/uv $(PY) utils/uv_pip.py install --quiet --python $(PY) --no-deps -e . ) \
	|| ( echo "uv install failed: installing with pip" \
	  && $(PY) -m pip install --quiet --upgrade pip \
	  && $(PY) -m pip install --quiet -r requirements-dev.txt \
	  && $(PY) -m pip install --quiet --no-deps -e . )
	touch $(STAMP)

$(STAMP_MAIN): requirements-v5_24.txt pyproject.toml setup.py | $(STAMP)
	test -x $(PY_MAIN) || $(PYTHON) -m venv $(VENV_MAIN)
	( [ "$(USE_UV)" = 1 ] && test -x $(VENV)/bin/uv \
	  && UV=$(VENV)/bin/uv $(PY) utils/uv_pip.py install --quiet --python $(PY_MAIN) -r requirements-v5_24.txt \
	  && UV=$(VENV)/bin/uv $(PY) utils/uv_pip.py install --quiet --python $(PY_MAIN) --no-deps -e . ) \
	|| ( echo "uv install failed: installing with pip" \
	  && $(PY_MAIN) -m pip install --quiet -r requirements-v5_24.txt \
	  && $(PY_MAIN) -m pip install --quiet --no-deps -e . )
	touch $(STAMP_MAIN)

# transformers 5.25.0 requires `kernels>=0.19.1,<0.20`, which the package registry of this project's machines does not
# serve (0.17.2 is the newest there); transformers imports and runs without it, so it is installed with `--no-deps`
# (requirements-v5_25-nodeps.txt) next to its other requirements (requirements-v5_25.txt)
$(STAMP_25): requirements-v5_25.txt requirements-v5_25-nodeps.txt pyproject.toml setup.py | $(STAMP)
	test -x $(PY_25) || $(PYTHON) -m venv $(VENV_25)
	( [ "$(USE_UV)" = 1 ] && test -x $(VENV)/bin/uv \
	  && UV=$(VENV)/bin/uv $(PY) utils/uv_pip.py install --quiet --python $(PY_25) -r requirements-v5_25.txt \
	  && UV=$(VENV)/bin/uv $(PY) utils/uv_pip.py install --quiet --python $(PY_25) --no-deps -r requirements-v5_25-nodeps.txt \
	  && UV=$(VENV)/bin/uv $(PY) utils/uv_pip.py install --quiet --python $(PY_25) --no-deps -e . ) \
	|| ( echo "uv install failed: installing with pip" \
	  && $(PY_25) -m pip install --quiet -r requirements-v5_25.txt \
	  && $(PY_25) -m pip install --quiet --no-deps -r requirements-v5_25-nodeps.txt \
	  && $(PY_25) -m pip install --quiet --no-deps -e . )
	touch $(STAMP_25)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# -n auto: one worker per core, each test file on one worker (the end-to-end export, ~9 min, runs next to the rest)
test: lint
	$(PY) -m pytest -n auto --dist loadfile
	$(MAKE) --no-print-directory test-main
	$(MAKE) --no-print-directory test-v5_25
	$(MAKE) --no-print-directory test-default-kernels

# The project tests that hold for both targets (each skips what is specific to the other one)
BOTH_TARGETS_TESTS := tests/test_audit.py tests/test_stock_parity.py tests/test_compile.py tests/test_pr_texts.py tests/test_crop_arguments.py tests/test_kept_crops.py $(NUMERIC_TESTS) tests/test_generation_history.py tests/test_stateful_history.py tests/test_syncs.py

# The 5.24 backport: its upstream-style tests with the fix applied to transformers 5.24, and the project tests that
# hold for both targets
test-main: $(STAMP_MAIN)
	$(PY_MAIN) -m pytest tests/v5_24 $(BOTH_TARGETS_TESTS)

# Upstream main (transformers 5.25): its upstream-style tests with the fix applied, the end-to-end tests of hybrid main
# models and of hybrid assistants, and the numeric ones again on the portable kernels
V5_25_TESTS := tests/v5_25 tests/test_generation_main_hybrid.py tests/test_generation_main_hybrid_mtp.py tests/test_generation_hybrid.py \
  tests/test_generation_drafter_caches.py tests/test_rollback_schedules.py
# The calls users make (issue 39): once, on this CPU's kernels (their comparisons are those of the sweeps above)
test-v5_25: $(STAMP_25)
	$(PY_25) -m pytest -n auto --dist loadfile $(V5_25_TESTS) tests/test_generation_user_patterns.py tests/test_never_worse.py tests/test_audit.py tests/test_stock_parity.py tests/test_syncs.py tests/test_compile.py tests/test_pr_texts.py tests/test_crop_arguments.py \
	  tests/test_kept_crops.py tests/test_kept_attention_crops.py tests/test_kept_linear_attention.py
	ATEN_CPU_CAPABILITY=default $(PY_25) -m pytest -q $(V5_25_TESTS)

# The upstream series alone is never worse than `main` (issue 40): the generation sweeps on stock 5.25.0 and with the
# pull requests without the fork steps (`CACHE_CROP_FIX_SERIES=upstream`); every case passes, fails as on 5.25.0, or is
# refused with a clear error where 5.25.0 fails (utils/never_worse.py). Not part of `make test`; CI runs it after.
never-worse: $(STAMP_25)
	$(PY_25) utils/never_worse.py

test-default-kernels: $(STAMP)
	ATEN_CPU_CAPABILITY=default $(PY) -m pytest -q $(NUMERIC_TESTS)

style: $(STAMP)
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

clean:
	rm -rf build dist .pytest_cache .ruff_cache .hypothesis .nox

# The fix as a stack of upstream-style pull requests on transformers 5.14.1 (a branch, patch and PR text per step)
branch: $(STAMP)
	$(PY) utils/export_upstream_branch.py

# The stock-vs-fixed audit of every cache layer type: each target's section of docs/source/en/cache_crop_audit.md, in
# that target's venv
# (`-`: the audit exits 1 while the 5.25 fix still has wrong cases; it writes its section all the same)
audit: $(STAMP) $(STAMP_MAIN) $(STAMP_25)
	$(PY_25) -m cache_crop_fix audit
	$(PY_MAIN) -m cache_crop_fix audit
	$(PY) -m cache_crop_fix audit

# Cache.crop benchmarks, stock vs fixed (issue 5), in each target's venv: each writes its target's section of
# docs/source/en/benchmarks.md and crop_latency_<target>.png; then assisted decoding with linear attention assistants
# (issue 12), on each target, which writes its own sections of benchmarks.md; then assisted decoding over a long
# generation with an assistant accepted often (issue 39: tokens fed to the assistant, its cache, speed-up), each target
bench: $(STAMP) $(STAMP_MAIN) $(STAMP_25)
	$(PY_25) benchmarks/bench_crop.py
	$(PY_25) benchmarks/bench_static_sliding_room.py
	$(PY_MAIN) benchmarks/bench_crop.py
	$(PY) benchmarks/bench_crop.py
	$(PY) benchmarks/bench_assisted_history.py
	$(PY_MAIN) benchmarks/bench_assisted_history.py
	$(PY_25) benchmarks/bench_assisted_history.py
	$(PY_25) benchmarks/bench_assisted_calls.py
	$(PY_MAIN) benchmarks/bench_assisted_calls.py
	$(PY) benchmarks/bench_assisted_calls.py
	$(PY_25) benchmarks/bench_zamba_continuation.py

# The supported Python and torch versions (noxfile.py; downloads torch for Pythons without a local wheel). Not part of
# `make test`. `make matrix NOXFLAGS="-s fork"` runs one session.
matrix: $(STAMP)
	$(PY) -m nox $(NOXFLAGS)

# Mutation testing of the overlay with cosmic-ray (issue 13), each target in the venv of its transformers release:
# `make mutate` (every target, v5_25 first), `make mutate TARGET=v5_14 JOBS=2`, `make mutate FAMILY=semantic` (the
# statement-level mutants of utils/semantic_mutants.py instead of cosmic-ray's operators); writes
# build/mutation/<target>[-semantic]/report.md and fails if a mutant survives without an argument in
# utils/mutation_equivalents/<target>.py. Not part of `make test`.
TARGET ?= v5_25 v5_24 v5_14
JOBS ?= 1
FAMILY ?= operator
mutate: $(STAMP) $(STAMP_MAIN) $(STAMP_25)
	status=0; for target in $(TARGET); do \
	  case $$target in v5_25) py=$(PY_25);; v5_24) py=$(PY_MAIN);; *) py=$(PY);; esac; \
	  $$py -m pip install --quiet -r requirements-mutate.txt \
	  && nice $$py utils/mutation_testing.py --family $(FAMILY) --jobs $(JOBS) $$target || status=1; \
	done; exit $$status

# What a transformers release does to the fix (issue 22): the newest release on the package index against the nearest
# target, with its stock audit in a venv of its own (build/drift/); nothing is installed into our venvs. Exits 1 when
# something changed. `make drift DRIFT="5.25.0 --against v5_24 --audit"` checks another release.
DRIFT ?= --audit
drift: $(STAMP)
	$(PY) -m cache_crop_fix drift $(DRIFT)

# Any other target (one made by `python -m cache_crop_fix new-target`): `make test-v5_26` makes .venv-v5_26 from
# requirements-v5_26.txt (and requirements-v5_26-nodeps.txt, installed with --no-deps, if there is one) and runs
# tests/v5_26 there. The targets above keep their own rules.
.PRECIOUS: .venv-%/.installed
.venv-%/.installed: requirements-%.txt pyproject.toml setup.py | $(STAMP)
	test -x .venv-$*/bin/python || $(PYTHON) -m venv .venv-$*
	UV=$(VENV)/bin/uv $(PY) utils/uv_pip.py install --quiet --python .venv-$*/bin/python -r requirements-$*.txt
	if [ -f requirements-$*-nodeps.txt ]; then \
	  UV=$(VENV)/bin/uv $(PY) utils/uv_pip.py install --quiet --python .venv-$*/bin/python --no-deps -r requirements-$*-nodeps.txt; fi
	UV=$(VENV)/bin/uv $(PY) utils/uv_pip.py install --quiet --python .venv-$*/bin/python --no-deps -e .
	touch $@

test-v%: .venv-v%/.installed
	.venv-v$*/bin/python -m pytest tests/v$*
