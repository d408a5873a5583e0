# The Airflow image with dlbench in it (issue 42, docs/install.md): Astro's project layout (this
# file at the project's root; requirements.txt and packages.txt beside it; dags/, plugins/,
# include/). The same image runs every Airflow component (api-server, scheduler, dag-processor,
# triggerer, Celery workers): the command picks which.
#
#   docker build -t dlbench-airflow .          FROM the official Airflow 3 image (a registry is needed)
#   make airflow-image                          here, offline: FROM the project's local Debian base
#                                               (docker/build-base.sh), Python packages from a
#                                               wheelhouse (build/airflow-wheelhouse)
#
# What it holds: dlbench installed as a package (its DAGs, the explorer's plugin through Airflow's
# entry point, airflow_settings.yaml), the controller's pinned requirements (requirements.txt:
# Airflow and its providers, openstacksdk, the reports' libraries; not the training frameworks,
# which the benchmarked machines carry), the DAG folder written by `dlbench dags install`, and the
# system packages of packages.txt (the tools a job run on the worker itself needs: the local
# provider's bare-metal platform). Nothing is fetched at run time.
ARG BASE_IMAGE=apache/airflow:3.3.2-python3.11
FROM ${BASE_IMAGE}
# Ours whatever the base: the builds' sweep finds a replaced image by it (execution/docker_build.py).
LABEL dlbench.image=airflow

USER root
ENV LANG=C.UTF-8 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    AIRFLOW_HOME=/opt/airflow \
    PATH=/opt/dlbench/venv/bin:$PATH

# System packages (Astro's packages.txt): installed with apt where missing (the official image);
# the local base has them from debootstrap (an offline build cannot reach apt).
COPY packages.txt /opt/dlbench/packages.txt
RUN set -eux; missing=""; \
    for p in $(grep -v '^#' /opt/dlbench/packages.txt); do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done; \
    if [ -n "$missing" ]; then apt-get update; apt-get install -y --no-install-recommends $missing; \
      rm -rf /var/lib/apt/lists/*; fi; \
    # the official image's user (uid 50000, group 0); the local base (debootstrap's minbase) may lack useradd
    if ! id airflow >/dev/null 2>&1; then echo "airflow:x:50000:0::/home/airflow:/bin/bash" >> /etc/passwd; \
      mkdir -p /home/airflow; chown 50000:0 /home/airflow; fi; \
    mkdir -p /opt/airflow/dags /opt/airflow/logs /opt/airflow/plugins; chown -R airflow:0 /opt/airflow

# One virtualenv whatever the base (the official image's own Airflow, in its user site, is not
# used: the pins below are the ones the tests ran against). Offline (`make airflow-image`), its
# wheels are served to the build (WHEELHOUSE: build/airflow-wheelhouse at a URL on the host's
# loopback, the build's RUN steps on the host's network; include/dlbench/execution/docker_build.py),
# so no wheel becomes a layer and no build stage is left behind; empty, pip uses the index.
COPY requirements.txt constraints.txt /opt/dlbench/src/
ARG WHEELHOUSE=""
RUN set -eux; python3 -m venv /opt/dlbench/venv; \
    if [ -n "$WHEELHOUSE" ]; then index="--no-index --find-links $WHEELHOUSE"; else index=""; fi; \
    pip install $index -r /opt/dlbench/src/requirements.txt -c /opt/dlbench/src/constraints.txt setuptools wheel

# dlbench itself, last (the layer a code change rebuilds); its DAG files in the image's stage.
COPY pyproject.toml /opt/dlbench/src/
COPY include /opt/dlbench/src/include
# Built into a wheel first and the wheel installed with its `airflow` extra (requirements.txt, read into
# the wheel's metadata): what `pip install 'dlbench-*.whl[airflow]'` does in any Airflow. The layer
# above already holds those requirements: --no-index makes pip prove the wheel's own are met by them.
RUN set -eux; pip wheel --no-deps --no-build-isolation -w /opt/dlbench/dist /opt/dlbench/src; \
    wheel=$(ls /opt/dlbench/dist/dlbench-*.whl); pip install --no-index "$wheel[airflow]"; pip check; \
    rm -rf /opt/dlbench/dist /opt/dlbench/src/include /opt/dlbench/src/build

# /opt/dlbench/store: where a deployment mounts the shared store (deploy/compose), owned by the
# image's user so that a new volume there is writable by the workers.
RUN set -eux; dlbench dags install /opt/airflow/dags; mkdir -p /opt/dlbench/store; \
    chown -R airflow:0 /opt/airflow/dags /opt/dlbench/store

USER airflow
WORKDIR /opt/airflow
