"""The local provider's VM platforms on real QEMU guests, through the DAG's own steps.

One guest serves the whole lifecycle (validate -> provision -> run jobs -> release): booting is
~50 s under TCG. The workload is the ``cpu`` micro-benchmark suite at the smoke profile (HPL,
DGEMM, STREAM, PTRANS, RandomAccess, HPCG; ~50 s in an emulated guest, ~100 s in a container on
it, 8 s on this host), not a tf_cnn job: importing TensorFlow alone takes ~3 minutes under TCG.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import paramiko
import pytest

from dlbench.execution.targets import Target
from dlbench.execution.transport import RemoteHost
from dlbench.pipeline import steps
from dlbench.polling import Deadline
from dlbench.providers.base import BootConfig, Demand, Tags
from dlbench.providers.machines import generate_keypair
from dlbench.providers.qemu import LocalVMSettings, QemuDriver, guest_hostname, kvm_usable, sweep_local_vms, vms_dir
from dlbench.workloads.result import ResultDocument, Status
from tests.support.vm import alive, qemu_pids

RUN_ID = "manual__2026-11-23T01:00:00+00:00"
# The disk suite reads the data set, so the guest gets it staged (a run stages it only when one of its
# jobs reads it); the tests run the cpu job only.
CONF = {"platforms": ["virtual_machine", "container_on_vm"], "suites": ["cpu", "disk"], "data": ["synthetic", "real"],
        "profile": "smoke", "repetitions": 1}


@pytest.fixture(scope="module")
def guest(vm_image):
    """The run's targets on one booted guest (``container_on_vm`` shares it); released at the end
    by the test that checks the release, or here when an earlier test failed."""
    before = qemu_pids()
    request = steps.validate(CONF)
    tags = steps.tags_for(RUN_ID, "dlbench_benchmark")
    started = time.monotonic()
    targets = steps.provision(request, tags)
    state = {"request": request, "tags": tags, "targets": targets, "before": before, "released": False,
             "provision_s": time.monotonic() - started}
    yield state
    if not state["released"]:
        steps.release(request, tags, targets)


def by_platform(state: dict, platform: str) -> Target:
    return next(Target.from_xcom(t) for t in state["targets"] if t["platform"] == platform)


def test_provisioned_one_emulated_guest_for_both_platforms(guest, vm_image):
    vm, cvm = by_platform(guest, "virtual_machine"), by_platform(guest, "container_on_vm")
    assert vm.skip_reason is None and cvm.skip_reason is None, (vm.skip_reason, cvm.skip_reason)
    assert vm.instance_id == cvm.instance_id and vm.access.kind == "ssh" and cvm.access.kind == "ssh_docker"
    assert vm.access.address == "127.0.0.1" and vm.access.port != 22
    kvm, why = kvm_usable(vm_image.kernel)
    assert vm.labels["accel"] == ("kvm" if kvm else "tcg"), why
    assert vm.labels["emulated"] == ("false" if kvm else "true")
    assert vm.labels["provider"] == "local" and vm.labels["node_image"] == "yes"
    # Boot, SSH, prepare and staging are timed like any machine's.
    assert {"create", "boot", "reachable_over_ssh", "prepare", "stage_data"} <= set(vm.timings), vm.timings
    phases = json.dumps({k: round(v, 1) for k, v in vm.timings.items()})
    print(f"\nguest ready in {guest['provision_s']:.1f} s: {phases}")


def test_the_guest_is_its_own_machine_reached_only_with_the_run_key(guest, vm_image, tmp_path):
    from dlbench.providers.run_secrets import materialized

    vm = by_platform(guest, "virtual_machine")
    assert vm.access.key_path.startswith("dlbench-secret:")  # a reference, never a file kept on disk
    with materialized([vm.to_xcom()]) as (resolved,):  # the run key as a private file, as a job task gets it
        access = Target.from_xcom(resolved).access
        with RemoteHost.from_access(access) as host:  # type: ignore[arg-type]
            out = host.check(["sh", "-c", "hostname; uname -r; cat /proc/sys/kernel/random/boot_id; "
                              "ls /etc/ssh/ssh_host_*_key.pub | wc -l"], 60).split()
    assert out[0] == guest_hostname(vm.name)  # from the seed's meta-data, made a valid host name
    assert out[1] == vm_image.manifest["kernel"]
    assert out[2] != Path("/proc/sys/kernel/random/boot_id").read_text().strip()  # another kernel, not this host's
    assert int(out[3]) >= 1  # host keys made on the guest's first boot, none baked into the image
    other, _ = generate_keypair(tmp_path / "other")
    with pytest.raises(paramiko.AuthenticationException):
        RemoteHost(vm.access.address, port=vm.access.port, key_path=str(other)).connect()


@pytest.mark.parametrize("platform", ["virtual_machine", "container_on_vm"])
def test_the_cpu_suite_runs_in_the_guest_labelled_emulated(guest, platform):
    jobs = [j for j in steps.plan(guest["request"], RUN_ID) if j["platform"] == platform and j["suite"] == "cpu"]
    assert len(jobs) == 1
    started = time.monotonic()
    summary = steps.run_job(jobs[0], guest["targets"], timeout=600)
    doc = ResultDocument.read(summary["archive"])
    assert doc.status is Status.OK, doc.error
    assert doc.environment.platform.value == platform
    assert doc.sample("hpl").value > 0 and doc.sample("stream_triad").value > 0
    target = by_platform(guest, platform)
    assert doc.labels["emulated"] == target.labels["emulated"] and doc.labels["accel"] == target.labels["accel"]
    assert doc.labels["provider"] == "local"
    print(f"\n{platform}: cpu suite in {time.monotonic() - started:.1f} s, HPL {doc.sample('hpl').value:.3g} "
          f"Gflop/s, STREAM triad {doc.sample('stream_triad').value:.3g} GB/s")


def test_release_leaves_no_guest_process_or_disk(guest):
    names = {json.loads((vms_dir() / t["name"] / "state.json").read_text())["name"] for t in guest["targets"]}
    assert names and all((vms_dir() / name / "disk.qcow2").exists() for name in names)
    steps.release(guest["request"], guest["tags"], guest["targets"])
    guest["released"] = True
    assert not any((vms_dir() / name).exists() for name in names)  # overlay, seed, state: gone
    assert qemu_pids() <= guest["before"]
    assert QemuDriver(LocalVMSettings()).find(steps.safe_run_id(RUN_ID)) == {}
    archived = steps.archive_path(steps.safe_run_id(RUN_ID), "x").parent.glob("*.json")
    provisioning = [ResultDocument.read(p) for p in archived]
    phases = [d for d in provisioning if d.benchmark.suite == "provisioning"]
    assert phases and {s.metric for s in phases[0].samples} >= {"create_time", "boot_time", "delete_time"}


def test_a_killed_runs_guests_are_released_by_the_janitor_once_the_lease_lapses(vm_image, tmp_path):
    """Guests outlive a SIGKILLed run (QEMU is daemonized); their lease in the state file is what
    the janitor reads. A live run's guest (lease valid) is kept. No need to wait for a boot."""
    driver = QemuDriver(LocalVMSettings())
    _, public = generate_keypair(tmp_path / "key")
    now = datetime.now(UTC)
    dead = driver.create(Demand("vm", "virtual_machine", 1), Tags(run_id="killed", lease_until=now + timedelta(
        seconds=1)), BootConfig(public_key=public), Deadline(60, "create"))
    alive_guest = driver.create(Demand("vm", "virtual_machine", 1), Tags(run_id="alive", lease_until=now), BootConfig(
        public_key=public), Deadline(60, "create"))
    try:
        driver.renew(alive_guest, now + timedelta(minutes=10))  # the live run's lease keeper
        assert json.loads((vms_dir() / alive_guest[0].name / "state.json").read_text())["tags"][
            "dlbench_lease_until"].startswith(str((now + timedelta(minutes=10)).year))
        pid = int(dead[0].details["pid"])  # type: ignore[arg-type]
        time.sleep(1.5)
        actions, kept = sweep_local_vms(lambda _tags: True)
        assert [(a.name, a.released) for a in actions] == [(dead[0].name, True)]
        assert "lease lapsed" in actions[0].reason
        assert [k["run_id"] for k in kept] == ["alive"]
        assert not alive(pid) and not (vms_dir() / dead[0].name).exists()
        assert alive(int(alive_guest[0].details["pid"]))  # type: ignore[arg-type]
    finally:
        driver.delete(dead + alive_guest, Deadline(60, "cleanup"))
    assert driver.find() == {}


def test_a_guest_that_cannot_start_is_a_skip_not_a_crash(tmp_path):
    """No image (or KVM forced where it does not work): the VM targets carry the reason, the run goes on."""
    request = steps.validate({**CONF, "data": ["synthetic"], "local": {"vm": {"image_dir": str(tmp_path)}}})
    targets = steps.provision(request, steps.tags_for("noimage"))
    assert [t["platform"] for t in targets] == ["virtual_machine", "container_on_vm"]
    assert all("make vm-image" in t["skip_reason"] for t in targets), targets
    jobs = steps.plan(request, "noimage")
    with pytest.raises(steps.JobSkipped, match="the local guest did not start"):
        steps.run_job(jobs[0], targets)
    steps.release(request, steps.tags_for("noimage"), targets)
    if not kvm_usable()[0] and os.path.exists("/dev/kvm"):
        forced = steps.validate({**CONF, "data": ["synthetic"], "local": {"vm": {"accel": "kvm"}}})
        skipped = steps.provision(forced, steps.tags_for("forcedkvm"))
        assert all("KVM is not usable" in t["skip_reason"] for t in skipped), skipped
    assert QemuDriver(LocalVMSettings()).find() == {}
