# The Airflow image with dlbench (the root Dockerfile, Astro's layout; docs/install.md).
# NOT FINISHED (issue 42): offline, the wheelhouse's resolution for the local base's Python (3.11.2)
# does not complete (pip backtracked for 10 minutes of CPU; see docs/install.md); not in CI yet.
# Offline here: FROM the official Airflow image when the engine has it, else the local Debian base
# (make base-image), with the Python packages from a wheelhouse of requirements.txt. Its build
# context is assembled in build/airflow-context (docker/build-airflow-image.sh; the root context's
# .dockerignore keeps the wheelhouse out of the workload images' builds), one build at a time.
AIRFLOW_IMAGE ?= dlbench-airflow:latest
OFFICIAL_AIRFLOW := $(shell sed -n 's/^ARG BASE_IMAGE=//p' Dockerfile)
AIRFLOW_WHEELHOUSE := $(ROOT)/build/airflow-wheelhouse
.PHONY: airflow-wheelhouse airflow-image

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
	  '$(MAKE) -s airflow-wheelhouse >/dev/null && docker/build-airflow-image.sh $(AIRFLOW_IMAGE) $(OFFICIAL_AIRFLOW) $(LOCAL_BASE)'
