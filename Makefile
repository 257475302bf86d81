# Two commands set up everything on a fresh machine:
#   make demo   - create .venv, install, run the end-to-end demo
#   make test   - create .venv if missing, install .[cpu,test], check format and lint (ruff), run the whole test suite
#   make claims - check every number README.md and docs/ state against its source (docs/claims.md)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed

.PHONY: demo test bench prove claims clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PIP) install --quiet -e ".[cpu,test]"
	# Type stubs for the TensorRT code (mypy runs in the tests). --no-deps: the stubs declare
	# `tensorrt` as a dependency, whose PyPI package downloads binaries from an unreachable host.
	$(PIP) install --quiet --no-deps "tensorrt-stubs==10.13.0.35.1"
	# cppcheck and Frama-C (frama-c-base) for the static checks of the generated C step
	# (tests/codegen): Debian packages, installed with apt-get where that works (CI: a fresh
	# Debian machine, as root); elsewhere those tests are skipped with a message naming them.
	@command -v cppcheck >/dev/null 2>&1 && command -v frama-c >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && apt-get update -qq && apt-get install -y -qq cppcheck frama-c-base >/dev/null; } || echo "cppcheck / frama-c-base could not be installed (apt-get install cppcheck frama-c-base): their tests will be skipped"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/tickformer demo --out reports/demo

test: $(STAMP)
	$(VENV)/bin/ruff format --check --quiet . && $(VENV)/bin/ruff check --quiet .
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q

prove: $(STAMP)
	$(VENV)/bin/tickformer prove

claims: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) claims/check.py

bench: $(STAMP)
	$(PIP) install --quiet "torch==2.13.0" || echo "torch comparator unavailable; its benchmarks will be skipped"
	$(PY) -m pytest benchmarks -q --benchmark-json=benchmarks/results/latest.json
	$(PY) benchmarks/report.py

clean:
	rm -rf $(VENV) runs .pytest_cache .hypothesis
