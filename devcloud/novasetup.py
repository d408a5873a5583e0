"""Set-up of the devcloud's Nova part through its APIs (run in .devcloud/nova-venv by novacloud.py).

Idempotent: Keystone projects/users/roles/catalog, waiting for the hypervisors, flavors, Glance
images, the network ``devcloud-net`` (docs/devcloud-nova.md). With ``--knob`` it turns one of the
API-side fault knobs instead (quotas, compute services).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import openstack

sys.path.insert(0, str(Path(__file__).resolve().parent))
import novacloud  # noqa: E402  (stdlib-only module next to this file)

KS = novacloud.KEYSTONE_URL
REGION = "RegionOne"
ENDPOINTS = {
    "compute": ("nova", "http://127.0.0.1:8774/v2.1"),
    "placement": ("placement", "http://127.0.0.1:8778"),
    "image": ("glance", "http://127.0.0.1:9292"),
    "network": ("neutron", "http://127.0.0.1:9696"),
}
FLAVORS = {
    "dlbench.small": (2, 2048, 10, {}),
    "dlbench.medium": (4, 4096, 20, {}),
    "dlbench.gpu": (2, 4096, 10, {"pci_passthrough:alias": "fake-gpu:1"}),
}
IMAGES = {"stock": "stock", "dlbench-node": "dlbench-node"}
PLACEHOLDER = b"\0" * (1 << 20)
SERVICE_USERS = ["nova", "placement", "glance", "neutron"]


def connect(system: bool = False) -> Any:
    auth = {"auth_url": KS, "username": "admin", "password": novacloud.ADMIN_PASSWORD,
            "user_domain_name": "Default"}
    if system:
        auth["system_scope"] = "all"
    else:
        auth.update(project_name="admin", project_domain_name="Default")
    return openstack.connect(auth_type="password", auth=auth, region_name=REGION, interface="public",
                             identity_api_version="3", load_yaml_config=False, load_envvars=False)


def wait(what: str, check: Any, timeout: float = 120, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - services still starting
            last = exc
        time.sleep(interval)
    raise SystemExit(f"devcloud: timed out waiting for {what} (last error: {last})")


def keystone(conn: Any) -> None:
    ident = conn.identity
    projects = {p.name: p for p in ident.projects()}
    for name in ("service", "dlbench"):
        if name not in projects:
            projects[name] = ident.create_project(name=name, domain_id="default", description=f"devcloud {name}")
    roles = {r.name: r for r in ident.roles()}
    for name in ("admin", "member", "reader", "service"):
        if name not in roles:
            roles[name] = ident.create_role(name=name)
    users = {u.name: u for u in ident.users()}

    def user(name: str, password: str) -> Any:
        if name in users:
            return users[name]
        return ident.create_user(name=name, password=password, domain_id="default")

    for name in SERVICE_USERS:
        u = user(name, novacloud.SERVICE_PASSWORD)
        for role in ("admin", "service"):
            ident.assign_project_role_to_user(projects["service"], u, roles[role])
    dl = user("dlbench", novacloud.USER_PASSWORD)
    for role in ("member", "reader"):
        ident.assign_project_role_to_user(projects["dlbench"], dl, roles[role])
    services = {s.type: s for s in ident.services()}
    endpoints = list(ident.endpoints())
    for stype, (name, url) in ENDPOINTS.items():
        svc = services.get(stype) or ident.create_service(name=name, type=stype, description=f"devcloud {name}")
        have = {e.interface for e in endpoints if e.service_id == svc.id}
        for interface in ("public", "internal", "admin"):
            if interface not in have:
                ident.create_endpoint(service_id=svc.id, interface=interface, url=url, region_id=REGION)


def nova_get(conn: Any, path: str) -> Any:
    resp = conn.compute.get(path, microversion="2.79")
    resp.raise_for_status()
    return resp.json()


def compute_services(conn: Any) -> list[dict[str, Any]]:
    return [s for s in nova_get(conn, "/os-services")["services"] if s["binary"] == "nova-compute"]


def hypervisors_ready(conn: Any) -> bool:
    up = {s["host"] for s in compute_services(conn) if s["state"] == "up"}
    hyps = {h["hypervisor_hostname"] for h in nova_get(conn, "/os-hypervisors")["hypervisors"]}
    return set(novacloud.HYPERVISORS) <= up and set(novacloud.HYPERVISORS) <= hyps


def nova(conn: Any) -> None:
    wait("nova-api (as admin)", lambda: nova_get(conn, "/flavors") is not None)
    flavors = {f.name: f for f in conn.compute.flavors(is_public=None)}
    for name, (vcpus, ram, disk, specs) in FLAVORS.items():
        flavor = flavors.get(name) or conn.compute.create_flavor(name=name, vcpus=vcpus, ram=ram, disk=disk,
                                                                  is_public=True)
        if specs:
            conn.compute.create_flavor_extra_specs(flavor, specs)
    wait("3 hypervisors up and mapped (nova-compute logs in .devcloud/logs)", lambda: hypervisors_ready(conn),
         timeout=180)
    # A compute node is listed before the scheduler's periodic discovery maps its host to the cell:
    # in that window a create fails with NoValidHost. Map them now, so `up` returns a usable cloud.
    import subprocess

    subprocess.run([novacloud.venv("nova-manage"), "--config-file", str(novacloud.OS_DIR / "nova" / "nova.conf"),
                    "cell_v2", "discover_hosts"], check=True, capture_output=True, timeout=120)


def glance(conn: Any) -> None:
    have = {i.name for i in conn.image.images()}
    for name, devcloud_image in IMAGES.items():
        if name in have:
            continue
        image = conn.image.create_image(name=name, disk_format="raw", container_format="bare", visibility="public",
                                        properties={"devcloud_image": devcloud_image}, allow_duplicates=True,
                                        data=PLACEHOLDER, validate_checksum=False, use_import=False)
        wait(f"image {name} active", lambda i=image: conn.image.get_image(i.id).status == "active", timeout=60)


def neutron(conn: Any) -> None:
    net = conn.network.find_network("devcloud-net")
    if net is None:
        # A provider network (flat, physnet1: each chassis' br-phy, bridged to this host's dcvmbr)
        # so this host, the gateway 198.18.96.1, reaches the servers without a router.
        net = conn.network.create_network(name="devcloud-net", shared=True, mtu=1500, port_security_enabled=True,
                                          provider_network_type="flat",
                                          provider_physical_network=novacloud.neutroncloud.ovn.PHYSNET)
    if not list(conn.network.subnets(network_id=net.id)):
        conn.network.create_subnet(name="devcloud-subnet", network_id=net.id, ip_version=4,
                                   cidr=novacloud.VM_NET, gateway_ip=novacloud.VM_GATEWAY, is_dhcp_enabled=False,
                                   allocation_pools=[{"start": "198.18.96.10", "end": "198.18.111.250"}])


def dlbench_project(conn: Any) -> str:
    return conn.identity.find_project("dlbench").id


def knob(name: str) -> None:
    conn = connect()
    project = dlbench_project(conn)
    if name in ("quota-exhausted", "quota-ok", "reset"):
        if name == "quota-exhausted":
            conn.compute.put(f"/os-quota-sets/{project}", json={"quota_set": {"instances": 0, "cores": 0}},
                             microversion="2.79").raise_for_status()
        else:
            conn.compute.delete(f"/os-quota-sets/{project}", microversion="2.79").raise_for_status()
    if name in ("hypervisor-full", "hypervisor-ok", "reset"):
        disable = name == "hypervisor-full"
        for svc in compute_services(conn):
            if svc["host"] not in novacloud.HYPERVISORS:
                continue
            body: dict[str, Any] = {"status": "disabled" if disable else "enabled"}
            if disable:
                body["disabled_reason"] = "devcloud fault hypervisor-full"
            conn.compute.put(f"/os-services/{svc['id']}", json=body, microversion="2.79").raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--knob")
    parser.add_argument("--phase", choices=["keystone", "rest"], default="rest")
    args = parser.parse_args()
    if args.knob:
        knob(args.knob)
        return
    started = time.monotonic()
    if args.phase == "keystone":
        wait("Keystone", lambda: connect(system=True).identity.get_token() is not None, timeout=120)
        keystone(connect(system=True))
    else:
        conn = connect()
        neutron(conn)
        glance(conn)
        nova(conn)
    print(f"devcloud: nova set-up ({args.phase}) checked in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
