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
APT_PACKAGES := docker.io postgresql debootstrap openssh-server iproute2

-include mk/*.mk

.PHONY: help venv lint test run clean
help:
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-22s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.txt constraints.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt -c constraints.txt
	$(PIP) install -q --no-deps -e .
	$(PIP) check
	touch $@

venv: $(VENV)/.installed ## create the virtualenv with the pinned requirements

lint: venv ## ruff
	$(VENV)/bin/ruff check .

ci-prereqs: $(CI_PREREQS) ## install and start system prerequisites (Docker, PostgreSQL, devcloud...)

clean: ## remove local state (venv kept)
	rm -rf $(AIRFLOW_HOME) $(DLBENCH_HOME) build
