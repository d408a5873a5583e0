"""Where a serving job's load generator runs: on another instance of the run when there is one of
the server's platform (both machines claimed), else beside the server; decided from the job and the
run's targets alone (the peer itself is started by the Ironic tier's test, tests/ironic/test_serving_dag.py)."""

from __future__ import annotations

from dlbench.execution.placement import cell_targets, serving_client
from dlbench.execution.targets import LocalProcess, SSHHost, Target
from dlbench.workloads.result import Platform
from tests.support.fleet import job


def node(name: str, address: str, platform: Platform = Platform.BARE_METAL) -> Target:
    return Target(name=name, platform=platform, instance_id=f"id-{name}",
                  access=SSHHost(address=address, key_path="/nonexistent/key"))


def test_a_serving_job_claims_the_other_instance_of_its_platform_and_no_other():
    a, b = node("bm-0", "198.18.3.2"), node("bm-1", "198.18.3.3")
    vm = node("vm-0", "198.18.4.2", Platform.VIRTUAL_MACHINE)
    serving = job("r1", suite="serving", command="serving", framework="vllm")
    assert cell_targets(serving, a, [a, b, vm]) == [a, b]
    assert cell_targets(serving, vm, [a, b, vm]) == [vm]  # one VM: the client beside its server
    training = job("r1")
    assert cell_targets(training, a, [a, b, vm]) == [a]


def test_without_a_second_instance_or_off_the_cloud_the_job_starts_its_own_server():
    a = node("bm-0", "198.18.3.2")
    serving = job("r1", suite="serving", command="serving", framework="vllm")
    with serving_client(serving, a, [a]) as client:
        assert client is None
    here = Target(name="localhost", platform=Platform.BARE_METAL, access=LocalProcess())
    with serving_client(serving, here, [here, Target(name="other", platform=Platform.BARE_METAL,
                                                     instance_id="x", access=LocalProcess())]) as client:
        assert client is None
    b = node("bm-1", "198.18.3.3")
    with serving_client(job("r1"), a, [a, b]) as client:  # not a serving job
        assert client is None
