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
# the Triton server's own venv (tickformer serve; docs/serving.md)
SERVE_VENV  := .venv-serve
SERVE_LOCK  := requirements-serve.lock
SERVE_STAMP := $(SERVE_VENV)/.installed
# one BLAS/OpenMP thread per process: the tests run one process per core (pytest-xdist)
PYTEST := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -n auto
# Debian packages for the static checks of the generated C step (tests/codegen) and the headless
# browser that renders a certificate's report.html in its test (tests/certify/test_report_html.py)
APT_PACKAGES := cppcheck frama-c-base chromium

.PHONY: help demo test slow check lock prove claims bench serve clean

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

# cppcheck, Frama-C and chromium are Debian packages: installed with apt-get where this runs as root
# on a Debian machine (CI); elsewhere, or with NO_APT=1, their tests are skipped with a message naming them.
.PHONY: system-packages
system-packages:
	@if command -v cppcheck >/dev/null 2>&1 && command -v frama-c >/dev/null 2>&1 && command -v chromium >/dev/null 2>&1; then :; \
	elif [ -n "$(NO_APT)" ] || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
	  echo "note: not installing $(APT_PACKAGES) (needs apt-get as root; NO_APT=$(NO_APT)): their tests will be skipped"; \
	else \
	  echo "installing Debian packages $(APT_PACKAGES) with apt-get (static checks of the generated C; chromium renders the certificate report in its test; NO_APT=1 skips)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES) >/dev/null; } \
	    || echo "note: apt-get could not install $(APT_PACKAGES): their tests will be skipped"; \
	fi

$(SERVE_STAMP): $(SERVE_LOCK) pyproject.toml
	@echo "installing the Triton server's venv $(SERVE_VENV) from $(SERVE_LOCK) (exact versions, hashes checked)"
	$(PYTHON) -m venv $(SERVE_VENV)
	$(SERVE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(SERVE_LOCK)
	$(SERVE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(SERVE_STAMP)

# ART: an exported decoder-only artifact (default: a tiny one made here); SLOTS streams, gRPC on PORT.
ART   ?= runs/serve-demo/art
SLOTS ?= 64
PORT  ?= 8001
serve: $(STAMP) $(SERVE_STAMP)  ## serve ART's streams from Triton on 127.0.0.1:PORT (gRPC) until Ctrl-C / SIGTERM
	@[ -e "$(ART)" ] || $(PY) -c 'from tickformer.export.writer import export_params; from tickformer.model import init_params, preset; c = preset("tiny").replace(window=8); export_params(c, init_params(c, 0), "$(ART)", batch=1)'
	$(VENV)/bin/tickformer serve $(ART) --repo runs/serve-demo/repo --slots $(SLOTS) --grpc-port $(PORT) --run

demo: $(STAMP)  ## the end-to-end demo: train, export, verify, certify, closed loop (reports/demo)
	$(VENV)/bin/tickformer demo --out reports/demo

test: $(STAMP)  ## ruff, then the fast tier of tests (not marked slow), both cores
	$(VENV)/bin/ruff format --check --quiet . && $(VENV)/bin/ruff check --quiet .
	$(PYTEST) -q -m "not slow"

slow: $(STAMP) $(SERVE_STAMP)  ## the slow tier alone (tests marked slow: long streams, training, proofs, Frama-C, the demo)
	$(PYTEST) -q -m slow

check: test slow  ## every test: make test, then make slow (what .ci/run runs)

# Two locks from one command: the server of `tickformer serve` (nvidia-pytriton's tritonserver)
# pins numpy < 2, so it gets its own lock and venv (.venv-serve) instead of the project's numpy 2.
lock: $(STAMP)  ## regenerate requirements.lock (and requirements-serve.lock) from pyproject.toml and the .in files
	$(VENV)/bin/uv pip compile pyproject.toml requirements-tools.in --extra cpu --extra data --extra plant --extra serve --extra test \
	  --excludes requirements-exclude.txt --generate-hashes --universal --python-version 3.11 \
	  --custom-compile-command "make lock" --quiet -o $(LOCK)
	$(VENV)/bin/uv pip compile pyproject.toml requirements-serve.in --extra cpu \
	  --generate-hashes --python-version 3.11 \
	  --custom-compile-command "make lock" --quiet -o $(SERVE_LOCK)

prove: $(STAMP)  ## the CrossHair proofs and their wrong twins
	$(VENV)/bin/tickformer prove

claims: $(STAMP)  ## check every number README.md and docs/ state against its source
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) claims/check.py

bench: $(STAMP)  ## benchmarks against comparators (installs the torch comparator into the venv)
	$(PY) -m pip install --quiet "torch==2.13.0" || echo "torch comparator unavailable; its benchmarks will be skipped"
	$(PY) -m pytest benchmarks -q --benchmark-json=benchmarks/results/raw.json
	$(PY) benchmarks/report.py

clean:  ## remove the venv and run outputs
	rm -rf $(VENV) $(SERVE_VENV) runs .pytest_cache .hypothesis
