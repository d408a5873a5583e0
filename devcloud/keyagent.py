"""The devcloud's key agent: makes the config drive's SSH key the one that opens a test host.

A real deployed node boots its image and cloud-init copies ``public_keys`` from the config
drive into root's authorized_keys. The devcloud's hosts are namespaces that never boot, so this
process plays cloud-init for all of them: when node ``devcloud-node-<i>`` becomes ``active`` it
decodes the config drive Ironic stored for it and writes the keys to
``.devcloud/nodes/<i>/authorized_keys`` (plus ``user_data`` and ``meta_data.json`` for
inspection); when the node leaves ``active`` it empties the file. A caller that deploys with the
wrong key therefore cannot log in, exactly as on a real cloud.

It reads Ironic's database, not the API: the API masks ``instance_info.configdrive``
(policy ``show_instance_secrets``), and on a real cloud the drive also travels conductor ->
node, never through the public API. It runs in the devcloud venv (psycopg2, pycdlib).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import io
import json
import logging
import signal
import time
from pathlib import Path
from typing import Any

import psycopg2
import pycdlib

LOG = logging.getLogger("keyagent")
NODE_PREFIX = "devcloud-node-"
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


class KeyAgent:
    """Polls Ironic's node table and keeps every test host's authorized_keys in step with it."""

    def __init__(self, state: Path, pg_port: int) -> None:
        self.state = state
        self.pg_port = pg_port
        self.conn: Any = None
        self.installed: dict[str, tuple[str, str]] = {}
        """node name -> (instance uuid, config drive fingerprint) whose keys are installed."""

    def rows(self) -> list[tuple[str, str, str | None, str | None]]:
        if self.conn is None or self.conn.closed:
            self.conn = psycopg2.connect(host="127.0.0.1", port=self.pg_port, user="postgres", dbname="ironic",
                                         connect_timeout=3)
            self.conn.autocommit = True
        with self.conn.cursor() as cur:
            cur.execute("SELECT name, provision_state, instance_uuid, instance_info FROM nodes "
                        "WHERE name LIKE %s", (NODE_PREFIX + "%",))
            return cur.fetchall()

    def node_dir(self, name: str) -> Path | None:
        index = name[len(NODE_PREFIX):]
        return self.state / "nodes" / index if index.isdigit() else None

    def sync(self) -> None:
        for name, state, instance, info_text in self.rows():
            node_dir = self.node_dir(name)
            if node_dir is None or not node_dir.is_dir():
                continue
            keys_file = node_dir / "authorized_keys"
            if state == "active":
                info = json.loads(info_text or "{}")
                drive = info.get("configdrive")
                mark = (str(instance), json.dumps(drive, sort_keys=True)[:4096] if drive is not None else "")
                if self.installed.get(name) == mark:
                    continue
                self.install(name, node_dir, drive)
                self.installed[name] = mark
            else:
                self.installed.pop(name, None)
                if keys_file.exists() and keys_file.stat().st_size:
                    write_atomic(keys_file, b"")
                    LOG.info("%s is %s: authorized_keys emptied", name, state)

    def install(self, name: str, node_dir: Path, drive: Any) -> None:
        try:
            meta, user_data = decode_config_drive(drive)
        except Exception as exc:  # noqa: BLE001 - a bad drive must not stop the agent; no keys then
            LOG.warning("%s is active but its config drive is unusable (%s): no key installed", name, exc)
            write_atomic(node_dir / "authorized_keys", b"")
            return
        keys = public_keys(meta)
        write_atomic(node_dir / "meta_data.json", json.dumps(meta, indent=1).encode(), 0o644)
        write_atomic(node_dir / "user_data", user_data or b"", 0o644)
        write_atomic(node_dir / "authorized_keys", "".join(k + "\n" for k in keys).encode())
        LOG.info("%s is active: %d key(s) installed, user_data %d byte(s)", name, len(keys), len(user_data or b""))

    def run(self, interval: float) -> None:
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        ready = self.state / "run" / "keyagent.ready"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--pg-port", type=int, required=True)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args()
    logging.basicConfig(filename=args.state / "logs" / "keyagent.log", level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s")
    LOG.info("started: polling every %.2f s", args.interval)
    KeyAgent(args.state, args.pg_port).run(args.interval)
    LOG.info("stopped")


if __name__ == "__main__":
    main()
