# The Airflow image with dlbench (the root Dockerfile, Astro's layout; docs/install.md) and the
# compose stack that runs it (deploy/compose; tests/cluster/test_compose_stack.py starts it in CI).
# Offline here: FROM the official Airflow image when the engine has it, else the local Debian base
# (make base-image), with the Python packages from a wheelhouse of requirements.txt. Its build
# context is assembled in build/airflow-context (docker/build-airflow-image.sh; the root context's
# .dockerignore keeps the wheelhouse out of the workload images' builds), one build at a time.
AIRFLOW_IMAGE ?= dlbench-airflow:latest
STACK_SERVICES_IMAGE ?= dlbench-stack-services:latest
APT_PACKAGES += docker-compose
# Built beside the tests (CI_BACKGROUND in the Makefile): only the cluster session, the suite's
# last, uses them; its test waits for the build's lock (tests/support/prereqs.wait_for_build).
CI_PREREQS += stack-images
OFFICIAL_AIRFLOW := $(shell sed -n 's/^ARG BASE_IMAGE=//p' Dockerfile)
AIRFLOW_WHEELHOUSE := $(ROOT)/build/airflow-wheelhouse
.PHONY: airflow-wheelhouse airflow-image stack-images stack-up stack-down

# A requirement PyPI has only as a source archive (apache-airflow-providers-openstack 1.0.5) is built
# into a wheel here, where its build backend can be fetched: the image's offline pip could not.
# A stamp named for the requirement files' digest: a complete wheelhouse returns at once (pip's
# resolve alone takes 20-30 s). Resolved on the distribution's interpreter, the local base's own
# (Debian's 3.11.2; the venv's may be another build): environment markers such as redis's
# `async-timeout; python_full_version < "3.11.3"` are read for the interpreter pip runs on, whatever
# --python-version says. In a small venv of its own with a current pip: Debian's pip 23.0 spent 14
# minutes of CPU backtracking over requirements.txt with its constraints.
AIRFLOW_PIP_ENV := $(ROOT)/build/airflow-pip
$(AIRFLOW_PIP_ENV)/bin/pip:
	/usr/bin/python3 -m venv $(AIRFLOW_PIP_ENV) && $(AIRFLOW_PIP_ENV)/bin/pip install -q --upgrade pip
airflow-wheelhouse: venv $(AIRFLOW_PIP_ENV)/bin/pip ## wheels of requirements.txt (and what builds the package) for the offline Airflow image
	@stamp=$(AIRFLOW_WHEELHOUSE)/.complete-$$(cat requirements.txt constraints.txt | sha256sum | cut -c1-16); \
	[ -f "$$stamp" ] && exit 0; \
	$(AIRFLOW_PIP_ENV)/bin/pip download -q --find-links $(AIRFLOW_WHEELHOUSE) -d $(AIRFLOW_WHEELHOUSE) -r requirements.txt -c constraints.txt \
	  setuptools wheel && \
	for sdist in $(AIRFLOW_WHEELHOUSE)/*.tar.gz; do [ -e "$$sdist" ] || continue; \
	  $(PIP) wheel -q --no-deps -w $(AIRFLOW_WHEELHOUSE) "$$sdist" && rm "$$sdist" || exit 1; done && \
	rm -f $(AIRFLOW_WHEELHOUSE)/.complete-* && touch "$$stamp"

airflow-image: base-image venv ## the Airflow image with dlbench, $(AIRFLOW_IMAGE) (root Dockerfile; docs/install.md)
	@mkdir -p build; flock build/airflow-image.lock sh -c \
	  '$(MAKE) -s airflow-wheelhouse >/dev/null && PYTHON=$(PY) docker/build-airflow-image.sh $(AIRFLOW_IMAGE) $(OFFICIAL_AIRFLOW) $(LOCAL_BASE)'

# PostgreSQL and Redis where no registry is reachable (docker/stack: Debian's packages, the official
# images' interface); with a registry the compose file takes the official images instead.
stack-images: airflow-image ## the compose stack's images: dlbench-airflow and $(STACK_SERVICES_IMAGE) (deploy/compose)
	@flock build/airflow-image.lock sh -c 'start=$$(date +%s); \
	  $(PY) -m dlbench.execution.docker_build -- -q --build-arg BASE_IMAGE=$(LOCAL_BASE) -t $(STACK_SERVICES_IMAGE) docker/stack >/dev/null && \
	  echo "built $(STACK_SERVICES_IMAGE) in $$(( $$(date +%s) - start )) s"'

STACK := docker-compose -p dlbench -f deploy/compose/docker-compose.yaml --env-file deploy/compose/.env
stack-up: stack-images ## Airflow with dlbench on the compose stack (deploy/compose), secrets generated once into deploy/compose/.env
	@[ -f deploy/compose/.env ] || $(PY) -m tools.stack_env deploy/compose/.env
	$(STACK) up -d
	@. deploy/compose/.env; echo "Airflow: http://127.0.0.1:$${DLBENCH_API_PORT:-8080}  user $$DLBENCH_ADMIN_USER  password $$DLBENCH_ADMIN_PASSWORD"

stack-down: ## stop the compose stack and remove its volumes (the metadata DB, the warehouse and the store)
	$(STACK) down -v
