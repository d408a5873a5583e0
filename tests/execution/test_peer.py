"""The network suite between two real nodes: the peer's endpoints run on one node (a process, or
a container with published ports), the network job runs on the other through SSHExecutor and
measures iperf3 and the echo round trip across the link, and the peer is gone afterwards."""

from __future__ import annotations

import pytest

from dlbench.errors import PeerError
from dlbench.execution.image import DEFAULT_TAG
from dlbench.execution.peer import network_peer, serving_peer
from dlbench.execution.ssh import SSHExecutor
from dlbench.workloads.result import Status
from tests.execution.test_ssh_executor import workload_access
from tests.support.fleet import NODE_IMAGE, job
from tests.support.prereqs import require


def listening(machine, port: int) -> str:
    with machine.host() as host:
        _, out = host.run(["sh", "-c", 'ss -Htln "sport = :$1" 2>/dev/null || true', "sh", str(port)], 30)
    return out.strip()


def test_host_peer_serves_iperf3_to_another_node_and_is_gone_after(fleet, run_id, tmp_path, capsys):
    image = "dlbench-node" if NODE_IMAGE.exists() else "stock"
    server, client = fleet.deploy(2, image=image)
    for machine in (server, client):
        with machine.host() as host:
            require(host.run(["sh", "-c", "command -v iperf3"], 30)[0] == 0,
                    f"iperf3 missing on {machine.name} ({image} image)")
    server_target = server.target("bare_metal", server.access(**workload_access(server)))
    client_target = client.target("bare_metal", client.access(**workload_access(client)))
    port = 5301
    with network_peer(server_target, port) as address:
        assert address == server.address
        assert listening(server, port) and listening(server, port + 1)
        doc = SSHExecutor().execute(job(run_id, suite="network", command="network", server=address, port=port),
                                    client_target, tmp_path / "net.json", timeout=180)
    assert doc.status is Status.OK, doc.error
    assert doc.labels.get("network_peer") == server.address
    assert doc.sample("tcp_throughput").value > 0.05  # Gbit/s across the node-to-node path
    with capsys.disabled():
        print(f"\nnode-to-node: {doc.sample('tcp_throughput').value:.3f} Gbit/s")
    assert not listening(server, port) and not listening(server, port + 1), "the peer outlived its block"
    with server.host() as host:
        _, out = host.run(["sh", "-c", 'pgrep -af "net-serve --bind 0.0.0.0 --port $1" || true', "sh",
                           str(port)], 30)
    assert out.strip() == ""


def test_a_peer_that_cannot_serve_fails_clearly_and_leaves_nothing(fleet):
    (machine,) = fleet.deploy(1, image="dlbench-node" if NODE_IMAGE.exists() else "stock")
    target = machine.target("bare_metal", machine.access(python="/nonexistent/python"))
    with pytest.raises(PeerError, match="exited before serving"), network_peer(target, 5311):
        pass
    assert not listening(machine, 5311)
    # The serving suite's server alone, started from an interpreter without vLLM (the node image's
    # training venv: the run's prepare stage had not made vLLM's): the error quotes the server's cause.
    served = machine.target("bare_metal", machine.access(**workload_access(machine)), labels={"run_id": "peer-test"})
    with pytest.raises(PeerError, match="serving-server on .* exited before serving: .*No module named 'vllm'"), \
            serving_peer(served, ["--profile", "smoke"], run_id="peer-test", port=8111, ready_timeout=180):
        pass
    assert not listening(machine, 8111)
    with machine.host() as host:
        _, out = host.run(["sh", "-c", "pgrep -af '[d]lbench.workloads serving-server' || true"], 30)
    assert out.strip() == ""


def test_container_peer_publishes_its_ports_and_is_removed(engine_node, fleet, run_id, tmp_path):
    """The peer in the workload image on the node's own engine, ports published on the node."""
    server, _ = engine_node
    require(server.image == "dlbench-node" and not server.shared_fs,
            "a container peer needs nodes with their own engine and network (dlbench-node image)")
    (client,) = fleet.deploy(1, image="dlbench-node")
    server_target = server.target("container_on_bare_metal", server.docker_access(DEFAULT_TAG),
                                  labels={"run_id": run_id})
    client_target = client.target("bare_metal", client.access(**workload_access(client)))
    with network_peer(server_target, 5321) as address:
        assert address == server.address
        doc = SSHExecutor().execute(job(run_id, suite="network", command="network", server=address, port=5321),
                                    client_target, tmp_path / "net.json", timeout=180)
    assert doc.status is Status.OK, doc.error
    assert doc.sample("tcp_throughput").value > 0.05
    with server.host() as host:
        _, out = host.run(["docker", "ps", "-a", "-q", "--filter", f"label=dlbench.run_id={run_id}"], 60)
    assert out.strip() == ""
    assert not listening(server, 5321)
