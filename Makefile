# edgerl: `make demo` runs the main job, `make test` the suite. Both set up .venv first
# (idempotent: a stamp file re-runs pip only when pyproject.toml/setup.py/constraints.txt change).
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.edgerl-installed
PYTEST_ARGS ?=
BENCH_ARGS ?=

.PHONY: demo test lint bench firmware venv clean help test-mjlab test-runtime310

help:
	@echo "make demo   - set up .venv and run the main job (edgerl demo --fast)"
	@echo "make test   - set up .venv and run the test suite"
	@echo "make lint   - ruff"
	@echo "make bench  - the benchmarks quoted in docs/benchmarks.md (edgerl bench all;"
	@echo "              BENCH_ARGS=--quick for short runs)"
	@echo "make test-runtime310 - Python 3.10 runtime-only venv: its tests + aarch64 wheel check"
	@echo "make test-mjlab - mjlab cartpole through edgerl in a separate .venv-mjlab (CPU)"

venv: $(STAMP)

$(STAMP): pyproject.toml setup.py constraints.txt
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[all]"
	@if [ -f ros2_ws/src/edgerl_ros/setup.py ]; then \
		$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps \
			--no-build-isolation -e ros2_ws/src/edgerl_ros; fi
	@touch $@

firmware:
	@if [ -f firmware/Makefile ]; then $(MAKE) --no-print-directory -C firmware host; fi

demo: $(STAMP) firmware
	$(BIN)/edgerl demo --fast

test: $(STAMP) firmware
	@set +e; $(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP) firmware
	$(BIN)/edgerl bench all $(BENCH_ARGS)

test-runtime310: firmware  ## the edge install (Python 3.10, constraints-runtime.txt; CI runs it)
	bash tools/ci_runtime_py310.sh

test-mjlab:  ## mjlab cartpole -> edit -> export -> runtime, in its own venv (.venv-mjlab)
	bash tools/test_mjlab.sh

clean:
	rm -rf build dist *.egg-info $(VENV)
	@if [ -f firmware/Makefile ]; then $(MAKE) -C firmware clean; fi
