"""The devcloud's VM agent: every ACTIVE Nova server on a fake hypervisor is a machine (docs/devcloud-nova.md).

The fake hypervisor (devcloud/devcloud_virt.py) only pretends to run servers. This process plays
its "define the domain, plug the VIF, start the guest" and cloud-init's first boot: every 0.5 s it
reads Nova's cell database (as the node agent reads Ironic's: the keypair's public key and user
data never travel through the public API either) and, for each server that is ``active`` on a
``devcloud-hv-*`` host, boots a machine (devcloud/machine.py, same as an Ironic node's) with

- network: namespace ``devcloud-vm-<slot>`` with ``eth0`` (the Neutron port's MAC and fixed IP,
  default route via 198.18.96.1) whose peer ``dcv<slot>h`` is plugged, as os-vif plugs an OVS
  VIF, on ``br-int`` of the server's hypervisor's chassis with the port's id (devcloud/ovn.py):
  OVN binds the port there and its logical switch and security groups carry the server's
  traffic; both ends shaped 1 Gbit/s;
- image: the Glance image's ``devcloud_image`` property (Nova copies it into the server's system
  metadata), else the Glance image's name when it names a devcloud image, else ``stock``;
- hostname: the server's ``hostname``; keys: the server's keypair; user data kept for inspection.

A server that is deleted or goes ERROR (or leaves ``active`` in any way but ``stopped``/
``shelved``...: then the machine is only switched off) has its machine stopped, its disk wiped and
its namespace removed. Machine indexes 101..250 (``.devcloud/nodes/<i>``) belong to servers.
Runs in .devcloud/nova-venv (psycopg2).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import logging
import shutil
import signal
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import machine  # devcloud/machine.py, next to this file
import ovn  # devcloud/ovn.py, next to this file
import psycopg2

LOG = logging.getLogger("vmagent")
PG = {"host": "127.0.0.1", "port": 54385, "user": "postgres", "connect_timeout": 3}
INDEX_BASE, INDEX_MAX = 100, 250
HOST_PREFIX = "devcloud-hv-"
GATEWAY, PREFIXLEN = ovn.VM_GATEWAY, ovn.VM_NET_PREFIXLEN
NS_PREFIX = "devcloud-vm-"
SHAPE = ["root", "tbf", "rate", "1gbit", "burst", "256kb", "latency", "50ms"]
PAUSED_STATES = {"stopped", "shelved", "shelved_offloaded", "paused", "suspended"}
RETRY_S = 30


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and res.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {res.stderr.strip()}")
    return res


def netns(slot: int) -> str:
    return f"{NS_PREFIX}{slot}"


def net_up(state: Path, slot: int, vif: dict[str, Any], hypervisor: str, server_id: str) -> None:
    """The server's namespace, its port plugged on its hypervisor's chassis (made fresh for every boot)."""
    net_down(state, slot)
    ns, host_dev, ns_dev = netns(slot), f"dcv{slot}h", f"dcv{slot}n"
    ip("netns", "add", ns)
    ip("link", "add", host_dev, "type", "veth", "peer", "name", ns_dev)
    ip("link", "set", ns_dev, "netns", ns)
    ip("-n", ns, "link", "set", ns_dev, "name", "eth0")
    ip("-n", ns, "link", "set", "eth0", "address", vif["mac"])
    ip("-n", ns, "link", "set", "eth0", "mtu", str(vif["mtu"]))
    ovn.checksum_offload_off("eth0", ns)
    ip("-n", ns, "addr", "add", f"{vif['address']}/{PREFIXLEN}", "dev", "eth0")
    ip("-n", ns, "link", "set", "lo", "up")
    ip("-n", ns, "link", "set", "eth0", "up")
    ip("-n", ns, "route", "add", "default", "via", GATEWAY)
    ovn.plug(state, hypervisor, host_dev, vif["port_id"], vif["mac"], server_id)
    for cmd in (["ip", "netns", "exec", hypervisor, "tc", "qdisc", "replace", "dev", host_dev, *SHAPE],
                ["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "eth0", *SHAPE]):
        subprocess.run(cmd, capture_output=True, check=True)


def net_down(state: Path, slot: int) -> None:
    ovn.unplug(state, sorted(d.name for d in (state / "ovn").glob(HOST_PREFIX + "*")), f"dcv{slot}h")
    if ip("link", "show", f"dcv{slot}h", check=False).returncode == 0:
        ip("link", "del", f"dcv{slot}h", check=False)
    if netns(slot) in ip("netns", "list").stdout.split():
        ip("netns", "del", netns(slot), check=False)


class VMAgent:
    def __init__(self, state: Path) -> None:
        self.state = state
        self.conns: dict[str, Any] = {}
        self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="vm")
        self.busy: dict[int, Future[Any]] = {}
        self.failed: dict[str, tuple[dict[str, Any], float]] = {}
        self.slots: dict[str, int] = {}
        """server uuid -> machine index (from .devcloud/nodes/<i>/server at start)."""
        for d in (state / "nodes").iterdir() if (state / "nodes").exists() else []:
            if d.name.isdigit() and INDEX_BASE < int(d.name) <= INDEX_MAX and (d / "server").exists():
                self.slots[(d / "server").read_text().strip()] = int(d.name)

    def query(self, db: str, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        conn = self.conns.get(db)
        if conn is None or conn.closed:
            conn = psycopg2.connect(dbname=db, **PG)
            conn.autocommit = True
            self.conns[db] = conn
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()

    def servers(self) -> list[dict[str, Any]]:
        rows = self.query("nova", "SELECT uuid, display_name, hostname, host, vm_state, task_state, key_name, "
                                  "key_data, user_data, image_ref, power_state FROM instances "
                                  "WHERE deleted = 0 AND host LIKE %s", (HOST_PREFIX + "%",))
        out = []
        for uuid, name, hostname, host, vm_state, task_state, key_name, key_data, user_data, image_ref, power in rows:
            out.append({"uuid": uuid, "name": name or "", "hostname": hostname or "", "host": host,
                        "vm_state": vm_state, "task_state": task_state, "key_name": key_name,
                        "key_data": key_data or "", "user_data": user_data, "image_ref": image_ref,
                        "power_state": power})
        return out

    def details(self, server: dict[str, Any]) -> dict[str, Any]:
        """Port (id, address, MAC, MTU) from the network info cache, image name from system
        metadata and Glance."""
        info = self.query("nova", "SELECT network_info FROM instance_info_caches WHERE instance_uuid = %s "
                                  "AND deleted = 0", (server["uuid"],))
        vif_found: dict[str, Any] = {}
        for vif in json.loads(info[0][0] or "[]") if info else []:
            for subnet in vif.get("network", {}).get("subnets", []):
                for fixed in subnet.get("ips", []):
                    if fixed.get("type", "fixed") == "fixed" and not vif_found:
                        vif_found = {"address": fixed["address"], "mac": vif["address"], "port_id": vif["id"],
                                     "mtu": (vif.get("network", {}).get("meta") or {}).get("mtu") or 1500}
        meta = dict(self.query("nova", "SELECT key, value FROM instance_system_metadata WHERE instance_uuid = %s "
                                       "AND deleted = 0 AND key LIKE 'image_%%'", (server["uuid"],)))
        wanted = meta.get("image_devcloud_image")
        known = machine.images(self.state)
        if not wanted or wanted not in known:
            try:
                names = self.query("glance", "SELECT name FROM images WHERE id = %s", (server["image_ref"],))
            except psycopg2.Error:
                names = []
            wanted = names[0][0] if names and names[0][0] in known else machine.DEFAULT_IMAGE
        return {"address": vif_found.get("address"), "vif": vif_found, "image": wanted}

    def free_index(self) -> int:
        used = set(self.slots.values())
        for i in range(INDEX_BASE + 1, INDEX_MAX + 1):
            if i not in used and not machine.node_dir(self.state, i).exists():
                return i
        raise RuntimeError("no free machine slot for servers (150 in use)")

    def sync(self) -> None:
        servers = self.servers()
        report = []
        wanted = {}
        for s in servers:
            idx = self.slots.get(s["uuid"])
            report.append({"uuid": s["uuid"], "name": s["name"], "vm_state": s["vm_state"], "host": s["host"],
                           "index": idx, "address": None})
            if s["vm_state"] in ("active", *PAUSED_STATES):
                wanted[s["uuid"]] = s
        for uuid, idx in list(self.slots.items()):
            if idx in self.busy and not self.busy[idx].done():
                continue
            if idx in self.busy:
                self.busy.pop(idx).result()
            server = wanted.get(uuid)
            if server is None:  # deleted, ERROR, gone: off, wiped, slot freed
                self.busy[idx] = self.pool.submit(self.remove, uuid, idx)
            elif server["vm_state"] != "active" and machine.running(self.state, idx):
                self.busy[idx] = self.pool.submit(self.switch_off, uuid, idx)
        for uuid, s in wanted.items():
            if s["vm_state"] != "active":
                continue
            idx = self.slots.get(uuid)
            if idx is not None and idx in self.busy:
                continue
            details = self.details(s)
            if not details["address"]:
                continue  # ACTIVE before the info cache has the port: next round
            mark = {"instance": uuid, "image": details["image"], "address": details["address"],
                    "key": hashlib.sha256(s["key_data"].encode()).hexdigest()[:16]}
            if idx is not None:
                current = machine.machine_info(self.state, idx)
                if current and current.get("mark") == mark and machine.running(self.state, idx):
                    for r in report:
                        if r["uuid"] == uuid:
                            r["address"] = details["address"]
                    continue
            failed = self.failed.get(uuid)
            if failed and failed[0] == mark and time.monotonic() - failed[1] < RETRY_S:
                continue
            if idx is None:
                idx = self.free_index()
                nd = machine.node_dir(self.state, idx)
                nd.mkdir(parents=True)
                (nd / "server").write_text(uuid + "\n")
                self.slots[uuid] = idx
            current = machine.machine_info(self.state, idx)
            fresh = not (current and current.get("mark") == mark)
            self.busy[idx] = self.pool.submit(self.boot, s, details, idx, mark, fresh)
        for r in report:
            r["index"] = self.slots.get(r["uuid"])
        tmp = self.state / "run" / "vmagent.servers.json.tmp"
        tmp.write_text(json.dumps(report, indent=1))
        tmp.replace(self.state / "run" / "vmagent.servers.json")

    def boot(self, s: dict[str, Any], details: dict[str, Any], idx: int, mark: dict[str, Any], fresh: bool) -> None:
        slot = idx - INDEX_BASE
        name = s["name"]
        try:
            started = time.monotonic()
            keys = [k.strip() for k in s["key_data"].splitlines() if k.strip()]
            user_data = base64.b64decode(s["user_data"]) if s["user_data"] else None
            hostname = s["hostname"] or f"server-{s['uuid'][:8]}"
            meta = {"uuid": s["uuid"], "name": name, "hostname": hostname,
                    "public_keys": {s["key_name"] or "key": s["key_data"].strip()} if keys else {},
                    "availability_zone": "nova", "devcloud_hypervisor": s["host"], "devcloud_netns": netns(slot)}
            tar = machine.images(self.state)[details["image"]]
            net_up(self.state, slot, details["vif"], s["host"], s["uuid"])
            if (self.state / "run" / "vm-ssh-down").exists():
                machine.ssh_down_flag(self.state, idx).touch()
            booted = machine.boot(self.state, idx, image=details["image"], tar=tar, hostname=hostname,
                                  public_keys=keys, meta_data=meta, user_data=user_data, mark=mark, fresh=fresh,
                                  netns=netns(slot))
            nd = machine.node_dir(self.state, idx)
            (nd / "user_data").write_bytes(user_data or b"")
            (nd / "authorized_keys").write_text("".join(k + "\n" for k in keys))
            (nd / "meta_data.json").write_text(json.dumps(meta, indent=1))
            self.failed.pop(s["uuid"], None)
            LOG.info("server %s (%s) is active on %s: %s image %s at %s as %s in %.2f s (extract %.2f s), %d key(s)",
                     name, s["uuid"], s["host"], "booted" if fresh else "rebooted", details["image"],
                     details["address"], hostname, time.monotonic() - started, booted.get("extract_s", 0), len(keys))
        except Exception as exc:  # noqa: BLE001 - one server's failure must not stop the agent
            self.failed[s["uuid"]] = (mark, time.monotonic())
            LOG.error("server %s (%s) is active but its machine did not boot: %s", name, s["uuid"], exc)

    def switch_off(self, uuid: str, idx: int) -> None:
        try:
            machine.stop(self.state, idx, wipe=False)
            net_down(self.state, idx - INDEX_BASE)
            LOG.info("server %s is not active: machine %d switched off (disk kept)", uuid, idx)
        except Exception as exc:  # noqa: BLE001
            LOG.error("switching off the machine of server %s failed: %s", uuid, exc)

    def remove(self, uuid: str, idx: int) -> None:
        try:
            started = time.monotonic()
            machine.stop(self.state, idx, wipe=True)
            machine.ssh_down_flag(self.state, idx).unlink(missing_ok=True)
            net_down(self.state, idx - INDEX_BASE)
            shutil.rmtree(machine.node_dir(self.state, idx), ignore_errors=True)
            self.slots.pop(uuid, None)
            self.failed.pop(uuid, None)
            LOG.info("server %s is gone or failed: machine %d stopped, disk wiped in %.2f s", uuid, idx,
                     time.monotonic() - started)
        except Exception as exc:  # noqa: BLE001
            LOG.error("removing the machine of server %s failed: %s", uuid, exc)

    def run(self, interval: float) -> None:
        stop: list[int] = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        ready = self.state / "run" / "vmagent.ready"
        failing = False
        while not stop:
            try:
                self.sync()
                if failing:
                    LOG.info("Nova's database reachable again")
                failing = False
                ready.touch()
            except psycopg2.Error as exc:
                if not failing:
                    LOG.warning("cannot read Nova's database (%s); retrying", str(exc).strip())
                failing = True
                for conn in self.conns.values():
                    conn.close()
                self.conns.clear()
            except Exception:  # noqa: BLE001 - keep polling, but say what went wrong
                LOG.exception("sync failed")
            time.sleep(interval)
        ready.unlink(missing_ok=True)
        self.pool.shutdown(wait=False, cancel_futures=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args()
    logging.basicConfig(filename=args.state / "logs" / "vmagent.log", level=logging.INFO,
                        format="%(asctime)s %(levelname)s [%(threadName)s] %(message)s")
    LOG.info("started: polling every %.2f s", args.interval)
    VMAgent(args.state).run(args.interval)
    LOG.info("stopped")


if __name__ == "__main__":
    main()
