# Two commands for a fresh machine: `make reproduce` and `make test` (each sets up the venv if missing).
VENV ?= .venv
PY := $(VENV)/bin/python
SCALE ?= cpu
JOBS ?= 2
STAMP := $(VENV)/.installed

.PHONY: setup test test-fast reproduce lint clean-ci

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first, from the local CPU build: a bare requirement would pull a multi-GB CUDA build
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e '.[fst,pipeline,test]'
	touch $@

# Unit and property tests, then the ci scale end to end compared with results/ci/ (tests/test_ci_regression.py).
test: setup
	$(PY) -m pytest -q -p no:cacheprovider --durations=25 tests

test-fast: setup
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow" tests

# --forcerun: the table is rebuilt from its runs (and they from data and models, where missing), not taken
# from the committed copy in results/$(SCALE)/, which Snakemake would otherwise count as up to date
reproduce: setup
	$(VENV)/bin/snakemake -j$(JOBS) --config scale=$(SCALE) --forcerun results/$(SCALE)/table1.csv -- results/table1.csv

lint: setup
	$(VENV)/bin/snakemake --lint
