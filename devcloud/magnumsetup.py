"""Set-up of the devcloud's Magnum part through the APIs (run in .devcloud/magnum-venv).

Idempotent: Keystone user ``magnum`` (admin + service on project ``service``), the
``container-infra`` service and its endpoints (http://127.0.0.1:9511/v1), and the Glance image
``dlbench-k8s`` (``os_distro=devcloud``: the image a cluster template names; Magnum picks the
cluster driver from it) that our driver recognises (docs/magnum.md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import openstack

sys.path.insert(0, str(Path(__file__).resolve().parent))
import magnumcloud  # noqa: E402
import novacloud  # noqa: E402

IMAGE = "dlbench-k8s"
OS_DISTRO = "devcloud"


def connect(system: bool) -> openstack.connection.Connection:
    auth = {"auth_url": novacloud.KEYSTONE_URL, "username": "admin", "password": novacloud.ADMIN_PASSWORD,
            "user_domain_name": "Default"}
    if system:
        auth["system_scope"] = "all"
    else:
        auth.update(project_name="admin", project_domain_name="Default")
    return openstack.connect(auth_type="password", auth=auth, region_name="RegionOne", interface="public",
                             identity_api_version="3", load_yaml_config=False, load_envvars=False)


def keystone(conn: openstack.connection.Connection) -> None:
    ident = conn.identity
    project = ident.find_project("service")
    user = ident.find_user("magnum") or ident.create_user(name="magnum", password=novacloud.SERVICE_PASSWORD,
                                                          domain_id="default")
    for role in ("admin", "service"):
        ident.assign_project_role_to_user(project, user, ident.find_role(role))
    svc = next((s for s in ident.services() if s.type == "container-infra"), None) or ident.create_service(
        name="magnum", type="container-infra", description="devcloud magnum")
    have = {e.interface for e in ident.endpoints() if e.service_id == svc.id}
    for interface in ("public", "internal", "admin"):
        if interface not in have:
            ident.create_endpoint(service_id=svc.id, interface=interface, url=magnumcloud.URL, region_id="RegionOne")


def glance(conn: openstack.connection.Connection) -> None:
    if any(i.name == IMAGE for i in conn.image.images()):
        return
    image = conn.image.create_image(name=IMAGE, disk_format="raw", container_format="bare", visibility="public",
                                    properties={"os_distro": OS_DISTRO, "devcloud_image": "dlbench-node"},
                                    allow_duplicates=True, data=b"\0" * (1 << 20), validate_checksum=False,
                                    use_import=False)
    deadline = time.monotonic() + 60
    while conn.image.get_image(image.id).status != "active":
        if time.monotonic() > deadline:
            raise SystemExit(f"devcloud: image {IMAGE} not active")
        time.sleep(0.5)


def main() -> None:
    started = time.monotonic()
    keystone(connect(system=True))
    glance(connect(system=False))
    print(f"devcloud: magnum set-up checked in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
