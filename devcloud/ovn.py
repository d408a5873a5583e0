"""The devcloud's OVN data plane facts and the VIF plugging both the Neutron part and the VM agent use.

One chassis per hypervisor (docs/devcloud-nova.md, "Neutron"): network namespace
``devcloud-hv-<k>`` (the hypervisor's name) with its own ovsdb-server, ovs-vswitchd (userspace
datapath, ``datapath_type=netdev``: this kernel has no openvswitch module) and ovn-controller
(``system-id`` = ``hostname`` = the hypervisor's name, what Neutron's OVN driver binds ports to).
Bridges: ``br-int`` (OVN's, the servers' ports) and ``br-phy`` (provider network ``physnet1``:
a veth ``dchv<k>p`` whose host end ``dchv<k>h`` is on this host's bridge ``dcvmbr``; the
chassis' underlay address for Geneve on its internal port).

Standard library only: imported by devcloud/neutroncloud.py (system Python) and
devcloud/vmagent.py (the nova venv).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

PHYSNET = "physnet1"
VM_NET = "198.18.96.0/20"
"""The devcloud network's subnet (devcloud-net, on physnet1)."""
VM_NET_PREFIXLEN = int(VM_NET.split("/")[1])
VM_GATEWAY = "198.18.96.1"
"""This host's address on ``dcvmbr``: the subnet's gateway and where the host reaches servers from."""
UNDERLAY_BASE = "198.18.96."
"""A chassis' underlay address: 198.18.96.<1+k>/20 on its br-phy (inside the VM network,
before the allocation pool's 198.18.96.10; .1 is this host's dcvmbr)."""


def chassis_dir(state: Path, hypervisor: str) -> Path:
    """Database, sockets and pid files of one chassis: ``.devcloud/ovn/<hypervisor>/``."""
    return state / "ovn" / hypervisor


def central_dir(state: Path) -> Path:
    return state / "ovn" / "central"


def sb_socket(state: Path) -> Path:
    return central_dir(state) / "sb.sock"


def nb_socket(state: Path) -> Path:
    return central_dir(state) / "nb.sock"


def vsctl(state: Path, hypervisor: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``ovs-vsctl`` against one chassis' own database (no daemon wait unless asked)."""
    db = f"unix:{chassis_dir(state, hypervisor) / 'db.sock'}"
    res = subprocess.run(["ovs-vsctl", f"--db={db}", "--timeout=20", *args], capture_output=True, text=True)
    if check and res.returncode != 0:
        raise RuntimeError(f"ovs-vsctl {' '.join(args)} ({hypervisor}): {res.stderr.strip()}")
    return res


def _run(cmd: list[str]) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {res.stderr.strip()}")


def checksum_offload_off(dev: str, netns: str | None = None) -> None:
    """The userspace datapath reads and writes veths through packet sockets and never fills in a
    checksum the kernel left to the NIC: every veth end it touches sends finished checksums."""
    prefix = ["ip", "netns", "exec", netns] if netns else []
    _run([*prefix, "ethtool", "-K", dev, "tx", "off"])


def plug(state: Path, hypervisor: str, dev: str, port_id: str, mac: str, server_id: str) -> None:
    """Move the host end ``dev`` of a server's veth into its hypervisor's namespace and onto
    ``br-int`` with the Neutron port's id, as os-vif does for an OVS VIF: ovn-controller claims
    the port, Neutron marks it ACTIVE, and OVN's logical switch and security groups see its
    traffic from then on."""
    _run(["ip", "link", "set", dev, "netns", hypervisor])
    checksum_offload_off(dev, hypervisor)
    _run(["ip", "-n", hypervisor, "link", "set", dev, "up"])
    vsctl(state, hypervisor, "--may-exist", "add-port", "br-int", dev, "--", "set", "Interface", dev,
          f"external_ids:iface-id={port_id}", f"external_ids:attached-mac={mac}", "external_ids:iface-status=active",
          f"external_ids:vm-uuid={server_id}")


def unplug(state: Path, hypervisors: list[str], dev: str) -> None:
    """Take ``dev`` off whichever chassis holds it and delete it (its peer in the server's
    namespace goes with it); nothing to do when none holds it."""
    for hv in hypervisors:
        if not (chassis_dir(state, hv) / "db.sock").exists():
            continue
        vsctl(state, hv, "--if-exists", "del-port", "br-int", dev, check=False)
        if subprocess.run(["ip", "-n", hv, "link", "show", dev], capture_output=True).returncode == 0:
            subprocess.run(["ip", "-n", hv, "link", "del", dev], capture_output=True)
