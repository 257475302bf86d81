# Two commands set up everything on a fresh machine (make help lists the rest):
#   make demo   - create .venv from requirements.lock, run the end-to-end demo
#   make test   - create .venv if missing, check format and lint (ruff), run the fast tier of tests
# Every target that installs, installs from requirements.lock only (exact versions, hashes
# required); `make lock` regenerates it from pyproject.toml's ranges and requirements-tools.in.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
LOCK   := requirements.lock
STAMP  := $(VENV)/.installed
# one BLAS/OpenMP thread per process: the tests run one process per core (pytest-xdist)
PYTEST := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -n auto
# Debian packages for the static checks of the generated C step (tests/codegen)
APT_PACKAGES := cppcheck frama-c-base

.PHONY: help demo test check lock prove claims bench clean

help:  ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-7s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "tickformer'"'"'s lock is for Python >= 3.11; run make with PYTHON=python3.11 (or newer)")'
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(LOCK) pyproject.toml | $(PY)
	@echo "installing the locked environment from $(LOCK) (exact versions, hashes checked)"
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(LOCK)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@$(MAKE) --no-print-directory system-packages
	touch $(STAMP)

# cppcheck and Frama-C are Debian packages: installed with apt-get where this runs as root on a
# Debian machine (CI); elsewhere, or with NO_APT=1, their tests are skipped with a message naming them.
.PHONY: system-packages
system-packages:
	@if command -v cppcheck >/dev/null 2>&1 && command -v frama-c >/dev/null 2>&1; then :; \
	elif [ -n "$(NO_APT)" ] || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
	  echo "note: not installing $(APT_PACKAGES) (needs apt-get as root; NO_APT=$(NO_APT)): their tests will be skipped"; \
	else \
	  echo "installing Debian packages $(APT_PACKAGES) with apt-get (static checks of the generated C; NO_APT=1 skips)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES) >/dev/null; } \
	    || echo "note: apt-get could not install $(APT_PACKAGES): their tests will be skipped"; \
	fi

demo: $(STAMP)  ## the end-to-end demo: train, export, verify, certify, closed loop (reports/demo)
	$(VENV)/bin/tickformer demo --out reports/demo

test: $(STAMP)  ## ruff, then the fast tier of tests (not marked slow), both cores
	$(VENV)/bin/ruff format --check --quiet . && $(VENV)/bin/ruff check --quiet .
	$(PYTEST) -q -m "not slow"

check: $(STAMP)  ## ruff, then every test: the fast tier and the slow one (what CI runs)
	$(VENV)/bin/ruff format --check --quiet . && $(VENV)/bin/ruff check --quiet .
	$(PYTEST) -q

lock: $(STAMP)  ## regenerate requirements.lock from pyproject.toml and requirements-tools.in
	$(VENV)/bin/uv pip compile pyproject.toml requirements-tools.in --extra cpu --extra data --extra plant --extra test \
	  --excludes requirements-exclude.txt --generate-hashes --universal --python-version 3.11 \
	  --custom-compile-command "make lock" --quiet -o $(LOCK)

prove: $(STAMP)  ## the CrossHair proofs and their wrong twins
	$(VENV)/bin/tickformer prove

claims: $(STAMP)  ## check every number README.md and docs/ state against its source
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) claims/check.py

bench: $(STAMP)  ## benchmarks against comparators (installs the torch comparator into the venv)
	$(PY) -m pip install --quiet "torch==2.13.0" || echo "torch comparator unavailable; its benchmarks will be skipped"
	$(PY) -m pytest benchmarks -q --benchmark-json=benchmarks/results/raw.json
	$(PY) benchmarks/report.py

clean:  ## remove the venv and run outputs
	rm -rf $(VENV) runs .pytest_cache .hypothesis
