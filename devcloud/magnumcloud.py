"""The devcloud's Magnum part: the real Magnum 23.0.0 API and conductor (docs/magnum.md).

Standard library only (like devcloud.py and novacloud.py). Magnum runs from its own venv
``.devcloud/magnum-venv`` (Magnum from PyPI + our driver ``devcloud/magnum_driver``, installed
there by ``make magnum-install``), uses the Nova part's Keystone and RabbitMQ, keeps its database
``magnum`` in the devcloud's PostgreSQL and its configuration and cluster state in
``.devcloud/openstack/magnum/``. The API listens on 127.0.0.1:9511 (gunicorn, like Nova's);
certificates: ``cert_manager_type = x509keypair`` (CA and keys in Magnum's database).

Called by devcloud.py up/down/status/fault after the Nova part (it needs Keystone, Glance and
Nova to validate cluster templates). ``DEVCLOUD_MAGNUM=0`` or a missing venv leaves it out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import common as dc  # devcloud/common.py: what every part shares
import k8s_control  # devcloud/k8s_control.py: a cluster's control plane
import novacloud

MAGNUM_VENV = dc.STATE / "magnum-venv"
MAGNUM_DIR = novacloud.OS_DIR / "magnum"
HERE = Path(__file__).resolve().parent
PORT = 9511
URL = f"http://127.0.0.1:{PORT}/v1"
DATABASE = "magnum"
CLUSTERS_DIR = MAGNUM_DIR / "clusters"
FAULT_FILE = dc.RUN / "magnum-create-failed"


def enabled() -> bool:
    return os.environ.get("DEVCLOUD_MAGNUM", "1") != "0" and novacloud.enabled()


def installed() -> bool:
    return (MAGNUM_VENV / ".installed").exists()


def venv(tool: str) -> str:
    return str(MAGNUM_VENV / "bin" / tool)


def render() -> None:
    CLUSTERS_DIR.mkdir(parents=True, exist_ok=True)
    (MAGNUM_DIR / "locks").mkdir(parents=True, exist_ok=True)
    paste = MAGNUM_VENV / "etc" / "magnum" / "api-paste.ini"
    (MAGNUM_DIR / "api-paste.ini").write_text(paste.read_text())
    (MAGNUM_DIR / "magnum.conf").write_text(f"""[DEFAULT]
