# Micro-benchmark suites: cpu, gpu, deepbench, disk, network (docs/micro-benchmarks.md).
# The tools come from Debian packages (installed by `make prereqs`, which CI runs); HPCG and
# the CUDA programs are our sources, compiled at first use (gcc, nvcc) or prebuilt in the image.
APT_PACKAGES += fio ioping iperf3 hpcc openmpi-bin gcc strace

MICRO_SUITES ?= cpu disk network gpu deepbench
MICRO_PROFILE ?= smoke
MICRO_OUT ?= $(DLBENCH_HOME)/micro
FIDELITY_ROUNDS ?= 3

.PHONY: micro micro-test micro-fidelity micro-gpu-build
micro: venv ## run the micro-benchmark suites on this host (MICRO_SUITES, MICRO_PROFILE), one JSON each
	@mkdir -p $(MICRO_OUT)
	@for s in $(MICRO_SUITES); do \
	  extra=; [ $$s = disk ] && extra="--data-dir $(MICRO_OUT)"; \
	  start=$$(date +%s); \
	  $(PY) -m dlbench.workloads $$s --profile $(MICRO_PROFILE) --out $(MICRO_OUT)/$$s.json $$extra; rc=$$?; \
	  printf "  %-10s exit %s  %4d s  %s\n" $$s $$rc $$(( $$(date +%s) - start )) $(MICRO_OUT)/$$s.json; \
	done

micro-test: venv ## the micro-benchmark tests (real tools, every suite end to end on the smoke profile)
	$(PY) -m pytest -q tests/micro

micro-fidelity: venv ## each wrapped tool directly vs through our suite: ratios (goal 0.97-1.03), smoke timing
	$(PY) bench/micro_fidelity.py --rounds $(FIDELITY_ROUNDS)

micro-gpu-build: venv ## compile the CUDA micro-benchmarks with nvcc (needs the CUDA toolkit, not a GPU)
	$(PY) -c "from dlbench.workloads.gpu.runner import build; print(*build())"
