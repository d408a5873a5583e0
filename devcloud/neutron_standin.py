"""The devcloud's Neutron API stand-in (docs/devcloud-nova.md): the one OpenStack service not run for real.

A real neutron-server only stores ports; binding them needs its agents (OVS/OVN, DHCP, L3), each
wanting a data plane this host does not have for the devcloud. This WSGI app speaks the Neutron
v2.0 API for what Nova (nova/network/neutron.py: networks, subnets, ports with ``binding:*``,
security groups, extensions, quotas, floating IP lists) and openstacksdk's network proxy
(networks by name, security groups and rules, tags) call, validates Keystone tokens with
keystonemiddleware's ``auth_token``, and keeps its state in one JSON file. Addresses are handed
out from the subnet's allocation pool; a port bound to a host (``binding:host_id``) becomes
``ACTIVE`` with ``binding:vif_type`` ``tap`` (the devcloud's VM agent or libvirt plugs it).
Security group rules are stored, never enforced.

Run by gunicorn from .devcloud/nova-venv: ``neutron_standin:make_app()`` with
``DEVCLOUD_NEUTRON_CONF`` naming a JSON config (state file, Keystone credentials).
"""

from __future__ import annotations

import copy
import ipaddress
import json
import os
import random
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

RESOURCES = {
    "networks": "network", "subnets": "subnet", "ports": "port", "security-groups": "security_group",
    "security-group-rules": "security_group_rule", "floatingips": "floatingip",
}
NOT_FOUND_TYPE = {"networks": "NetworkNotFound", "subnets": "SubnetNotFound", "ports": "PortNotFound",
                  "security-groups": "SecurityGroupNotFound", "security-group-rules": "SecurityGroupRuleNotFound",
                  "floatingips": "FloatingIPNotFound"}
EXTENSIONS = ["binding", "security-group", "port-security", "net-mtu", "external-net", "quotas", "project-id",
              "standard-attr-tag", "standard-attr-description", "standard-attr-timestamp",
              "standard-attr-revisions", "router"]
PAGING = {"fields", "limit", "marker", "sort_key", "sort_dir", "page_reverse", "tags", "tags-any", "not-tags",
          "not-tags-any"}
BOUND_VIF_TYPE = "tap"


