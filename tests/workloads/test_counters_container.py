"""In a container with known limits, the cgroup counters are the container's own (issue 11, item 4).

The workload image runs the working tree's ``dlbench.workloads`` (bind-mounted over the image's
copy: the image is only the runtime, so a stale image cannot hide a change) under
``--cpus 0.5 --memory 256m``. A workload in the real harness, with the real counter hooks, burns
CPU for a while; its document must say the counters come from the container's cgroup, show the
container's limits, and count CPU time that matches the process's own getrusage (the only process
in the container) and respects the quota, which the machine's counters would not.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlbench.execution.container import labels_for
from dlbench.workloads.result import ResultDocument, Status

ROOT = Path(__file__).resolve().parents[2]
BURN_S = 2.0

WORKLOAD = f"""\
import time
from dlbench.workloads import counters  # registers the cgroup hooks, as the CLI does
from dlbench.workloads import harness
from dlbench.workloads.result import Benchmark
with harness.workload(Benchmark(suite="fake", name="burn"), out="/results/result.json"):
    end = time.monotonic() + {BURN_S}
    while time.monotonic() < end:
        pass
"""


@pytest.mark.quiet  # timing bound of the product: a 0.5-CPU quota must get its CPU time
def test_counters_come_from_the_containers_cgroup(docker_client, tmp_path):
    from dlbench.execution.image import DEFAULT_TAG

    try:
        docker_client.images.get(DEFAULT_TAG)
    except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound
        pytest.skip(f"{DEFAULT_TAG} is not built (make image)")
    results = tmp_path / "results"
    results.mkdir()
    results.chmod(0o777)
    container = docker_client.containers.run(
        DEFAULT_TAG, ["python", "-c", WORKLOAD], detach=True, nano_cpus=500_000_000, mem_limit="256m",
        network_mode="none", user=f"{os.getuid()}:{os.getgid()}", environment={"HOME": "/tmp"},
        volumes=[f"{results}:/results:rw", f"{ROOT / 'include' / 'dlbench'}:/opt/dlbench/include/dlbench:ro"],
        labels=labels_for("cgroup-test"))  # with an expiry: a janitor running meanwhile leaves it alone
    try:
        status = container.wait(timeout=120)
        logs = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    assert status["StatusCode"] == 0, logs
    doc = ResultDocument.read(results / "result.json")
    assert doc.status is Status.OK, doc.error

    # Whose counters: the container's own cgroup (its id in the path, or the root of its private
    # cgroup namespace), never the machine's.
    whose = doc.labels["cgroup"]
    assert "whole machine" not in whose and "not visible" not in whose, whose
    assert container.id in whose or whose.startswith("/ (cgroup namespace root"), whose
    assert doc.labels["cgroup_source"].startswith(f"v{doc.environment.container.cgroup_version}: ")

    # Its limits are readable there.
    assert doc.environment.container.cpu_limit_cores == pytest.approx(0.5)
    assert doc.environment.container.memory_limit_bytes == 256 << 20

    # CPU: the cgroup's time is the process's own (it is alone in the container), within the quota
    # of 0.5 core, and it was throttled. The machine's root would count every process on it.
    cgroup_cpu = doc.sample("cgroup_cpu_time").value
    own_cpu = doc.sample("cpu_time_user").value + doc.sample("cpu_time_system").value
    assert cgroup_cpu == pytest.approx(own_cpu, abs=0.1), (cgroup_cpu, own_cpu)
    assert 0.5 * BURN_S * 0.7 <= cgroup_cpu <= 0.5 * BURN_S * 1.2 + 0.1, cgroup_cpu
    assert doc.sample("cgroup_cpu_throttled_periods").value > 0
    print(f"cgroup={whose}; cgroup_cpu_time={cgroup_cpu:.3f} s, rusage cpu={own_cpu:.3f} s, "
          f"throttled periods={doc.sample('cgroup_cpu_throttled_periods').value:.0f}")
