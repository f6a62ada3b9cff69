# The README's two commands: `make demo` and `make test`. Each sets itself up
# (virtual environment + install) on a fresh machine. `make help` lists every target.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# pyproject.toml's requires-python (tests/test_makefile.py checks that they agree).
MIN_PYTHON := 3.11

.PHONY: demo test install clean help

install: $(STAMP)  ## the virtual environment .venv with the project installed (editable) and its test tools

help:  ## this list of targets
	@echo "make TARGET [PYTHON=python3.12] [VAR=value ...]; the targets:"
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z0-9-]*:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The interpreter PYTHON names and the one $(VENV) runs, as "version real-path" (empty when absent). A venv
# cannot change interpreters in place (`venv` over another Python's venv keeps its python links, and pip
# then says "requires a different Python"): when they differ, the venv is made again from scratch.
comma := ,
INTERPRETER := import os, sys; print("%d.%d.%d" % sys.version_info[:3], os.path.realpath(sys.executable))
WANTED_PYTHON := $(shell $(PYTHON) -I -S -c '$(INTERPRETER)' 2>/dev/null)
VENV_PYTHON := $(shell $(BIN)/python -I -S -c '$(INTERPRETER)' 2>/dev/null)
ifneq ($(WANTED_PYTHON),$(VENV_PYTHON))
.PHONY: venv-for-another-python
$(STAMP): venv-for-another-python
VENV_CLEAR := --clear
endif

# setuptools>=77 and wheel: Beam's --setup_file builds an sdist, which needs both (the PEP 639 license).
# PYTHONWARNINGS: setuptools warns about every editable install of a flat layout (a banner on the first
# make demo); this project's folders are its packages, so the warning says nothing here.
$(STAMP): pyproject.toml setup.py
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] < tuple(map(int, "$(MIN_PYTHON)".split("."))))' 2>/dev/null \
	  || { echo "make: PYTHON=$(PYTHON) is $(if $(WANTED_PYTHON),Python $(word 1,$(WANTED_PYTHON)),not a Python that runs); the project needs Python $(MIN_PYTHON) or newer: make $(or $(MAKECMDGOALS),install) PYTHON=python$(MIN_PYTHON)" >&2; exit 1; }
	$(if $(VENV_PYTHON),$(if $(VENV_CLEAR),@echo "make: $(VENV) runs Python $(word 1,$(VENV_PYTHON)) ($(word 2,$(VENV_PYTHON)))$(comma) not PYTHON=$(PYTHON) ($(word 2,$(WANTED_PYTHON))): making it again"))
	$(PYTHON) -m venv $(VENV_CLEAR) $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip 'setuptools>=77' wheel
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# Test files run on two processes (pytest-xdist), each file whole on one of them so its module fixtures
# are built once: most tests wait on subprocesses, Beam workers or Flink, so two cut the wall time by ~40%.
TEST_WORKERS ?= 2

test: $(STAMP)  ## the whole test suite (Chromium fetched and the Flink job server jar built once, when missing)
	sh scripts/ensure_chromium.sh
	$(BIN)/python scripts/flink/prepare.py || echo "flink: preparation failed; the Flink tests will fail with the reason"
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

demo: $(STAMP)  ## a sample archive from real Critical Role transcripts, two runs, a backfill and their comparison, under out/demo
	$(BIN)/python -m pipelines.demo --output out/demo

clean:  ## remove the virtual environments and everything built or written (out/, build/, dist/)
	rm -rf $(VENV) .venv-peers out build dist *.egg-info

# Flink (see docs/running.md). FLINK_VERSION empty = the project's line, 1.20.
FLINK_VERSION ?=
export NOTARIUS_FLINK_VERSION = $(FLINK_VERSION)
TASKMANAGERS ?= 1
.PHONY: flink-jar flink-up flink-down reliability

flink-jar: $(STAMP)  ## Beam's Flink job server jar: cached, released (Maven), or built from ../shared/vendor; prints its path
	$(BIN)/python scripts/flink/fetch_job_server.py