class ApiError(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Store:
    """All resources in memory, written through to one JSON file (atomic replace)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.RLock()
        try:
            self.data: dict[str, dict[str, Any]] = json.loads(path.read_text())
        except (OSError, ValueError):
            self.data = {}
        for kind in RESOURCES:
            self.data.setdefault(kind, {})

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        tmp.replace(self.path)


class Context:
    def __init__(self, environ: dict[str, Any]) -> None:
        self.project_id = environ.get("HTTP_X_PROJECT_ID") or ""
        self.roles = {r.strip().lower() for r in (environ.get("HTTP_X_ROLES") or "").split(",") if r.strip()}
        self.is_admin = "admin" in self.roles or "service" in self.roles


def _truthy(value: Any) -> str:
    return str(value).lower()


def matches(obj: dict[str, Any], query: dict[str, list[str]]) -> bool:
    for key, values in query.items():
        if key in PAGING:
            continue
        if key == "fixed_ips":
            wanted = [dict(v.split("=", 1) for v in [val]) for val in values if "=" in val]
            ips = obj.get("fixed_ips") or []
            if not any(all(ip.get(k) == v for k, v in w.items()) for w in wanted for ip in ips):
                return False
            continue
        field = "project_id" if key == "tenant_id" else key
        if field not in obj:
            return False
        have = obj[field]
        if isinstance(have, list):
            if not any(v in [str(h) for h in have] for v in values):
                return False
        elif isinstance(have, bool) or have is None:
            if _truthy(have) not in [v.lower() for v in values]:
                return False
        elif str(have) not in values:
            return False
    tags = set(obj.get("tags") or [])
    for key, test in (("tags", lambda want: want <= tags), ("tags-any", lambda want: bool(want & tags)),
                      ("not-tags", lambda want: not want <= tags), ("not-tags-any", lambda want: not want & tags)):
        for raw in query.get(key, []):
            if not test({t for t in raw.split(",") if t}):
                return False
    return True


class Neutron:
    def __init__(self, state: Path) -> None:
        self.store = Store(state)

    # --- helpers ------------------------------------------------------------------------------

    def visible(self, ctx: Context, kind: str, obj: dict[str, Any]) -> bool:
        if ctx.is_admin or obj.get("project_id") == ctx.project_id:
            return True
        if kind == "networks":
            return bool(obj.get("shared"))
        if kind == "subnets":
            net = self.store.data["networks"].get(obj.get("network_id", ""))
            return bool(net and net.get("shared"))
        return False

    def get(self, ctx: Context, kind: str, rid: str) -> dict[str, Any]:
        obj = self.store.data[kind].get(rid)
        if obj is None or not self.visible(ctx, kind, obj):
            raise ApiError(404, NOT_FOUND_TYPE[kind], f"{RESOURCES[kind]} {rid} could not be found.")
        return obj

    def base(self, ctx: Context, body: dict[str, Any]) -> dict[str, Any]:
        project = body.get("project_id") or body.get("tenant_id") or ctx.project_id
        if project != ctx.project_id and not ctx.is_admin:
            raise ApiError(403, "HTTPForbidden", "Only admins may create resources in another project.")
        return {"id": str(uuid.uuid4()), "project_id": project, "tenant_id": project, "name": body.get("name", ""),
                "description": body.get("description", ""), "tags": [], "created_at": now(), "updated_at": now(),
                "revision_number": 0}

    def default_sg(self, project: str) -> dict[str, Any]:
        """Neutron makes each project's ``default`` group on first use."""
        for sg in self.store.data["security-groups"].values():
            if sg["project_id"] == project and sg["name"] == "default":
                return sg
        ctx = Context({"HTTP_X_PROJECT_ID": project, "HTTP_X_ROLES": "admin"})
        sg = {**self.base(ctx, {"name": "default", "description": "Default security group"}),
              "stateful": True, "shared": False, "security_group_rules": []}
        self.store.data["security-groups"][sg["id"]] = sg
        for direction, ethertype in (("egress", "IPv4"), ("egress", "IPv6"), ("ingress", "IPv4"), ("ingress", "IPv6")):
            self.add_rule(ctx, {"security_group_id": sg["id"], "direction": direction, "ethertype": ethertype,
                                "remote_group_id": sg["id"] if direction == "ingress" else None})
        return sg

    def add_rule(self, ctx: Context, body: dict[str, Any]) -> dict[str, Any]:
        sg = self.get(ctx, "security-groups", body.get("security_group_id", ""))
        if body.get("direction") not in ("ingress", "egress"):
            raise ApiError(400, "InvalidInput", "direction must be ingress or egress")
        rule = {**self.base(ctx, {**body, "project_id": sg["project_id"]}), "security_group_id": sg["id"],
                "direction": body["direction"], "ethertype": body.get("ethertype", "IPv4"),
                "protocol": body.get("protocol"), "port_range_min": body.get("port_range_min"),
                "port_range_max": body.get("port_range_max"), "remote_ip_prefix": body.get("remote_ip_prefix"),
                "remote_group_id": body.get("remote_group_id"), "remote_address_group_id": None,
                "normalized_cidr": body.get("remote_ip_prefix"), "belongs_to_default_sg": sg["name"] == "default"}
        rule.pop("name", None)
        rule.pop("tags", None)
        for other in sg["security_group_rules"]:
            same = all(other.get(k) == rule[k] for k in ("direction", "ethertype", "protocol", "port_range_min",
                                                           "port_range_max", "remote_ip_prefix", "remote_group_id"))
            if same:
                raise ApiError(409, "SecurityGroupRuleExists", f"Security group rule already exists. Rule id is "
                                                               f"{other['id']}.")
        self.store.data["security-group-rules"][rule["id"]] = rule
        sg["security_group_rules"].append(rule)
        return rule

    def allocate_ip(self, subnet: dict[str, Any], wanted: str | None) -> str:
        taken = {ip["ip_address"] for p in self.store.data["ports"].values() for ip in p["fixed_ips"]
                 if ip["subnet_id"] == subnet["id"]}
        taken.add(subnet.get("gateway_ip"))
        if wanted:
            if ipaddress.ip_address(wanted) not in ipaddress.ip_network(subnet["cidr"]):
                raise ApiError(400, "InvalidIpForSubnet", f"IP address {wanted} is not a valid IP for the subnet.")
            if wanted in taken:
                raise ApiError(409, "IpAddressAlreadyAllocated",
                               f"IP address {wanted} already allocated in subnet {subnet['id']}")
            return wanted
        for pool in subnet["allocation_pools"]:
            start, end = ipaddress.ip_address(pool["start"]), ipaddress.ip_address(pool["end"])
            addr = start
            while addr <= end:
                if str(addr) not in taken:
                    return str(addr)
                addr += 1
        raise ApiError(409, "IpAddressGenerationFailure", f"No more IP addresses available on network "
                                                          f"{subnet['network_id']}.")

    # --- create / update per resource ------------------------------------------------------------

    def create(self, ctx: Context, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        data = self.store.data
        if kind == "networks":
            if not ctx.is_admin and body.get("shared"):
                raise ApiError(403, "HTTPForbidden", "Only admins may create shared networks.")
            obj = {**self.base(ctx, body), "status": "ACTIVE", "admin_state_up": body.get("admin_state_up", True),
                   "shared": bool(body.get("shared", False)), "mtu": int(body.get("mtu", 1500)),
                   "port_security_enabled": body.get("port_security_enabled", True), "subnets": [],
                   "router:external": bool(body.get("router:external", False)), "availability_zones": ["nova"],
                   "availability_zone_hints": [], "ipv4_address_scope": None, "ipv6_address_scope": None,
                   "provider:network_type": "flat", "provider:physical_network": "devcloud",
                   "provider:segmentation_id": None, "is_default": False}
        elif kind == "subnets":
            net = self.get(ctx, "networks", body.get("network_id", ""))
            cidr = ipaddress.ip_network(body["cidr"], strict=True)
            hosts = list(cidr.hosts()) if cidr.num_addresses <= 4096 else None
            gateway = body.get("gateway_ip", str(hosts[0]) if hosts else None)
            pools = body.get("allocation_pools") or [{"start": str(hosts[1]), "end": str(hosts[-1])}]
            obj = {**self.base(ctx, body), "network_id": net["id"], "cidr": str(cidr), "ip_version": cidr.version,
                   "gateway_ip": gateway, "allocation_pools": pools,
                   "enable_dhcp": bool(body.get("enable_dhcp", False)),
                   "dns_nameservers": body.get("dns_nameservers", []), "host_routes": body.get("host_routes", []),
                   "ipv6_ra_mode": None, "ipv6_address_mode": None, "subnetpool_id": None, "segment_id": None,
                   "service_types": []}
            net["subnets"].append(obj["id"])
        elif kind == "ports":
            net = self.get(ctx, "networks", body.get("network_id", ""))
            obj = {**self.base(ctx, body), "network_id": net["id"], "admin_state_up": body.get("admin_state_up", True),
                   "mac_address": body.get("mac_address") or "fa:16:3e:" + ":".join(
                       f"{random.randrange(256):02x}" for _ in range(3)),
                   "device_id": body.get("device_id", ""), "device_owner": body.get("device_owner", ""),
                   "status": "DOWN", "fixed_ips": [], "allowed_address_pairs": body.get("allowed_address_pairs", []),
                   "extra_dhcp_opts": [], "port_security_enabled": body.get("port_security_enabled",
                                                                            net["port_security_enabled"]),
                   "binding:host_id": "", "binding:vif_type": "unbound", "binding:vif_details": {},
                   "binding:vnic_type": body.get("binding:vnic_type", "normal"),
                   "binding:profile": body.get("binding:profile") or {}, "resource_request": None,
                   "ip_allocation": "immediate", "propagate_uplink_status": False}
            requested = body.get("fixed_ips") or [{}]
            subnets = [self.store.data["subnets"][s] for s in net["subnets"]]
            for want in requested:
                subnet = next((s for s in subnets if not want.get("subnet_id") or s["id"] == want["subnet_id"]), None)
                if subnet is None:
                    raise ApiError(400, "InvalidInput", f"no subnet {want.get('subnet_id')} on network {net['id']}")
                obj["fixed_ips"].append({"subnet_id": subnet["id"],
                                         "ip_address": self.allocate_ip(subnet, want.get("ip_address"))})
            if "security_groups" in body:
                groups = [self.get(ctx, "security-groups", g)["id"] for g in body["security_groups"] or []]
            elif obj["port_security_enabled"] and not obj["device_owner"].startswith("network:"):
                groups = [self.default_sg(obj["project_id"])["id"]]
            else:
                groups = []
            obj["security_groups"] = groups
            self.bind(obj, body)
        elif kind == "security-groups":
            if body.get("name") == "default" and any(
                    sg["name"] == "default" and sg["project_id"] == (body.get("project_id") or ctx.project_id)
                    for sg in data["security-groups"].values()):
                raise ApiError(409, "SecurityGroupDefaultAlreadyExists", "Default security group already exists.")
            self.default_sg(body.get("project_id") or body.get("tenant_id") or ctx.project_id)
            obj = {**self.base(ctx, body), "stateful": body.get("stateful", True), "shared": False,
                   "security_group_rules": []}
            data[kind][obj["id"]] = obj
            for direction, ethertype in (("egress", "IPv4"), ("egress", "IPv6")):
                self.add_rule(ctx, {"security_group_id": obj["id"], "direction": direction, "ethertype": ethertype})
            return obj
        elif kind == "security-group-rules":
            return self.add_rule(ctx, body)
        else:
            raise ApiError(404, "ExternalGatewayForFloatingIPNotFound",
                           "The devcloud has no external network: floating IPs are not available.")
        data[kind][obj["id"]] = obj
        return obj

    def bind(self, port: dict[str, Any], body: dict[str, Any]) -> None:
        if "binding:host_id" in body:
            port["binding:host_id"] = body["binding:host_id"] or ""
        if "binding:profile" in body:
            port["binding:profile"] = body["binding:profile"] or {}
        if port["binding:host_id"]:
            port["binding:vif_type"] = BOUND_VIF_TYPE
            port["binding:vif_details"] = {"port_filter": False, "connectivity": "l2"}
            port["status"] = "ACTIVE"
        else:
            port["binding:vif_type"], port["binding:vif_details"], port["status"] = "unbound", {}, "DOWN"

    def update(self, ctx: Context, kind: str, rid: str, body: dict[str, Any]) -> dict[str, Any]:
        obj = self.get(ctx, kind, rid)
        if not ctx.is_admin and obj.get("project_id") != ctx.project_id:
            raise ApiError(403, "HTTPForbidden", "Not allowed to update a resource of another project.")
        fixed = {"id", "project_id", "tenant_id", "network_id", "fixed_ips", "security_group_rules", "subnets",
                 "created_at", "revision_number", "binding:vif_type", "binding:vif_details", "status"}
        for key, value in body.items():
            if key in fixed or key.startswith("binding:"):
                continue
            if kind == "ports" and key == "security_groups":
                value = [self.get(ctx, "security-groups", g)["id"] for g in value or []]
            obj[key] = value
        if kind == "ports":
            self.bind(obj, body)
        obj["updated_at"], obj["revision_number"] = now(), obj["revision_number"] + 1
        return obj

    def delete(self, ctx: Context, kind: str, rid: str) -> None:
        obj = self.get(ctx, kind, rid)
        if not ctx.is_admin and obj.get("project_id") != ctx.project_id:
            raise ApiError(403, "HTTPForbidden", "Not allowed to delete a resource of another project.")
        data = self.store.data
        if kind == "networks":
            if any(p["network_id"] == rid for p in data["ports"].values()):
                raise ApiError(409, "NetworkInUse", f"Unable to complete operation on network {rid}. "
                                                    "There are one or more ports still in use on the network.")
            for s in obj["subnets"]:
                data["subnets"].pop(s, None)
        elif kind == "subnets":
            net = data["networks"].get(obj["network_id"])
            if net:
                net["subnets"] = [s for s in net["subnets"] if s != rid]
        elif kind == "security-groups":
            if any(rid in p.get("security_groups", []) for p in data["ports"].values()):
                raise ApiError(409, "SecurityGroupInUse", f"Security Group {rid} in use.")
            for rule in obj["security_group_rules"]:
                data["security-group-rules"].pop(rule["id"], None)
        elif kind == "security-group-rules":
            sg = data["security-groups"].get(obj["security_group_id"])
            if sg:
                sg["security_group_rules"] = [r for r in sg["security_group_rules"] if r["id"] != rid]
        data[kind].pop(rid)

    # --- WSGI ----------------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        try:
            status, body = self.route(environ)
        except ApiError as exc:
            status, body = exc.status, {"NeutronError": {"type": exc.kind, "message": exc.message, "detail": ""}}
        except (ValueError, KeyError, TypeError) as exc:
            status, body = 400, {"NeutronError": {"type": "BadRequest", "message": f"Bad request: {exc}",
                                                  "detail": ""}}
        payload = b"" if body is None else json.dumps(body).encode()
        reason = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 403: "Forbidden",
                  404: "Not Found", 409: "Conflict"}.get(status, "Error")
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(payload))),
                   ("X-Openstack-Request-Id", f"req-{uuid.uuid4()}")]
        start_response(f"{status} {reason}", headers)
        return [payload] if status != 204 else []

    def route(self, environ: dict[str, Any]) -> tuple[int, Any]:
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO", "/").rstrip("/")
        if path.endswith(".json"):
            path = path[:-5]
        parts = [p for p in path.split("/") if p]
        query = {k: v for k, v in parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True).items()}
        if not parts:
            return 200, {"versions": [{"id": "v2.0", "status": "CURRENT", "links": [
                {"rel": "self", "href": "http://127.0.0.1:9696/v2.0/"}]}]}
        if parts[0] != "v2.0":
            raise ApiError(404, "HTTPNotFound", f"no such path {path}")
        parts = parts[1:]
        ctx = Context(environ)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = json.loads(environ["wsgi.input"].read(length) or b"{}") if length else {}
        if not parts:
            return 200, {"resources": [{"name": single, "collection": kind, "links": []}
                                       for kind, single in RESOURCES.items()]}
        if parts[0] == "extensions":
            exts = [{"alias": a, "name": a, "description": f"{a} (devcloud stand-in)", "links": [],
                     "updated": "2013-01-01T00:00:00-00:00"} for a in EXTENSIONS]
            if len(parts) == 2:
                found = [e for e in exts if e["alias"] == parts[1]]
                if not found:
                    raise ApiError(404, "HTTPNotFound", f"Extension with alias {parts[1]} does not exist")
                return 200, {"extension": found[0]}
            return 200, {"extensions": exts}
        if parts[0] == "quotas":
            quota = {"network": -1, "subnet": -1, "port": -1, "security_group": -1, "security_group_rule": -1,
                     "floatingip": 0, "router": 0, "rbac_policy": -1, "subnetpool": -1}
            if len(parts) == 1:
                return 200, {"quotas": []}
            return 200, {"quota": quota}
        if parts[0] in ("routers", "rbac-policies", "qos", "trunks", "address-scopes", "subnetpools",
                        "network-ip-availabilities", "availability_zones"):
            if method == "GET" and len(parts) == 1:
                return 200, {parts[0].replace("-", "_"): []}
            raise ApiError(404, "HTTPNotFound", f"{parts[0]} are not available on the devcloud")
        kind = parts[0]
        if kind not in RESOURCES:
            raise ApiError(404, "HTTPNotFound", f"The resource could not be found: {kind}")
        single = RESOURCES[kind]
        with self.store.lock:
            if len(parts) == 1 and method == "GET":
                if kind in ("ports", "security-groups") and ctx.project_id:
                    self.default_sg(ctx.project_id)
                items = [o for o in self.store.data[kind].values() if self.visible(ctx, kind, o) and matches(o, query)]
                items.sort(key=lambda o: o.get("created_at", ""))
                return 200, {kind.replace("-", "_"): [self.shape(o, query) for o in items]}
            if len(parts) == 1 and method == "POST":
                req = body.get(single)
                if isinstance(req, dict):
                    obj = self.create(ctx, kind, req)
                    self.store.save()
                    return 201, {single: copy.deepcopy(obj)}
                reqs = body.get(kind.replace("-", "_"))
                if isinstance(reqs, list):
                    made = [self.create(ctx, kind, r) for r in reqs]
                    self.store.save()
                    return 201, {kind.replace("-", "_"): copy.deepcopy(made)}
                raise ApiError(400, "BadRequest", f"Resource body required: {{\"{single}\": {{...}}}}")
            rid = parts[1]
            if len(parts) == 2:
                if method == "GET":
                    return 200, {single: self.shape(self.get(ctx, kind, rid), query)}
                if method == "PUT":
                    obj = self.update(ctx, kind, rid, body.get(single) or {})
                    self.store.save()
                    return 200, {single: copy.deepcopy(obj)}
                if method == "DELETE":
                    self.delete(ctx, kind, rid)
                    self.store.save()
                    return 204, None
            if len(parts) in (3, 4) and parts[2] == "tags":
                obj = self.get(ctx, kind, rid)
                if method == "GET" and len(parts) == 3:
                    return 200, {"tags": obj.get("tags", [])}
                if method == "GET":
                    if parts[3] not in obj.get("tags", []):
                        raise ApiError(404, "TagNotFound", f"Tag {parts[3]} could not be found.")
                    return 204, None
                if method == "PUT" and len(parts) == 3:
                    obj["tags"] = sorted({str(t) for t in body.get("tags", [])})
                    self.store.save()
                    return 200, {"tags": obj["tags"]}
                if method == "PUT":
                    obj["tags"] = sorted(set(obj.get("tags", [])) | {parts[3]})
                    self.store.save()
                    return 201, None
                if method == "DELETE" and len(parts) == 3:
                    obj["tags"] = []
                    self.store.save()
                    return 204, None
                if method == "DELETE":
                    if parts[3] not in obj.get("tags", []):
                        raise ApiError(404, "TagNotFound", f"Tag {parts[3]} could not be found.")
                    obj["tags"] = [t for t in obj["tags"] if t != parts[3]]
                    self.store.save()
                    return 204, None
        raise ApiError(404 if method == "GET" else 400, "HTTPNotFound", f"unsupported: {method} {path}")

    @staticmethod
    def shape(obj: dict[str, Any], query: dict[str, list[str]]) -> dict[str, Any]:
        fields = [f for value in query.get("fields", []) for f in value.split(",") if f]
        if not fields:
            return copy.deepcopy(obj)
        return {f: copy.deepcopy(obj[f]) for f in fields if f in obj}


def make_app() -> Any:
    """The app behind keystonemiddleware's auth_token (tokens checked against Keystone)."""
    from keystonemiddleware import auth_token

    conf = json.loads(Path(os.environ["DEVCLOUD_NEUTRON_CONF"]).read_text())
    app = Neutron(Path(conf["state_file"]))
    return auth_token.AuthProtocol(app, {
        "www_authenticate_uri": conf["auth_url"], "auth_url": conf["auth_url"], "auth_type": "password",
        "username": conf["username"], "password": conf["password"], "project_name": "service",
        "user_domain_name": "Default", "project_domain_name": "Default", "delay_auth_decision": "false",
        "service_token_roles_required": "true", "log_name": "neutron-standin"})
