"""The devcloud's node agent: boots a machine for every deployed node (docs/devcloud.md).

A real deployed node boots its image and cloud-init installs the config drive's ``public_keys``
for root. The devcloud's nodes are machines (devcloud/machine.py: own root filesystem from the
image, own namespaces, own sshd and, with the dlbench-node image, own dockerd). This process
plays the conductor's "write the image and power on" and the node's first boot: when node
``devcloud-node-<i>`` becomes ``active`` it decodes the config drive Ironic stored for it,
(re)creates the machine's disk from the image named by ``instance_info.image_source`` and boots
it with the drive's keys and hostname; when the node leaves ``active`` (undeploy, failure) it
stops the machine and wipes its disk. A caller that deploys with the wrong key therefore cannot
log in, exactly as on a real cloud.

It reads Ironic's database, not the API: the API masks ``instance_info.configdrive``
(policy ``show_instance_secrets``), and on a real cloud the drive also travels conductor ->
node, never through the public API. It runs in the devcloud venv (psycopg2, pycdlib).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import io
import json
import logging
import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import machine  # devcloud/machine.py, next to this file
import psycopg2
import pycdlib

LOG = logging.getLogger("nodeagent")
NODE_PREFIX = machine.NODE_PREFIX
RETRY_S = 30
"""A machine that failed to boot (missing image...) is retried after this many seconds."""
CONFIG_DRIVE_DIR = "/openstack/latest"


def read_iso_file(iso: pycdlib.PyCdlib, name: str) -> bytes | None:
    """A file from the config drive ISO by its Rock Ridge or Joliet name (genisoimage -r -J)."""
    path = f"{CONFIG_DRIVE_DIR}/{name}"
    for kwargs in ({"rr_path": path}, {"joliet_path": path}):
        out = io.BytesIO()
        try:
            iso.get_file_from_iso_fp(out, **kwargs)
        except Exception:  # noqa: BLE001 - pycdlib raises its own types per naming scheme; try the next
            continue
        return out.getvalue()
    return None


def decode_config_drive(value: Any) -> tuple[dict[str, Any], bytes | None]:
    """(meta_data, user_data) of a config drive as Ironic stores it in instance_info.

    Ironic keeps what the caller sent: a dict {meta_data, user_data, ...} (API >= 1.56) or a
    gzipped, base64-encoded ISO9660 image (what ``openstack.baremetal.configdrive.pack`` makes).
    """
    if isinstance(value, dict):
        user_data = value.get("user_data")
        if isinstance(user_data, (dict, list)):
            user_data = json.dumps(user_data)
        return dict(value.get("meta_data") or {}), (user_data.encode() if isinstance(user_data, str) else user_data)
    if not isinstance(value, str) or not value:
        raise ValueError(f"no config drive (got {type(value).__name__})")
    if "://" in value:
        raise ValueError("config drive given as a URL: the devcloud only reads inline config drives")
    raw = base64.b64decode(value)
    try:
        raw = gzip.decompress(raw)
    except OSError:
        pass  # an uncompressed ISO is accepted too
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(raw))
    try:
        meta = read_iso_file(iso, "meta_data.json")
        user_data = read_iso_file(iso, "user_data")
    finally:
        iso.close()
    if meta is None:
        raise ValueError(f"config drive ISO has no {CONFIG_DRIVE_DIR}/meta_data.json")
    return json.loads(meta), user_data


def public_keys(meta_data: dict[str, Any]) -> list[str]:
    """``public_keys`` is a name -> key dict in OpenStack's format; a list is accepted too."""
    keys = meta_data.get("public_keys") or {}
    values = keys.values() if isinstance(keys, dict) else keys
    return [str(k).strip() for k in values if str(k).strip()]


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.chmod(mode)
    tmp.replace(path)