flink-up: $(STAMP)  ## standalone Flink session cluster on localhost:8081 (jars from PyPI, the job server jar on the TaskManagers; TASKMANAGERS=2 for two TaskManagers) + Python worker pool on localhost:50000 + Beam job server on localhost:8099
	$(BIN)/python scripts/flink/session_cluster.py start --worker-pool-port 50000 --job-server-port 8099 --taskmanagers $(TASKMANAGERS)

flink-down:  ## stop what make flink-up started
	$(BIN)/python scripts/flink/session_cluster.py stop

reliability: $(STAMP)  ## tests too long for make test (docs/reliability.md): a Flink TaskManager killed mid-run; workers started by Beam's boot program with --setup_file (Go builds it once)
	$(BIN)/python scripts/flink/prepare.py
	$(BIN)/python scripts/flink/boot_env.py
	NOTARIUS_RELIABILITY=1 $(BIN)/python -m pytest -q -m reliability tests/test_flink.py tests/test_flink_boot.py

# The PySpark peer's own environment (bench/requirements-peers.txt; Java 17 needed), installed on demand.
PEERS_VENV ?= .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed-stamp

.PHONY: bench bench-peers peers-env bench-10m bench-loop bench-judges
# FLINK_10M=1: make bench also runs ten million candidates on a two-TaskManager session cluster beside
# 1M with the same settings (bench-10m; ~15 minutes more, ~30 GB of disk at its peak).
FLINK_10M ?=
bench: $(STAMP) $(PEERS_STAMP)  ## benchmarks: domain loop vs the job in-process, on two workers and on Flink, scaling, the loop's commands and the judges beside the job, instructions, micro, PySpark peer (docs/benchmarks.md)
	$(BIN)/python -m bench.run $(BENCH_ARGS)
	$(if $(FLINK_10M),$(MAKE) bench-10m)

bench-10m: $(STAMP)  ## 1M and 10M candidates (copies of the 1M archive) on a two-TaskManager session cluster, the job and compare of a revision's two runs (bench.flink)
	$(BIN)/python -m bench.flink --sizes 1000000,10000000 --configs flink-session-2tm --compare-configs flink-session-2tm --runs 1 --taskmanager-memory 6g --timeout 3600

# The loop's commands beside the job alone (bench.backfill; make bench runs it too). LOOP_SIZES=100000 for a short run.
LOOP_SIZES ?= 10000,100000,1000000
LOOP_RUNS ?= 3
bench-loop: $(STAMP)  ## export-batch, import-batch, compare, verify and the report beside the job at 10k, 100k and 1M (bench.backfill)
	$(BIN)/python -m bench.backfill --sizes $(LOOP_SIZES) --runs $(LOOP_RUNS)

# The judges beside the job without them alone (bench.judges; make bench runs it at 100k). JUDGE_SIZES=100000,1000000
# for the 1M row; JUDGE_BASELINE=DIR counts the job with judges off on that checkout too.
JUDGE_SIZES ?= 100000
JUDGE_BASELINE ?=
bench-judges: $(STAMP)  ## the job with every judge and a verdict for every request beside the job without, and judges off counted (bench.judges)
	$(BIN)/python -m bench.judges --sizes $(JUDGE_SIZES) --instructions 5000 $(if $(JUDGE_BASELINE),--baseline $(JUDGE_BASELINE))

peers-env: $(PEERS_STAMP)  ## the PySpark peer's own environment, .venv-peers (bench/requirements-peers.txt; Java 17 needed)

$(PEERS_STAMP): bench/requirements-peers.txt
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet -r bench/requirements-peers.txt
	touch $(PEERS_STAMP)

bench-peers: $(STAMP) $(PEERS_STAMP)  ## the job beside PySpark local[2] on the same archive (bench.peers)
	$(BIN)/python -m bench.peers $(PEERS_ARGS)