log_dir = {dc.LOGS}
transport_url = rabbit://guest:guest@127.0.0.1:{novacloud.AMQP_PORT}/
host = devcloud-magnum
state_path = {MAGNUM_DIR}
[api]
host = 127.0.0.1
port = {PORT}
api_paste_config = {MAGNUM_DIR}/api-paste.ini
[database]
connection = {novacloud.db_url(DATABASE)}
[keystone_authtoken]
{novacloud.authtoken("magnum")}auth_version = v3
[keystone_auth]
{novacloud.service_auth("magnum")}
[conductor]
workers = 1
[certificates]
cert_manager_type = x509keypair
[cinder]
default_docker_volume_type = devcloud
[glance]
region_name = RegionOne
[nova]
region_name = RegionOne
[neutron]
region_name = RegionOne
[drivers]
verify_ca = false
[oslo_concurrency]
lock_path = {MAGNUM_DIR}/locks
[oslo_messaging_notifications]
driver = noop
[oslo_messaging_rabbit]
heartbeat_timeout_threshold = 0
[oslo_policy]
enforce_scope = false
enforce_new_defaults = false
[devcloud]
state = {dc.STATE}
clusters = {CLUSTERS_DIR}
ironic = {dc.API}
repo = {HERE.parent}
""")


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    out.update({"DEVCLOUD_STATE": str(dc.STATE), "PYTHONPATH": str(HERE),
                "DEVCLOUD_MAGNUM_CONF": str(MAGNUM_DIR / "magnum.conf")})
    return out


def services() -> list[tuple[str, list[str], str]]:
    conf = str(MAGNUM_DIR / "magnum.conf")
    return [
        ("magnum-api", [venv("python"), str(HERE / "magnum_wsgi.py"), "magnum-api", conf, str(PORT)], "magnum-api"),
        ("magnum-conductor", [venv("magnum-conductor"), "--config-file", conf], "magnum-conductor"),
    ]


def start(name: str, cmd: list[str], marker: str) -> bool:
    if dc.pid_alive(name, marker):
        return False
    if name == "magnum-api" and novacloud.port_open(PORT):
        raise SystemExit(f"devcloud: something else already listens on 127.0.0.1:{PORT}; stop it")
    with open(dc.LOGS / f"{name}.out", "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=dc.STATE, env=env())
    (dc.RUN / f"{name}.pid").write_text(f"{proc.pid}\n")
    return True


def db_up() -> None:
    if dc.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'") != "1":
        dc.psql(f"CREATE DATABASE {DATABASE}")
        (MAGNUM_DIR / "db.synced").unlink(missing_ok=True)
    if (MAGNUM_DIR / "db.synced").exists():
        return
    started = time.monotonic()
    res = subprocess.run([venv("python"), str(HERE / "magnum_dbsync.py"), str(MAGNUM_DIR / "magnum.conf")],
                         capture_output=True, text=True, env=env(), timeout=600, cwd=dc.STATE)
    if res.returncode != 0:
        raise SystemExit(f"devcloud: magnum-db-manage upgrade failed:\n{res.stdout[-2000:]}{res.stderr[-3000:]}")
    (MAGNUM_DIR / "db.synced").touch()
    dc.log(f"database magnum set up in {time.monotonic() - started:.1f} s")


def setup() -> None:
    res = subprocess.run([venv("python"), str(HERE / "magnumsetup.py")], capture_output=True, text=True,
                         env=env(), timeout=300, cwd=dc.STATE)
    if res.returncode != 0:
        raise SystemExit(f"devcloud: magnum set-up failed:\n{res.stdout[-2000:]}{res.stderr[-3000:]}")
    print(res.stdout.strip())


def up() -> None:
    if not enabled():
        return
    if not installed():
        dc.log(f"{MAGNUM_VENV} not installed (`make magnum-install`): Magnum part left out")
        return
    started = time.monotonic()
    render()
    db_up()
    setup()  # Keystone user, service, endpoints; Glance image with os_distro (before the API answers)
    fresh = [name for name, cmd, marker in services() if start(name, cmd, marker)]
    dc.wait_for(f"magnum-api on {URL} (see .devcloud/logs/magnum-api.out)",
                lambda: alive_or_die("magnum-api") and novacloud.http_ok(f"http://127.0.0.1:{PORT}/"),
                timeout=180, interval=0.3)
    dc.log(f"magnum part up in {time.monotonic() - started:.1f} s (started: {', '.join(fresh) or 'nothing'})")


def alive_or_die(name: str) -> bool:
    marker = {n: m for n, _, m in services()}[name]
    if not dc.pid_alive(name, marker):
        dc.exited(name)
    return True


def clusters() -> list[dict[str, object]]:
    out = []
    for f in sorted(CLUSTERS_DIR.glob("*/state.json")) if CLUSTERS_DIR.exists() else []:
        try:
            out.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue
    return out


def clusters_down() -> None:
    """Every cluster the driver made: its Kubernetes control plane stopped, its nodes undeployed."""
    for state in clusters():
        control = state.get("control")
        if isinstance(control, str):
            k8s_control.stop_from_state(control)
        for node in state.get("nodes", []):  # type: ignore[union-attr]
            uuid = node.get("uuid") if isinstance(node, dict) else None
            if not uuid:
                continue
            try:
                dc.api("PUT", f"/v1/nodes/{uuid}/states/provision", {"target": "deleted"})
            except Exception:  # noqa: BLE001 - Ironic may be gone already (down stops it next)
                pass
            if isinstance(node, dict) and node.get("allocation"):
                try:
                    dc.api("DELETE", f"/v1/allocations/{node['allocation']}")
                except Exception:  # noqa: BLE001
                    pass


def down() -> None:
    dc.stop_services([(name, marker) for name, _, marker in services()], 10)
    clusters_down()
    FAULT_FILE.unlink(missing_ok=True)
    if dc.pg_running():
        dc.psql(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)", check=False)
    (MAGNUM_DIR / "db.synced").unlink(missing_ok=True)


def status() -> None:
    if not installed():
        print("magnum: not installed (make magnum-install)")
        return
    procs = {name: bool(dc.pid_alive(name, marker)) for name, _, marker in services()}
    print("magnum processes: " + ", ".join(f"{k}={'up' if v else 'DOWN'}" for k, v in procs.items()))
    for state in clusters():
        if not state.get("uuid"):
            continue
        nodes = ",".join(str(n.get("name")) for n in state.get("nodes", []))  # type: ignore[union-attr]
        print(f"cluster {state.get('name')} {state.get('uuid')} {state.get('phase')} api={state.get('api_address')} "
              f"nodes={nodes}")


def signal_api(sig: int) -> None:
    pid = dc.pid_alive("magnum-api", "magnum-api")
    if not pid:
        raise SystemExit("devcloud: magnum-api is not running")
    for p in [pid, *dc.children(pid)]:
        os.kill(p, sig)


def fault(knob: str, n: int | None) -> None:
    """The Magnum knobs (docs/magnum.md)."""
    if knob == "magnum-api-stop":
        pid = dc.pid_alive("magnum-api", "magnum-api")
        if pid:
            dc.stop_group([pid, *dc.children(pid)], 10)
        (dc.RUN / "magnum-api.pid").unlink(missing_ok=True)
    elif knob == "magnum-api-start":
        name, cmd, marker = services()[0]
        if dc.pid_alive(name, marker):
            signal_api(signal.SIGCONT)
        else:
            start(name, cmd, marker)
        dc.wait_for("magnum-api", lambda: novacloud.http_ok(f"http://127.0.0.1:{PORT}/"), timeout=120, interval=0.2)
    elif knob == "cluster-create-failed":
        FAULT_FILE.write_text(f"{n if n else 'all'}\n")
    elif knob == "cluster-create-ok":
        FAULT_FILE.unlink(missing_ok=True)
    elif knob == "magnum-reset":
        FAULT_FILE.unlink(missing_ok=True)
        if not dc.pid_alive("magnum-api", "magnum-api"):
            fault("magnum-api-start", None)


KNOBS = ["magnum-api-stop", "magnum-api-start", "cluster-create-failed", "cluster-create-ok"]