class NodeAgent:
    """Polls Ironic's node table and keeps every node's machine in step with it."""

    def __init__(self, state: Path, pg_port: int) -> None:
        self.state = state
        self.pg_port = pg_port
        self.conn: Any = None
        self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="node")
        self.busy: dict[int, Future[Any]] = {}
        """node index -> its boot or stop in flight (one at a time per node)."""
        self.failed: dict[int, tuple[dict[str, Any], float]] = {}
        """node index -> (mark, when) of a boot that failed: retried after RETRY_S, not in a loop."""
        self.prewarm: Future[Any] | None = None
        self.prewarm_checked = 0.0

    def rows(self) -> list[tuple[str, str, str | None, str | None]]:
        if self.conn is None or self.conn.closed:
            self.conn = psycopg2.connect(host="127.0.0.1", port=self.pg_port, user="postgres", dbname="ironic",
                                         connect_timeout=3)
            self.conn.autocommit = True
        with self.conn.cursor() as cur:
            cur.execute("SELECT name, provision_state, instance_uuid, instance_info FROM nodes "
                        "WHERE name LIKE %s", (NODE_PREFIX + "%",))
            return cur.fetchall()

    def sync(self) -> None:
        for name, state, instance, info_text in self.rows():
            index = name[len(NODE_PREFIX):]
            if not index.isdigit() or not machine.node_dir(self.state, int(index)).is_dir():
                continue  # not one of this devcloud's nodes (devcloud.py up makes the directory)
            i = int(index)
            if i in self.busy:
                if not self.busy[i].done():
                    continue
                self.busy.pop(i).result()  # exceptions are caught and logged inside the jobs
            if state == "active":
                info = json.loads(info_text or "{}")
                drive = info.get("configdrive")
                mark = {"instance": str(instance), "image_source": info.get("image_source"),
                        "drive": hashlib.sha256(json.dumps(drive, sort_keys=True).encode()).hexdigest()[:16]}
                current = machine.machine_info(self.state, i)
                same = current is not None and current.get("mark") == mark
                if same and machine.running(self.state, i):
                    continue
                failed = self.failed.get(i)
                if failed and failed[0] == mark and time.monotonic() - failed[1] < RETRY_S:
                    continue
                # Not booted for this deploy yet: a fresh disk. Booted but no longer running (the
                # devcloud was restarted, the machine crashed): a reboot, same disk.
                self.busy[i] = self.pool.submit(self.boot, name, i, info, drive, mark, fresh=not same)
            else:
                self.failed.pop(i, None)
                nd = machine.node_dir(self.state, i)
                keys_file = nd / "authorized_keys"
                if keys_file.exists() and keys_file.stat().st_size:
                    write_atomic(keys_file, b"")
                if machine.running(self.state, i) or (nd / "machine.json").exists() or (nd / "disk").exists():
                    self.busy[i] = self.pool.submit(self.shutdown, name, i, state)
        self.maybe_prewarm()

    def boot(self, name: str, i: int, info: dict[str, Any], drive: Any, mark: dict[str, Any], fresh: bool) -> None:
        nd = machine.node_dir(self.state, i)
        try:
            try:
                meta, user_data = decode_config_drive(drive)
            except Exception as exc:  # noqa: BLE001 - a bad drive must not stop the agent; no keys then
                LOG.warning("%s is active but its config drive is unusable (%s): booting with no key", name, exc)
                meta, user_data = {}, None
            keys = public_keys(meta)
            image, tar = machine.resolve_image(self.state, info.get("image_source"))
            hostname = host_name(meta, name)
            started = time.monotonic()
            booted = machine.boot(self.state, i, image=image, tar=tar, hostname=hostname, public_keys=keys,
                                  meta_data=meta, user_data=user_data, mark=mark, fresh=fresh)
            # For inspection on the host (the machine has its own copy in /root/.ssh).
            write_atomic(nd / "meta_data.json", json.dumps(meta, indent=1).encode(), 0o644)
            write_atomic(nd / "user_data", user_data or b"", 0o644)
            write_atomic(nd / "authorized_keys", "".join(k + "\n" for k in keys).encode())
            self.failed.pop(i, None)
            LOG.info("%s is active: %s image %s as %s in %.2f s (extract %.2f s), %d key(s), user_data %d byte(s)",
                     name, "booted" if fresh else "rebooted", image, hostname, time.monotonic() - started,
                     booted.get("extract_s", 0), len(keys), len(user_data or b""))
        except Exception as exc:  # noqa: BLE001 - one node's failure must not stop the agent
            self.failed[i] = (mark, time.monotonic())
            LOG.error("%s is active but its machine did not boot: %s", name, exc)

    def shutdown(self, name: str, i: int, state: str) -> None:
        try:
            started = time.monotonic()
            machine.stop(self.state, i, wipe=True)
            LOG.info("%s is %s: machine stopped, disk wiped in %.2f s", name, state, time.monotonic() - started)
        except Exception as exc:  # noqa: BLE001
            LOG.error("%s is %s but stopping its machine failed: %s", name, state, exc)

    def maybe_prewarm(self) -> None:
        """Extract a newly built image in the background, so its first deploy boots in seconds."""
        if (self.prewarm is not None and not self.prewarm.done()) or time.monotonic() - self.prewarm_checked < 10:
            return
        self.prewarm_checked = time.monotonic()
        for name, tar in machine.images(self.state).items():
            try:
                if tar.exists() and not (machine.lower_for(self.state, name, tar) / ".devcloud-extracted").exists():
                    self.prewarm = self.pool.submit(self.extract, name, tar)
                    return
            except OSError:
                continue

    def extract(self, name: str, tar: Path) -> None:
        try:
            lower, seconds = machine.extract(self.state, name, tar)
            if seconds:
                LOG.info("image %s extracted in %.1f s: %s", name, seconds, lower)
        except Exception as exc:  # noqa: BLE001
            LOG.error("extracting image %s failed: %s", name, exc)

    def run(self, interval: float) -> None:
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        ready = self.state / "run" / "nodeagent.ready"
        failing = False
        while not stop:
            try:
                self.sync()
                if failing:
                    LOG.info("database reachable again")
                failing = False
                ready.touch()
            except psycopg2.Error as exc:
                if not failing:
                    LOG.warning("cannot read Ironic's database (%s); retrying", str(exc).strip())
                failing = True
                if self.conn is not None:
                    self.conn.close()
            time.sleep(interval)
        ready.unlink(missing_ok=True)
        self.pool.shutdown(wait=False, cancel_futures=True)


def host_name(meta: dict[str, Any], node_name: str) -> str:
    """The machine's hostname: the config drive's ``hostname`` (or ``name``), else the node's name."""
    for key in ("hostname", "name"):
        value = str(meta.get(key) or "").strip()
        if value and len(value) <= 63 and all(c.isalnum() or c in "-." for c in value):
            return value
    return node_name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--pg-port", type=int, required=True)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args()
    logging.basicConfig(filename=args.state / "logs" / "nodeagent.log", level=logging.INFO,
                        format="%(asctime)s %(levelname)s [%(threadName)s] %(message)s")
    LOG.info("started: polling every %.2f s", args.interval)
    NodeAgent(args.state, args.pg_port).run(args.interval)
    LOG.info("stopped")


if __name__ == "__main__":
    main()
