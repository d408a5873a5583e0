"""SSHExecutor's clocks on a devcloud node, with a controlled launcher (issue 11, item 3).

As tests/container/test_clocks.py for the local executors: a fake workload in the real harness
sleeps a known time and records its exit on CLOCK_MONOTONIC; fetching its document is delayed a
known time. ``launch_to_end_time`` must end at the exit (the exit status reaching the controller),
within 50 ms, and the delay must be in ``teardown_time``. Comparing the node's monotonic reading
with the controller's is only meaningful while the devcloud's nodes run on this machine's kernel
(the same boot id): the test requires it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from dlbench.execution import ssh
from dlbench.workloads.result import Status
from tests.execution.test_ssh_executor import engine_image, workload_access
from tests.support.fleet import job
from tests.support.prereqs import require

SLEEP_S = 1.0
TEARDOWN_S = 0.7
TOLERANCE_S = 0.05


@pytest.mark.quiet  # timing bound of the product: clocks within 50 ms of the truth
def test_ssh_process_launch_to_end_stops_at_the_exit(fleet, run_id, tmp_path, monkeypatch):
    (machine,) = fleet.deploy(1, image=engine_image())
    access = workload_access(machine)
    workdir = f"/tmp/dlbench-clock-{run_id}"
    probe = f"{workdir}/exit.json"
    fake = f"{workdir}/fake-python"
    with machine.host() as host:
        _, node_boot = host.run(["cat", "/proc/sys/kernel/random/boot_id"], 30)
        require(node_boot.strip() == Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
                "the node runs another kernel: its monotonic clock cannot be compared with this one")
        host.check(["mkdir", "-p", workdir], 30)
        host.put_bytes(f"""#!{access["python"]}
import json, os, sys, time
from pathlib import Path
from dlbench.workloads import harness
from dlbench.workloads.result import Benchmark
out = sys.argv[sys.argv.index("--out") + 1]
with harness.workload(Benchmark(suite="fake", name="sleep"), out=out):
    time.sleep({SLEEP_S})
Path({probe!r}).write_text(json.dumps({{"monotonic": time.monotonic()}}))
os._exit(0)
""".encode(), fake, mode=0o755)
    launch: dict[str, float] = {}
    real_from_access, real_fetch = ssh.RemoteHost.from_access, ssh.SSHExecutor._fetch

    def from_access(access: Any, connect_timeout: float = 30.0) -> Any:  # right after the executor's launch reading
        launch["before"] = time.monotonic()
        return real_from_access(access, connect_timeout)

    def slow_fetch(host: Any, remote: str) -> Any:
        time.sleep(TEARDOWN_S)
        return real_fetch(host, remote)

    monkeypatch.setattr(ssh.RemoteHost, "from_access", staticmethod(from_access))
    monkeypatch.setattr(ssh.SSHExecutor, "_fetch", staticmethod(slow_fetch))
    target = machine.target("bare_metal", machine.access(python=fake, pythonpath=access["pythonpath"]))
    doc = ssh.SSHExecutor().execute(job(run_id), target, tmp_path / "r.json", timeout=120)
    assert doc.status is Status.OK, doc.error
    with machine.host() as host:
        exit_at = json.loads(host.read_text(probe) or "{}")["monotonic"]
        host.run(["rm", "-rf", "--", workdir], 30)
    launch_to_end = doc.sample("launch_to_end_time").value
    teardown = doc.sample("teardown_time").value
    print(f"\nssh process: elapsed_time={doc.sample('elapsed_time').value:.3f}, "
          f"launch_to_end_time={launch_to_end:.3f}, teardown_time={teardown:.3f}, "
          f"before the fix={launch_to_end + teardown:.3f}, "
          f"truth launch-to-exit={exit_at - launch['before']:.3f}")
    assert launch_to_end == pytest.approx(exit_at - launch["before"], abs=TOLERANCE_S)
    # Teardown: the delay, then the SFTP fetch and removing the job directory over SSH.
    assert TEARDOWN_S <= teardown < TEARDOWN_S + 2.0
    assert SLEEP_S <= doc.sample("elapsed_time").value <= launch_to_end
