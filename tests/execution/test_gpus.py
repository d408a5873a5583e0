"""GPU allotment: one rule for every platform on a machine, from what the machine really has.

The rule is a table (``allot``); the facts come from real probes (nvidia-smi, the engine's
runtimes) run here; the local backend turns them into targets. This host has no GPU and its
Docker engine no NVIDIA runtime, so asking for GPUs must give visible skips naming why, never a
container quietly running on the CPU next to a host process on the GPU. The GPU runs themselves
happen on a GPU machine (docs/gpus.md)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from dlbench.errors import ConfigError
from dlbench.execution.container import Resources, resources_of
from dlbench.execution.gpus import Allotment, GpuFacts, allot, local_facts, parse_probe, probe_argv, process_env
from dlbench.execution.targets import LocalDocker, LocalProcess, Target
from dlbench.providers.base import Tags
from dlbench.request import parse_request
from dlbench.workloads.result import Platform

ENGINE = GpuFacts(count=4, engine_passes_gpus=True)
NO_RUNTIME = GpuFacts(count=4, engine_passes_gpus=False)
NONE = GpuFacts()


@pytest.mark.parametrize(("request_", "facts", "expected"), [
    ("auto", NONE, Allotment()),
    ("auto", ENGINE, Allotment(host=None, container="all", count=4)),
    ("all", ENGINE, Allotment(host=None, container="all", count=4)),
    ("2", ENGINE, Allotment(host="2", container="2", count=2)),
    ("4", ENGINE, Allotment(host="4", container="4", count=4)),
    ("none", ENGINE, Allotment(host="0")),
    ("none", NONE, Allotment()),
])
def test_the_allotment_table(request_, facts, expected):
    assert allot(request_, facts, "m1") == expected


def test_a_providers_own_gpu_count_is_a_count_request():
    """Nova's ``gpus`` is an int (PCI-passthrough GPUs per VM): 2 asks for 2, 0 is auto."""
    assert allot(2, ENGINE, "vm") == allot("2", ENGINE, "vm")
    assert allot(0, NONE, "vm") == Allotment() and allot(0, ENGINE, "vm") == allot("auto", ENGINE, "vm")


@pytest.mark.parametrize(("request_", "facts", "needle"), [
    ("all", NONE, "gpus=all asks for GPUs but m1 has none"),
    ("5", ENGINE, "gpus=5 asks for 5 GPU(s) but m1 has 4"),
])
def test_too_few_gpus_skips_every_platform_of_the_machine(request_, facts, needle):
    got = allot(request_, facts, "m1")
    assert got.host_skip == got.container_skip and needle in got.host_skip
    assert got.host is None and got.container is None


def test_an_engine_without_the_nvidia_runtime_skips_the_container_not_the_host():
    got = allot("auto", NO_RUNTIME, "m1")
    assert got.host_skip is None and got.count == 4
    assert "no NVIDIA runtime" in got.container_skip and "gpus: none" in got.container_skip


def test_a_count_limits_host_processes_and_containers_alike():
    assert process_env("2") == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert process_env("0") == {"CUDA_VISIBLE_DEVICES": ""}  # gpus: none hides them from a process
    assert process_env("all") == {} and process_env(None) == {}
    target = Target(name="t", platform=Platform.CONTAINER_ON_BARE_METAL, access=LocalDocker(image="i", gpus="2"))
    assert resources_of(target) == Resources(gpus="2")
    hidden = Target(name="t", platform=Platform.CONTAINER_ON_BARE_METAL, access=LocalDocker(image="i", gpus="0"))
    assert resources_of(hidden).gpus is None  # no device request at all
    with pytest.raises(ValueError):
        LocalProcess(gpus="two")


def test_bad_gpu_request_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="gpus"):
        parse_request({"provider": "local", "local": {"gpus": "eight"}})


def test_the_probe_reads_this_hosts_real_facts():
    """The probe's count equals nvidia-smi's list (0 here: no GPU); the engine's runtimes are read
    (runc alone here: no NVIDIA runtime)."""
    from dlbench.workloads.environment import nvidia_gpus

    proc = subprocess.run(probe_argv("docker"), capture_output=True, text=True, timeout=60, check=True)
    facts = parse_probe(proc.stdout)
    assert f"gpus={len(nvidia_gpus()[0])}" in proc.stdout and facts.count == len(nvidia_gpus()[0])
    if shutil.which("docker") and facts.count == 0:
        assert "runtimes=" in proc.stdout and not facts.engine_passes_gpus
    assert parse_probe('gpus=2\nruntimes={"nvidia":{"path":"nvidia-container-runtime"},"runc":{}}') == \
        GpuFacts(count=2, engine_passes_gpus=True)


def test_the_local_backend_applies_the_rule_to_this_host():
    """Here (no GPU) gpus=all gives both platforms a visible skip; on a GPU host both get them."""
    from dlbench.providers.local import LocalBackend

    facts = local_facts()
    request = parse_request({"provider": "local", "platforms": ["bare_metal", "container_on_bare_metal"],
                             "suites": ["cpu"], "data": ["synthetic"], "local": {"gpus": "all"}})
    targets = LocalBackend(request.providers[0]).acquire(request, Tags(run_id="gpu-test"))
    assert {t.platform for t in targets} == {Platform.BARE_METAL, Platform.CONTAINER_ON_BARE_METAL}
    host = next(t for t in targets if t.platform is Platform.BARE_METAL)
    if facts.count == 0:
        for target in targets:
            assert target.skip_reason and "gpus=all asks for GPUs but this host has none" in target.skip_reason
    else:
        assert host.skip_reason is None and host.labels["gpus"] == str(facts.count)
    auto = parse_request({"provider": "local", "platforms": ["bare_metal"], "suites": ["cpu"], "data": ["synthetic"]})
    (host,) = LocalBackend(auto.providers[0]).acquire(auto, Tags(run_id="gpu-test"))
    assert host.skip_reason is None and host.access.gpus is None and host.labels["gpus"] == str(facts.count)
