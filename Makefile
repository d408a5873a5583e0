# dlbench: two commands do everything (see README.md):
#   make run    set up and run the embedded benchmark end to end, then print the report
#   make test   run the whole test suite
# Area-specific targets live in mk/*.mk (docker image, devcloud, micro-benchmarks...).

SHELL := /bin/bash
.DEFAULT_GOAL := help
ROOT := $(abspath .)
VENV ?= $(ROOT)/.venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export AIRFLOW_HOME ?= $(ROOT)/.airflow
export DLBENCH_HOME ?= $(ROOT)/data
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__DAGS_FOLDER := $(ROOT)/dags
export AIRFLOW__CORE__PLUGINS_FOLDER := $(ROOT)/plugins
export TF_CPP_MIN_LOG_LEVEL := 2
# System prerequisites that .ci/run installs; fragments append to these.
CI_PREREQS :=
# What `make run` needs beyond the venv (fragments append: Docker engine, workload image).
RUN_PREREQS :=
APT_PACKAGES := docker.io postgresql debootstrap openssh-server iproute2

-include mk/*.mk

# CI_TIMES=FILE (set by .ci/run in the environment): every recipe line runs through .ci/timed-shell,
# which appends its target and times to FILE, so .ci/run prints each prerequisite's time.
ifdef CI_TIMES
SHELL := $(ROOT)/.ci/timed-shell
.SHELLFLAGS = $@ -c
endif

.PHONY: help venv lint check test run run-prereqs clean prereqs airflow-init airflow-settings airflow-ui report ci-prereqs
help:
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-22s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt -r requirements-dev.txt -c constraints.txt
	$(PIP) install -q --no-deps -e .
	$(PIP) check
	touch $@

venv: $(VENV)/.installed ## create the virtualenv with the pinned requirements

lint: venv ## ruff
	$(VENV)/bin/ruff check .

check: venv ## ruff, the architecture contract (import-linter) and the type checker (mypy): docs/architecture.md
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

ci-prereqs: $(CI_PREREQS) ## install and start system prerequisites (Docker, PostgreSQL, devcloud...)

# What the tests need from their first minute; .ci/run builds the rest (CI_BACKGROUND, in this
# order: the VM image, which only tests/vm use, late in the local stream; the compose stack's images,
# which only the cluster session uses, last) beside them, each under build/<target>.lock, which its
# tests wait for (tests/support/prereqs.wait_for_build).
# The node image first: its chain (venv -> wheelhouse -> root filesystem -> image) is the longest,
# and make -j hands a free slot to the goals in the order they are listed (stop 37's run W: its root
# filesystem waited 35 s for a slot behind the devcloud's venvs; more slots, -j6, slowed every build).
# CI_LAST, listed last for the same reason: the serving suite's environment and image (run II: listed
# earlier, they took 453 s of slots while the node image waited). Beside the
# tests they cost more (run JJ: the serving builds and a node-image rebuild there, 894 s of disk and
# CPU, and the test phase grew to 3,923 s from II's 2,614 s), so they stay prerequisites.
CI_BACKGROUND := vm-image stack-images
CI_LAST := workload-env-vllm image-vllm
.PHONY: ci-prereqs-first ci-background ci-background-targets
ci-prereqs-first: node-image $(filter-out node-image $(CI_BACKGROUND) $(CI_LAST),$(CI_PREREQS)) $(CI_LAST)
ci-background: $(CI_BACKGROUND)
ci-background-targets: ## what .ci/run builds beside the tests, in order, each under build/<target>.lock
	@echo $(CI_BACKGROUND)

clean: ## remove local state (venv kept)
	rm -rf $(AIRFLOW_HOME) $(DLBENCH_HOME) build

# $(call apt_install,PACKAGES,MESSAGE,IF_MISSING): install those of PACKAGES not installed yet, in
# one apt transaction (as root on Debian); otherwise print "MESSAGE: <the missing ones>" and run
# IF_MISSING (`exit 1` where the target cannot do without them, `true` where rows are skipped).
# (A package removed but not purged is missing: `dpkg -s` alone would call it present.)
apt_install = missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q ' installed$$' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing) >/dev/null; \
	  else echo "$(2):" $$missing; $(3); fi; \
	fi

prereqs: ## install system packages when root (Debian), otherwise say what is missing
	@$(call apt_install,$(APT_PACKAGES),missing system packages (install them, or container rows will be skipped),true)

$(AIRFLOW_HOME)/.initialised: $(VENV)/.installed include/dlbench/airflow_settings.yaml
	mkdir -p $(AIRFLOW_HOME)
	$(VENV)/bin/airflow db migrate >$(AIRFLOW_HOME)/db-migrate.log 2>&1 || (cat $(AIRFLOW_HOME)/db-migrate.log; exit 1)
	$(PY) -m dlbench.airflow_settings --overwrite
	touch $@

airflow-init: $(AIRFLOW_HOME)/.initialised ## migrate Airflow's metadata DB and load airflow_settings.yaml

airflow-settings: venv ## (re)load airflow_settings.yaml into Airflow (pools, variables, connections), its values over Airflow's
	$(PY) -m dlbench.airflow_settings --overwrite

airflow-ui: airflow-init ## Airflow UI on http://localhost:8080 (airflow standalone with this project)
	PATH=$(VENV)/bin:$$PATH $(VENV)/bin/airflow standalone

# The embedded default: this host as bare metal + a local Docker container, smoke profile,
# SQLite warehouse, report at the end. RUN_CONF overrides the trigger form (JSON).
# 4 repetitions: a verdict needs >= 3 per side, and 4 is the least that balances the platforms'
# rotated order (request.platform_order) for 2 and for 4 platforms; measured here, 3 took 5.4 min of
# DAG time on a busy 2-core host (1.8 min each); a fresh clone's `make run` with 4 took 8.0 min.
RUN_CONF ?= {"profile": "smoke", "repetitions": 4}
run-prereqs: $(RUN_PREREQS)

run: venv prereqs run-prereqs airflow-init ## run the embedded benchmark end to end and print the report
	$(PY) -m dlbench.pipeline.embedded --conf '$(RUN_CONF)'; status=$$?; \
	$(VENV)/bin/dlbench report; exit $$status

report: venv ## regenerate the latest run's report from the warehouse
	$(VENV)/bin/dlbench report

# The whole suite as concurrent pytest streams (tests/streams.py): the devcloud's tests in one
# ordered stream, every other test beside it; once the first of the two ends, the multi-worker
# cluster tier and the Kubernetes tier (on the devcloud's second node pool); after them all, the
# tests that need the machine alone (@pytest.mark.alone, @pytest.mark.quiet). Ends with one
# line per tier, the missing prerequisites (and what installs them) and the whole run's counts.
# TEST_ARGS narrows it (pytest arguments, e.g. TEST_ARGS=tests/reports); the cluster tier runs
# only for the whole suite.
TEST_ARGS ?=
TEST_LOGS ?= $(ROOT)/build/test-logs
test: venv ## run the whole test suite (DLBENCH_REQUIRE_ALL=1 turns prerequisite skips into failures)
	$(PY) -m tests.streams $(if $(TEST_ARGS),,--cluster) --logs $(TEST_LOGS) -- $(TEST_ARGS)
