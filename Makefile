# Two entry points (see README): `make run` and `make test`. Both create .venv on first use; `make run`
# installs what the emulator needs, `make test` adds the test tools (the `test` extra). Both install the
# versions in constraints.txt (what CI tested); pyproject.toml holds the ranges a library install takes.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PIP := PYTHONWARNINGS=ignore $(BIN)/pip install --quiet -c constraints.txt
# One stamp per install: the runtime dependencies, those and the test tools, those and Dask.
STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
CLUSTER_STAMP := $(VENV)/.installed-cluster

.PHONY: run test lint bench bench-baseline e1 e2 e2-w2 e2-virtual e2-yarn2020 e2-dask e2-many-core e3 e3-tcp e4 e5 e5-cluster recovery soak fuzz clean chromium traces

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH (or run: make PYTHON=python3 ...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# setuptools warns on every editable install that a folder named like a package may shadow it
# (here they are the same folders); the build's warnings say nothing a user can act on (PYTHONWARNINGS).
$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e .
	touch $(STAMP)

$(TEST_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e '.[test]'
	touch $(STAMP) $(TEST_STAMP)

$(CLUSTER_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e '.[cluster]'
	touch $(STAMP) $(CLUSTER_STAMP)

run: $(STAMP)
	$(BIN)/emulator run scenarios/quickstart.toml --out runs/quickstart

test: $(TEST_STAMP) chromium
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

# Debian's Chromium for tests/process/test_browser.py (needs root; the test is skipped without it, except in CI).
chromium:
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@command -v chromium >/dev/null 2>&1 || echo "note: no chromium (install Debian's chromium as root); tests/process/test_browser.py will skip"

# The bench (scenarios/studies/bench.toml): the emulator's own speed in each heartbeat mode against
# the floor, and the memory per NodeManager, points one at a time (~1 min on 2 cores); bench-baseline:
# the first design (asyncio core, ring liveness as messages) beside today's, into docs/bench.json
# (its tables: `emulator study --table docs/bench.json`; on a quiet machine, wall times mean little otherwise).
bench: $(STAMP)
	$(BIN)/emulator study scenarios/studies/bench.toml --force --out runs/bench.json

bench-baseline: $(STAMP)
	$(BIN)/emulator study scenarios/studies/bench.toml --axis design=des,asyncio --force --out docs/bench.json

# E1 (thesis Tables 4.1-4.3), faithful (issue 14): 3 seeds x {no packing, thesis, fit} x
# {preemption off, on} on scenarios/e1-faithful.toml's fixed nodes, preemption as the thesis's YT
# ran it (issue 33), the study scenarios/studies/e1.toml (~12 min on 2 cores); writes docs/e1.json,
# whose tables `emulator figures --write docs/packing.md docs/results.md README.md` puts in the docs.
e1: $(STAMP)
	$(BIN)/emulator study scenarios/studies/e1.toml --out docs/e1.json

# E2 (paper 004 Fig. 5, Fig. 8): heartbeat scalability over TCP, periodic vs delta, the RM in one
# process and the nodes in one worker process, the study scenarios/studies/e2.toml (~8 min on 2
# cores, real-time points one at a time; resumable in runs/); e2-w2: the same with two node-host
# processes. The first 400 emulated s of each run: the load peaks at 300-400 s (the last job starts
# at 290 s). Then cp runs/e2-sweep.json docs/ (its tables: emulator figures --write docs/*.md).
e2: $(STAMP)
	$(BIN)/emulator study scenarios/studies/e2.toml --out runs/e2-sweep.json --plots docs

e2-w2: $(STAMP)
	$(BIN)/emulator study scenarios/studies/e2.toml --set transport.workers=2 --out runs/e2-sweep-w2.json

# E2 in virtual time, the RM's service-time model fitted to the real-time study: docs/e2-sweep-virtual.json
# and the plots (~7 min on 2 shared cores); delta at 18,000 and 24,000 nodes: docs/e2-sweep-virtual-big.json.
e2-virtual: $(STAMP)
	$(BIN)/emulator study scenarios/studies/e2-virtual.toml --out docs/e2-sweep-virtual.json --plots docs
	$(BIN)/emulator study scenarios/studies/e2-virtual.toml --axis nodes=18000,24000 \
		--axis heartbeat.mode=delta --out docs/e2-sweep-virtual-big.json

# E2 in virtual time with a YARN-like RM (service-time model yarn-2020, docs/scalability.md "A
# YARN-like RM"): periodic around the paper's stock-YARN limit, delta around its improved one; the
# two outputs and the table beside the paper (emulator figures --write docs/scalability.md).
e2-yarn2020: $(STAMP)
	$(BIN)/emulator study scenarios/studies/e2-yarn2020.toml --axis heartbeat.mode=periodic \
		--axis nodes=3000,3500,4000,4250,4500,4750,5000,5500 --out docs/e2-sweep-yarn2020-periodic.json
	$(BIN)/emulator study scenarios/studies/e2-yarn2020.toml --axis heartbeat.mode=delta \
		--axis nodes=6000,7000,7500,7750,8000,8250,8500,9000,10000 --out docs/e2-sweep-yarn2020-delta.json

# E2 with the node hosts as tasks on a Dask LocalCluster (one worker process per slice), the RM here.
e2-dask: $(CLUSTER_STAMP)
	$(BIN)/emulator study scenarios/studies/e2.toml --cluster local --out runs/e2-sweep-dask.json

# E2 on a many-core machine: one node-host process per core less the RM's, each mode over its own
# grid around its limit on a 16-core machine (one output per mode: --axis), the study's 60 s warm-up;
# its table says which process saturated first at each mode's limit (~5 min).
# docs/scalability.md, "On a 16-core machine".
MANY_CORE = $(BIN)/emulator study scenarios/studies/e2.toml --set transport.workers=auto
e2-many-core: $(STAMP)
	$(MANY_CORE) --axis heartbeat.mode=periodic --axis nodes=1000,1500,2000,2500,3000 \
		--out runs/e2-many-core-periodic.json
	$(MANY_CORE) --axis heartbeat.mode=delta --axis nodes=4500,6000,7500,9000,10500,12000 \
		--out runs/e2-many-core-delta.json

# E3 (paper 004 Fig. 9): 7,500 nodes, 5% crash at 400 s; ring vs RM liveliness monitor, the study
# scenarios/studies/e3.toml (~4 min): docs/ring-e3.json and the removals plot docs/ring-e3-removals.png
# (.csv). Rack and stalls: emulator study scenarios/studies/e3-rack.toml (e3-stalls.toml) --plots DIR.
e3: $(STAMP)
	$(BIN)/emulator study scenarios/studies/e3.toml --out docs/ring-e3.json --plots docs

# E3 over TCP in real time (speed 1): 7,500 nodes in 2 worker processes, 5% crash, then a worker
# killed with SIGKILL (~17 min). Table: emulator e3-tcp --table runs/e3-tcp/e3-tcp.json
e3-tcp: $(STAMP)
	$(BIN)/emulator e3-tcp --nodes 7500 --kill-worker --out runs/e3-tcp

# E4 (the Borg lecture): a Borg cell of hard-limit, soft-limit, Autopilot and ML jobs, 5 emulated
# days of 5-minute windows, 3 seeds, and two variants that show where the OOMs come from: slack,
# OOM-free jobs and OOMs per task-day beside the lecture's (~5 min on 2 cores).
# Tables: emulator study --table docs/e4.json
e4: $(STAMP)
	$(BIN)/emulator study scenarios/studies/e4.toml --out docs/e4.json

# E5 (the Borg lecture): stochastic bin packing, machines and overflow per admission method, and
# the bin-packing baselines (next/first/best-fit against FFD and a lower bound) on the same tasks
# (~20 s). Tables: emulator study --table docs/e5.json
e5: $(STAMP)
	$(BIN)/emulator study scenarios/studies/e5.toml --out docs/e5.json

# E5 on trace-like demand: 1,000 tasks per seed packed with each admission method, the SLO judged
# per machine on 30,000 5-minute intervals, 3 seeds (~1 min). Tables: emulator study --table docs/e5-cluster.json
e5-cluster: $(STAMP)
	$(BIN)/emulator study scenarios/studies/e5-cluster.toml --out docs/e5-cluster.json

# Work-preserving RM restart: recovery time at 1,000 and 10,000 nodes (~4 min on 2 cores).
recovery: $(STAMP)
	$(BIN)/emulator recovery scenarios/rm-restart.toml --out runs/recovery

# Soak: 2 emulated hours of 1,000 nodes through every fault and one RM restart, invariants on.
soak: $(STAMP)
	$(BIN)/emulator run scenarios/soak.toml --out runs/soak --check-invariants

# Scenario-file fuzzing (docs/security.md "Fuzzing"): 20,000 inputs, exit 1 on any crash (~2 min).
fuzz: $(STAMP)
	$(BIN)/emulator fuzz --examples 20000 --seed 0

clean:
	rm -rf $(VENV) runs

# Trace replay (docs/traces.md): SYNTH and a Google-2011-format slice under drf, fifo and packing,
# 3 seeds each, the study scenarios/studies/traces.toml (~3 min): docs/traces.json.
traces: $(STAMP)
	$(BIN)/emulator study scenarios/studies/traces.toml --out docs/traces.json
