# The local container platform: Docker engine and the workload image (docs/container.md).
APT_PACKAGES += debootstrap
RUN_PREREQS += image
CI_PREREQS += docker-up image

# The default bridge in the benchmarking range (198.18.0.0/15), so host <-> container network
# benchmarks never use a real network's addresses.
DOCKER_BIP ?= 198.18.200.1/24

.PHONY: docker-up base-image wheelhouse image
docker-up: ## start the Docker engine if it is installed but not running
	@if docker info >/dev/null 2>&1; then exit 0; fi; \
	if ! command -v dockerd >/dev/null; then echo "Docker is not installed: container rows will be skipped"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "Docker is not running (start it: sudo systemctl start docker)"; exit 0; fi; \
	(setsid dockerd --bip=$(DOCKER_BIP) >/var/log/dlbench-dockerd.log 2>&1 &); \
	for i in $$(seq 1 60); do docker info >/dev/null 2>&1 && exit 0; sleep 1; done; \
	echo "dockerd did not start: see /var/log/dlbench-dockerd.log"; exit 1

base-image: docker-up ## local Debian base with debootstrap (only where no registry is reachable)
	docker/build-base.sh dlbench-base:bookworm-2

wheelhouse: venv ## wheels of the workload requirements, for offline image builds
	$(PY) -c "from dlbench.execution.image import build_wheelhouse; build_wheelhouse()"

image: venv docker-up ## build the workload image dlbench-workload:latest if missing
	@if docker info >/dev/null 2>&1; then $(PY) -m dlbench.execution.image; \
	else echo "no Docker engine: skipping the workload image (container rows will be reported as skipped)"; fi

TF_VERSION := $(shell sed -n 's/^tensorflow-cpu==//p' requirements-workload.txt)
GPU_BASE_IMAGE ?= python:3.11-slim-bookworm
image-gpu: docker-up ## the GPU workload image dlbench-workload:gpu (TensorFlow with CUDA; needs a registry/index or build/wheelhouse)
	docker build -f docker/Dockerfile --build-arg BASE_IMAGE=$(GPU_BASE_IMAGE) \
	  --build-arg TF_PACKAGE="tensorflow[and-cuda]==$(TF_VERSION)" -t dlbench-workload:gpu .

