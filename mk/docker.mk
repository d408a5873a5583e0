# The local container platform: Docker engine and the workload image (docs/container.md).
APT_PACKAGES += debootstrap zstd python3-venv
RUN_PREREQS += image workload-env
CI_PREREQS += docker-up image workload-env image-vllm workload-env-vllm

# The default bridge in the benchmarking range (198.18.0.0/15), so host <-> container network
# benchmarks never use a real network's addresses.
DOCKER_BIP ?= 198.18.200.1/24

.PHONY: docker-up docker-sweep base-image wheelhouse workload-env workload-env-vllm image image-tensorflow image-vllm
docker-up: ## start the Docker engine if it is installed but not running
	@if docker info >/dev/null 2>&1; then exit 0; fi; \
	if ! command -v dockerd >/dev/null; then echo "Docker is not installed: container rows will be skipped"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "Docker is not running (start it: sudo systemctl start docker)"; exit 0; fi; \
	(setsid dockerd --bip=$(DOCKER_BIP) >/var/log/dlbench-dockerd.log 2>&1 &); \
	for i in $$(seq 1 60); do docker info >/dev/null 2>&1 && exit 0; sleep 1; done; \
	echo "dockerd did not start: see /var/log/dlbench-dockerd.log"; exit 1

# Untagged images our builds left on this engine (replaced images, an older layout's build stages):
# removed, so a machine that runs CI again and again does not lose a few GB each time (stop 53's
# landing: 19 GB of them, and the run ran out of disk). Only ours: include/dlbench/execution/docker_build.py.
# Plain python3: the sweep needs no virtualenv, so CI runs it before building anything.
docker-sweep: docker-up ## remove the untagged images dlbench's builds left behind (ours only)
	@docker info >/dev/null 2>&1 && python3 include/dlbench/execution/docker_build.py --drop-leftovers || true

# The workload images' base (dlbench.execution.image.choose_base takes the first present): the
# official image (the Dockerfile's BASE_IMAGE default) when present or pullable, else the local
# Debian base built with debootstrap. Needs no virtualenv, so .ci/run builds it beside the venv's
# install (from scratch: 148 s of debootstrap that the images waited for after the wheelhouse).
OFFICIAL_BASE := $(shell sed -n 's/^ARG BASE_IMAGE=//p' docker/Dockerfile)
LOCAL_BASE := dlbench-base:bookworm-2
base-image: docker-up ## the images' base: the official one where a registry is reachable, else a local Debian base (debootstrap)
	@docker image inspect $(OFFICIAL_BASE) >/dev/null 2>&1 || docker image inspect $(LOCAL_BASE) >/dev/null 2>&1 \
	  || timeout 120 docker pull -q $(OFFICIAL_BASE) >/dev/null 2>&1 || docker/build-base.sh $(LOCAL_BASE)

wheelhouse: venv ## wheels of every framework's workload requirements, for offline image and node-image builds
	$(PY) -c "from dlbench.execution.image import build_wheelhouse; build_wheelhouse()"

# This host's bare-metal jobs run in it, not in the controller's venv: the same requirement files
# as the images, so `make run` compares platforms, not environments (issue 39; docs/container.md).
workload-env: venv wheelhouse ## the host's workload virtualenv (build/workload-env), offline from the wheelhouse
	$(PY) -m dlbench.execution.workload_env

# The serving suite's (docs/serving.md): vLLM in its own virtualenv (build/workload-env-vllm);
# a serving run on this host builds it when missing (the local provider), CI builds it first.
workload-env-vllm: venv wheelhouse ## the host's serving environment (vLLM's CPU build, build/workload-env-vllm)
	$(PY) -m dlbench.execution.workload_env vllm

# One workload image per framework (docs/container.md): dlbench-workload:latest (TensorFlow, and
# every suite but tf_cnn), dlbench-workload-pytorch:latest, dlbench-workload-jax:latest. CI's
# container tests run all three; `make image IMAGE_FRAMEWORKS=tensorflow` builds one.
# TensorFlow's is its own target, built first: the node image pre-loads it (mk/nodeimage.mk) while
# the other two build.
IMAGE_FRAMEWORKS ?= tensorflow pytorch jax
# $(call build_images,FRAMEWORKS): the recipe of both targets below.
build_images = @if docker info >/dev/null 2>&1; then $(PY) -m dlbench.execution.image $(1); \
	else echo "no Docker engine: skipping the workload images (container rows will be reported as skipped)"; fi
image: venv docker-up $(if $(filter tensorflow,$(IMAGE_FRAMEWORKS)),image-tensorflow) ## build the workload images (one per framework, IMAGE_FRAMEWORKS) that are missing or stale
	$(call build_images,$(IMAGE_FRAMEWORKS))

image-tensorflow: venv docker-up ## build the TensorFlow workload image dlbench-workload:latest when missing or stale
	$(call build_images,tensorflow)

image-vllm: venv docker-up ## build the serving suite's image dlbench-workload-vllm:latest (vLLM's CPU build) when missing or stale
	$(call build_images,vllm)

# The GPU image of one framework (FRAMEWORK=tensorflow|pytorch|jax): the framework's CUDA build
# in place of its CPU pin. Not built in CI (no GPU, and CUDA wheels are GBs).
FRAMEWORK ?= tensorflow
TF_VERSION := $(shell sed -n 's/^tensorflow-cpu==//p' requirements-workload.txt)
TORCH_VERSION := $(shell sed -n 's/^torch==//p' requirements-workload-pytorch.txt)
JAX_VERSION := $(shell sed -n 's/^jax==//p' requirements-workload-jax.txt)
GPU_PACKAGE_tensorflow = tensorflow[and-cuda]==$(TF_VERSION)
GPU_PACKAGE_pytorch = torch==$(TORCH_VERSION)
GPU_PACKAGE_jax = jax[cuda12]==$(JAX_VERSION)
GPU_TAG_tensorflow = dlbench-workload:gpu
GPU_TAG_pytorch = dlbench-workload-pytorch:gpu
GPU_TAG_jax = dlbench-workload-jax:gpu
GPU_BASE_IMAGE ?= python:3.11-slim-bookworm
image-gpu: docker-up ## a GPU workload image (FRAMEWORK=tensorflow|pytorch|jax: dlbench-workload[-FRAMEWORK]:gpu; needs a package index)
	docker build -f docker/Dockerfile --build-arg BASE_IMAGE=$(GPU_BASE_IMAGE) --build-arg FRAMEWORK=$(FRAMEWORK) \
	  --build-arg FRAMEWORK_PACKAGE="$(GPU_PACKAGE_$(FRAMEWORK))" -t $(GPU_TAG_$(FRAMEWORK)) .

