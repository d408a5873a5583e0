"""The devcloud's Nova part: Keystone, Placement, Glance, Nova, RabbitMQ, Neutron with ML2/OVN
(devcloud/neutroncloud.py), the VM agent (docs/devcloud-nova.md). Called by devcloud.py
up/down/status/fault.

Standard library only (like devcloud.py). The services run from ``.devcloud/nova-venv``; their
configuration, keys and Glance's images live in ``.devcloud/openstack/``; their databases are in
the devcloud's PostgreSQL (127.0.0.1:54385), Neutron's in MariaDB. Every listener is on
127.0.0.1. The set-up that needs the APIs (Keystone users and catalog, flavors, images, the
network, waiting for the hypervisors) is ``devcloud/novasetup.py`` run in the nova venv.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import common as dc  # devcloud/common.py: what every part shares
import machine
import neutroncloud

NOVA_VENV = dc.STATE / "nova-venv"
OS_DIR = dc.STATE / "openstack"
HERE = Path(__file__).resolve().parent
KEYSTONE_URL = "http://127.0.0.1:5000/v3"
PORTS = {"keystone": 5000, "placement": 8778, "glance": 9292, "neutron": 9696, "nova-api": 8774}
AMQP_PORT, EPMD_PORT, DIST_PORT = 5672, 4369, 25672
DATABASES = ["keystone", "placement", "glance", "nova_api", "nova_cell0", "nova"]
HYPERVISORS = ["devcloud-hv-1", "devcloud-hv-2", "devcloud-hv-3"]
SERVICE_PASSWORD = "devcloud-service"
ADMIN_PASSWORD = "devcloud-admin"
USER_PASSWORD = "dlbench-devcloud"
RABBIT_NODE = "devcloud@localhost"
VM_BRIDGE = "dcvmbr"
VM_NET, VM_GATEWAY = neutroncloud.ovn.VM_NET, neutroncloud.ovn.VM_GATEWAY
VM_NS_PREFIX = "devcloud-vm-"


def enabled() -> bool:
    return os.environ.get("DEVCLOUD_NOVA", "1") != "0"


def installed() -> bool:
    return (NOVA_VENV / ".installed").exists()


def db_url(name: str) -> str:
    return f"postgresql+psycopg2://postgres@127.0.0.1:{dc.PG_PORT}/{name}"


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def http_ok(url: str) -> bool:
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(url, timeout=3):
            return True
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except OSError:
        return False


# --- configuration -----------------------------------------------------------------------------

def authtoken(user: str) -> str:
    """``[keystone_authtoken]``: the service's own credentials plus the URI it names to clients."""
    return f"www_authenticate_uri = {KEYSTONE_URL}\n" + service_auth(user)


def service_auth(user: str) -> str:
    return f"""auth_url = {KEYSTONE_URL}
auth_type = password
username = {user}
password = {SERVICE_PASSWORD}
project_name = service
user_domain_name = Default
project_domain_name = Default
region_name = RegionOne
"""


def render() -> None:
    """Every service's configuration under .devcloud/openstack/ (re-rendered at each up)."""
    logs = dc.LOGS
    for d in ("keystone", "placement", "glance/images", "glance/staging", "glance/tasks", "nova/state",
              "nova/instances", "neutron", "rabbitmq", "locks"):
        (OS_DIR / d).mkdir(parents=True, exist_ok=True)
    (OS_DIR / "keystone" / "keystone.conf").write_text(f"""[DEFAULT]
log_file = {logs}/keystone.log
[database]
connection = {db_url("keystone")}
[token]
provider = fernet
expiration = 86400
[fernet_tokens]
key_repository = {OS_DIR}/keystone/fernet-keys
[fernet_receipts]
key_repository = {OS_DIR}/keystone/fernet-keys
[credential]
key_repository = {OS_DIR}/keystone/credential-keys
[identity]
# bcrypt's default 12 rounds cost ~0.3 s of CPU per password login on this host's 2 cores
password_hash_rounds = 4
""")
    (OS_DIR / "placement" / "placement.conf").write_text(f"""[DEFAULT]
log_file = {logs}/placement.log
[placement_database]
connection = {db_url("placement")}
[api]
auth_strategy = keystone
[keystone_authtoken]
{authtoken("placement")}""")
    shutil.copy(NOVA_VENV / "etc" / "glance" / "glance-api-paste.ini", OS_DIR / "glance" / "glance-api-paste.ini")
    (OS_DIR / "glance" / "glance-api.conf").write_text(f"""[DEFAULT]
log_file = {logs}/glance.log
enabled_backends = file:file
show_image_direct_url = false
worker_self_reference_url = http://127.0.0.1:{PORTS["glance"]}
[database]
connection = {db_url("glance")}
[glance_store]
default_backend = file
[file]
filesystem_store_datadir = {OS_DIR}/glance/images
[os_glance_staging_store]
filesystem_store_datadir = {OS_DIR}/glance/staging
[os_glance_tasks_store]
filesystem_store_datadir = {OS_DIR}/glance/tasks
[paste_deploy]
flavor = keystone
config_file = {OS_DIR}/glance/glance-api-paste.ini
[keystone_authtoken]
{authtoken("glance")}
[oslo_policy]
enforce_scope = true
enforce_new_defaults = true
[oslo_concurrency]
lock_path = {OS_DIR}/locks
""")
    shutil.copy(NOVA_VENV / "etc" / "neutron" / "api-paste.ini", OS_DIR / "neutron" / "api-paste.ini")
    (OS_DIR / "neutron" / "neutron.conf").write_text(neutroncloud.conf(
        OS_DIR, KEYSTONE_URL, authtoken("neutron"), service_auth("nova"),
        f"rabbit://guest:guest@127.0.0.1:{AMQP_PORT}/"))
    nova = OS_DIR / "nova"
    shutil.copy(NOVA_VENV / "etc" / "nova" / "api-paste.ini", nova / "api-paste.ini")
    gpu_alias = json.dumps({"name": "fake-gpu", "vendor_id": "10de", "product_id": "1eb8", "device_type": "type-PCI"})
    (nova / "nova.conf").write_text(f"""[DEFAULT]
log_dir = {logs}
state_path = {nova}/state
instances_path = {nova}/instances
transport_url = rabbit://guest:guest@127.0.0.1:{AMQP_PORT}/
my_ip = 127.0.0.1
compute_driver = devcloud_virt.DevcloudFakeDriver
allow_resize_to_same_host = true
# The fake hypervisor has no console or metadata service.
[api]
auth_strategy = keystone
[wsgi]
api_paste_config = {nova}/api-paste.ini
[api_database]
connection = {db_url("nova_api")}
[database]
connection = {db_url("nova")}
[keystone_authtoken]
{authtoken("nova")}
[service_user]
send_service_user_token = true
{service_auth("nova")}
[placement]
{service_auth("placement")}
[neutron]
{service_auth("neutron")}
[glance]
region_name = RegionOne
[cinder]
os_region_name = RegionOne
[scheduler]
discover_hosts_in_cells_interval = 2
# Nova's default: servers of an anti-affinity group created at the same time may be placed on
# one host by concurrent scheduling; the compute's late check then reschedules one of them. (A
# spawn failure of the server-error knob aborts the build without a reschedule.)
max_attempts = 3
workers = 1
[filter_scheduler]
enabled_filters = ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,
  ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter,PciPassthroughFilter
host_subset_size = 1
pci_in_placement = false
[conductor]
workers = 1
[quota]
instances = 50
cores = 200
ram = 409600
server_groups = 50
server_group_members = 50
[pci]
alias = {gpu_alias}
[oslo_concurrency]
lock_path = {OS_DIR}/locks
[oslo_messaging_notifications]
driver = noop
[oslo_messaging_rabbit]
heartbeat_timeout_threshold = 0
[vnc]
enabled = false
[spice]
enabled = false
[os_vif_ovs]
isolate_vif = false
[oslo_policy]
enforce_scope = true
enforce_new_defaults = true
[compute]
resource_provider_association_refresh = 60
""")
    device_spec = json.dumps({"vendor_id": "10de", "product_id": "1eb8"})
    for k, host in enumerate(HYPERVISORS, 1):
        extra = f"\n[pci]\ndevice_spec = {device_spec}\n[devcloud]\nfake_gpus = 2\n" if k == 1 else ""
        (nova / f"{host}.conf").write_text(f"[DEFAULT]\nhost = {host}\nlog_file = {logs}/nova-compute-{k}.log\n"
                                           f"{extra}")
    rabbit = OS_DIR / "rabbitmq"
    (rabbit / "rabbitmq.conf").write_text(f"""listeners.tcp.default = 127.0.0.1:{AMQP_PORT}
loopback_users.guest = true
log.file.level = warning
""")
    (rabbit / "enabled_plugins").write_text("[].\n")
    (rabbit / "rabbitmq-env.conf").write_text("")


def venv(tool: str) -> str:
    return str(NOVA_VENV / "bin" / tool)


def env_for(name: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env.update({"DEVCLOUD_STATE": str(dc.STATE), "PYTHONPATH": str(HERE)})
    if name == "keystone":
        env["OS_KEYSTONE_CONFIG_FILES"] = str(OS_DIR / "keystone" / "keystone.conf")
    elif name == "placement":
        env["OS_PLACEMENT_CONFIG_DIR"] = str(OS_DIR / "placement")
    elif name == "glance":
        env["OS_GLANCE_CONFIG_DIR"] = str(OS_DIR / "glance")
    elif name == "neutron":
        env["OS_NEUTRON_CONFIG_DIR"] = str(OS_DIR / "neutron")
        env["OS_NEUTRON_CONFIG_FILES"] = "neutron.conf"
        # Neutron asks uWSGI or mod_wsgi how many API processes serve it (its OVN hash ring waits
        # for that many); other servers say it in ASGI_WORKERS: wsgirun.py runs one.
        env["ASGI_WORKERS"] = "1"
    elif name == "nova-api":
        env["OS_NOVA_CONFIG_DIR"] = str(OS_DIR / "nova")
        env["OS_NOVA_CONFIG_FILES"] = "api-paste.ini;nova.conf"
    elif name == "rabbitmq":
        rabbit = OS_DIR / "rabbitmq"
        env.update({
            "HOME": str(rabbit), "RABBITMQ_NODENAME": RABBIT_NODE, "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(AMQP_PORT), "RABBITMQ_DIST_PORT": str(DIST_PORT),
            "ERL_EPMD_ADDRESS": "127.0.0.1", "ERL_EPMD_PORT": str(EPMD_PORT),
            "RABBITMQ_CONFIG_FILE": str(rabbit / "rabbitmq.conf"),
            "RABBITMQ_CONF_ENV_FILE": str(rabbit / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(rabbit / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(rabbit / "mnesia"), "RABBITMQ_LOG_BASE": str(dc.LOGS),
            "RABBITMQ_LOGS": str(dc.LOGS / "rabbitmq.log"), "RABBITMQ_PID_FILE": str(rabbit / "rabbit.pid"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "RABBITMQ_CTL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        })
    return env


def gunicorn(name: str, app: str, threads: int = 4) -> list[str]:
    return [venv("python"), str(HERE / "wsgirun.py"), name, str(PORTS[name]), app, str(threads)]


def services() -> list[tuple[str, list[str], str]]:
    """(name, command, marker in its command line) of every long-running process, in start order."""
    nova_conf = str(OS_DIR / "nova" / "nova.conf")
    out: list[tuple[str, list[str], str]] = [
        ("rabbitmq", ["/usr/lib/rabbitmq/bin/rabbitmq-server"], "rabbit"),
        ("keystone", gunicorn("keystone", "keystone.wsgi.api:application", threads=8), "wsgirun.py keystone"),
        ("placement", gunicorn("placement", "placement.wsgi.api:application"), "wsgirun.py placement"),
        ("glance", gunicorn("glance", "glance.wsgi.api:application"), "wsgirun.py glance"),
        ("neutron", gunicorn("neutron", "neutron.wsgi.api:application"), "wsgirun.py neutron"),
        ("nova-api", gunicorn("nova-api", "nova.wsgi.osapi_compute:application", threads=8), "wsgirun.py nova-api"),
        ("nova-conductor", [venv("nova-conductor"), "--config-file", nova_conf, "--log-file",
                            str(dc.LOGS / "nova-conductor.log")], "nova-conductor"),
        ("nova-scheduler", [venv("nova-scheduler"), "--config-file", nova_conf, "--log-file",
                            str(dc.LOGS / "nova-scheduler.log")], "nova-scheduler"),
    ]
    for k, host in enumerate(HYPERVISORS, 1):
        out.append((f"nova-compute-{k}", [venv("python"), str(HERE / "novacompute.py"), "--config-file", nova_conf,
                                           "--config-file",
                                           str(OS_DIR / "nova" / f"{host}.conf")], f"{host}.conf"))
    out.append(("vmagent", [venv("python"), str(HERE / "vmagent.py"), "--state", str(dc.STATE)], "vmagent.py"))
    return out


def start(name: str, cmd: list[str], marker: str) -> bool:
    """Start one service unless it runs; True if started."""
    if dc.pid_alive(name, marker):
        return False
    if name in PORTS and port_open(PORTS[name]):
        raise SystemExit(f"devcloud: something else already listens on 127.0.0.1:{PORTS[name]} ({name}); stop it")
    dc.LOGS.mkdir(parents=True, exist_ok=True)
    dc.RUN.mkdir(parents=True, exist_ok=True)
    with open(dc.LOGS / f"{name}.out", "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=dc.STATE, env=env_for(name))
    (dc.RUN / f"{name}.pid").write_text(f"{proc.pid}\n")
    return True


def run(cmd: list[str], name: str = "", timeout: float = 600) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True, env=env_for(name), timeout=timeout, cwd=dc.STATE)
    if res.returncode != 0:
        raise SystemExit(f"devcloud: command failed ({res.returncode}): {' '.join(cmd)}\n"
                         f"{res.stdout[-3000:]}{res.stderr[-3000:]}")


# --- databases -----------------------------------------------------------------------------------

def dbs_up() -> None:
    """Create and migrate the services' databases (only what is not done yet; in parallel)."""
    for db in DATABASES:
        if dc.psql(f"SELECT 1 FROM pg_database WHERE datname = '{db}'") != "1":
            dc.psql(f"CREATE DATABASE {db}")
            (OS_DIR / f"{db}.synced").unlink(missing_ok=True)
    ks = str(OS_DIR / "keystone" / "keystone.conf")
    nova_conf = str(OS_DIR / "nova" / "nova.conf")
    manage = venv("nova-manage")
    chains: dict[str, list[tuple[list[str], str]]] = {
        "keystone": [
            ([venv("keystone-manage"), "--config-file", ks, "db_sync"], "keystone"),
            ([venv("keystone-manage"), "--config-file", ks, "fernet_setup", "--keystone-user", "root",
              "--keystone-group", "root"], "keystone"),
            ([venv("keystone-manage"), "--config-file", ks, "credential_setup", "--keystone-user", "root",
              "--keystone-group", "root"], "keystone"),
            ([venv("keystone-manage"), "--config-file", ks, "bootstrap", "--bootstrap-password", ADMIN_PASSWORD,
              "--bootstrap-admin-url", KEYSTONE_URL, "--bootstrap-internal-url", KEYSTONE_URL,
              "--bootstrap-public-url", KEYSTONE_URL, "--bootstrap-region-id", "RegionOne"], "keystone")],
        "placement": [([venv("placement-manage"), "--config-file", str(OS_DIR / "placement" / "placement.conf"), "db",
                       "sync"], "placement")],
        "glance": [([venv("glance-manage"), "--config-dir", str(OS_DIR / "glance"), "db_sync"], "glance")],
        "nova": [
            ([manage, "--config-file", nova_conf, "api_db", "sync"], ""),
            ([manage, "--config-file", nova_conf, "cell_v2", "map_cell0", "--database_connection",
              db_url("nova_cell0")], ""),
            (["sh", "-c", f"{manage} --config-file {nova_conf} cell_v2 list_cells | grep -q ' cell1 ' || "
              f"{manage} --config-file {nova_conf} cell_v2 create_cell --name cell1"], ""),
            ([manage, "--config-file", nova_conf, "db", "sync"], "")],
        "neutron": [([venv("neutron-db-manage"), "--config-file", str(OS_DIR / "neutron" / "neutron.conf"),
                      "upgrade", "heads"], "")],
    }
    stamps = {"keystone": "keystone", "placement": "placement", "glance": "glance", "nova": "nova",
              "neutron": "neutron"}
    todo = {k: v for k, v in chains.items() if not (OS_DIR / f"{stamps[k]}.synced").exists()}
    if not todo:
        return
    started = time.monotonic()
    script = []
    for k, steps in todo.items():
        cmds = " && ".join(_env_prefix(name) + " ".join(_q(c) for c in cmd) for cmd, name in steps)
        script.append(f"( {cmds} ) > {dc.LOGS}/dbsync-{k}.log 2>&1 && touch {OS_DIR}/{stamps[k]}.synced &")
    script.append("wait")
    subprocess.run(["sh", "-c", "\n".join(script)], check=False, timeout=900, cwd=dc.STATE)
    failed = [k for k in todo if not (OS_DIR / f"{stamps[k]}.synced").exists()]
    if failed:
        tails = "\n".join(f"--- {k}:\n" + (dc.LOGS / f"dbsync-{k}.log").read_text()[-2000:] for k in failed)
        raise SystemExit(f"devcloud: database set-up failed for {failed}:\n{tails}")
    dc.log(f"databases {', '.join(todo)} set up in {time.monotonic() - started:.1f} s")


def _q(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def _env_prefix(name: str) -> str:
    env = env_for(name)
    keys = [k for k in env if k.startswith("OS_") or k in ("DEVCLOUD_STATE", "PYTHONPATH")]
    return "env " + " ".join(_q(f"{k}={env[k]}") for k in keys) + " "


def dbs_down() -> None:
    if dc.pg_running():
        for db in DATABASES:
            dc.psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)", check=False)


# --- the VM network ------------------------------------------------------------------------------

def bridge_up() -> None:
    if not dc.link_exists(VM_BRIDGE):
        dc.sh(["ip", "link", "add", VM_BRIDGE, "type", "bridge"])
    addrs = dc.sh(["ip", "-o", "addr", "show", "dev", VM_BRIDGE], quiet=True).stdout
    prefix = neutroncloud.ovn.VM_NET_PREFIXLEN
    if f" {VM_GATEWAY}/{prefix} " not in addrs:
        dc.sh(["ip", "addr", "add", f"{VM_GATEWAY}/{prefix}", "dev", VM_BRIDGE])
    dc.sh(["ip", "link", "set", VM_BRIDGE, "up"])


def vm_netns() -> list[str]:
    return [ns for ns in dc.netns_list() if ns.startswith(VM_NS_PREFIX)]


def network_down() -> None:
    for ns in vm_netns():
        slot = ns[len(VM_NS_PREFIX):]
        if dc.link_exists(f"dcv{slot}h"):
            dc.sh(["ip", "link", "del", f"dcv{slot}h"], check=False)
        dc.sh(["ip", "netns", "del", ns], check=False)
    for dev in dc.sh(["ip", "-o", "link", "show"], quiet=True).stdout.splitlines():
        name = dev.split(":")[1].strip().split("@")[0] if ":" in dev else ""
        if name.startswith("dcv") and name.endswith("h") and name[3:-1].isdigit():
            dc.sh(["ip", "link", "del", name], check=False)
    if dc.link_exists(VM_BRIDGE):
        dc.sh(["ip", "link", "del", VM_BRIDGE], check=False)


# --- up / down / status ----------------------------------------------------------------------------

def up() -> None:
    if not enabled():
        dc.log("DEVCLOUD_NOVA=0: Nova part left out")
        return
    if not installed():
        raise SystemExit(f"devcloud: {NOVA_VENV} is not installed; run `make devcloud-install` "
                         "(or DEVCLOUD_NOVA=0 for Ironic only)")
    started = time.monotonic()
    if OS_DIR.exists() and not all(dc.pid_alive(name, marker) for name, _, marker in
                                   services() + neutroncloud.services(HYPERVISORS)):
        # Left by an unclean stop (host restart, killed session, a failed up): the databases
        # remember the computes but their local state is gone, and nova-compute refuses to start
        # ("No local node identity found"). The Nova part starts from nothing, as after `down`.
        dc.log("nova part: state left by an unclean stop (not every service running): clearing it first")
        down()
    render()
    bridge_up()
    svc = {name: (name, cmd, marker) for name, cmd, marker in services()}
    # RabbitMQ first (Erlang takes a few seconds); Neutron's data plane (MariaDB, OVN) and the
    # databases meanwhile. Then the APIs that only check tokens, Keystone's users and catalog,
    # and only then Nova (its services log in as the `nova` user at start).
    start(*svc["rabbitmq"])
    neutroncloud.up(VM_BRIDGE, HYPERVISORS)
    dbs_up()
    first = ["keystone", "placement", "glance", "neutron"]
    fresh = [name for name in first if start(*svc[name])]
    wait_ready(first)
    setup("keystone")
    nova = [name for name in svc if name not in first and name != "rabbitmq"]
    fresh += [name for name in nova if start(*svc[name])]
    dc.wait_for("RabbitMQ on 127.0.0.1:5672 (see .devcloud/logs/rabbitmq.out)", lambda: port_open(AMQP_PORT),
                timeout=120, interval=0.3)
    wait_ready(["nova-api"])
    setup("rest")
    dc.log(f"nova part up in {time.monotonic() - started:.1f} s (started: {', '.join(fresh) or 'nothing'})")


def setup(phase: str) -> None:
    run([venv("python"), str(HERE / "novasetup.py"), "--state", str(dc.STATE), "--phase", phase], timeout=300)


def wait_ready(names: list[str]) -> None:
    for name in names:
        url = f"http://127.0.0.1:{PORTS[name]}/"
        dc.wait_for(f"{name} on {url} (see .devcloud/logs/{name}.out)", lambda u=url, n=name: alive_or_die(n) and
                    http_ok(u), timeout=180, interval=0.3)


def alive_or_die(name: str) -> bool:
    marker = {n: m for n, _, m in services()}[name]
    if not dc.pid_alive(name, marker):
        dc.exited(name)
    return True


def stop_service(name: str, marker: str, timeout: float = 10) -> None:
    pid = dc.pid_alive(name, marker)
    if pid:
        dc.stop_pid(pid, timeout=timeout)
    (dc.RUN / f"{name}.pid").unlink(missing_ok=True)


def epmd_down() -> None:
    """The epmd our RabbitMQ started (it daemonizes) goes when no Erlang node is registered."""
    epmd = shutil.which("epmd") or next(iter(sorted(Path("/usr/lib/erlang/erts-").parent.glob("erts-*/bin/epmd"))),
                                        None)
    if not epmd:
        return
    env = {**os.environ, "ERL_EPMD_ADDRESS": "127.0.0.1"}
    names = subprocess.run([str(epmd), "-names"], capture_output=True, text=True, env=env, timeout=10)
    if names.returncode == 0 and "at port" not in names.stdout:
        subprocess.run([str(epmd), "-kill"], capture_output=True, env=env, timeout=10)


def down() -> None:
    """Stop every Nova-part process, every server machine, the VM network; drop the databases."""
    svc = services()
    stop_service("vmagent", "vmagent.py")
    dc.stop_services([(name, marker) for name, _, marker in svc if name not in ("vmagent", "rabbitmq")])
    for idx in vm_machine_indexes():
        machine.stop(dc.STATE, idx, wipe=True)
        machine.ssh_down_flag(dc.STATE, idx).unlink(missing_ok=True)
        shutil.rmtree(machine.node_dir(dc.STATE, idx), ignore_errors=True)
    neutroncloud.down(HYPERVISORS)
    network_down()
    stop_service("rabbitmq", "rabbit", timeout=30)
    epmd_down()
    dbs_down()
    for f in ("nova-server-error", "nova-server-error.lock", "vm-ssh-down", "vmagent.ready"):
        (dc.RUN / f).unlink(missing_ok=True)
    shutil.rmtree(OS_DIR, ignore_errors=True)


VM_INDEX_BASE = 100
"""Server machines use machine indexes 101..250 (node dirs .devcloud/nodes/<i>, dockerd bridge
198.19.<i>.1/24); Ironic nodes use 1..50."""


def vm_machine_indexes() -> list[int]:
    found = set()
    nodes = dc.STATE / "nodes"
    for d in nodes.iterdir() if nodes.exists() else []:
        if d.name.isdigit() and int(d.name) > VM_INDEX_BASE:
            found.add(int(d.name))
    for f in dc.RUN.glob("machine-*.pid") if dc.RUN.exists() else []:
        tail = f.stem.split("-", 1)[1]
        if tail.isdigit() and int(tail) > VM_INDEX_BASE:
            found.add(int(tail))
    return sorted(found)


def status() -> None:
    if not installed() and not (dc.RUN / "keystone.pid").exists():
        print("nova: not installed (make devcloud-install)")
        return
    procs = {name: bool(dc.pid_alive(name, marker)) for name, _, marker in services()}
    procs.update(neutroncloud.status(HYPERVISORS))
    print("nova processes: " + ", ".join(f"{k}={'up' if v else 'DOWN'}" for k, v in procs.items()))
    try:
        servers = json.loads((dc.RUN / "vmagent.servers.json").read_text())
    except (OSError, ValueError):
        servers = []
    print(f"{'server':<24} {'state':<8} {'hypervisor':<15} {'address':<15} {'machine':<8} {'image':<13} "
          f"{'sshd':<5} uuid")
    for s in servers:
        idx = s.get("index")
        m = dc.machine_status(idx) if idx else {"machine": "-", "image": "-", "sshd": "-"}
        print(f"{s['name'][:24]:<24} {s['vm_state']:<8} {s['host'] or '-':<15} {s.get('address') or '-':<15} "
              f"{m['machine']:<8} {m['image']:<13} {m['sshd']:<5} {s['uuid']}")


def signal_api(sig: int) -> None:
    pid = dc.pid_alive("nova-api", "wsgirun.py nova-api")
    if not pid:
        raise SystemExit("devcloud: nova-api is not running")
    for p in [pid, *dc.children(pid)]:
        os.kill(p, sig)


def fault(knob: str, n: int | None) -> None:
    """The Nova knobs (docs/devcloud-nova.md)."""
    if knob == "nova-api-stop":
        stop_service("nova-api", "wsgirun.py nova-api")
    elif knob == "nova-api-start":
        name, cmd, marker = next(s for s in services() if s[0] == "nova-api")
        signal_api(signal.SIGCONT) if dc.pid_alive(name, marker) else start(name, cmd, marker)
        dc.wait_for("nova-api", lambda: http_ok(f"http://127.0.0.1:{PORTS['nova-api']}/"), timeout=120, interval=0.2)
    elif knob == "nova-api-freeze":
        signal_api(signal.SIGSTOP)
    elif knob == "nova-api-thaw":
        signal_api(signal.SIGCONT)
    elif knob == "server-error":
        (dc.RUN / "nova-server-error").write_text(f"{n if n else 'all'}\n")
    elif knob == "server-ok":
        (dc.RUN / "nova-server-error").unlink(missing_ok=True)
    elif knob in ("quota-exhausted", "quota-ok", "hypervisor-full", "hypervisor-ok"):
        run([venv("python"), str(HERE / "novasetup.py"), "--state", str(dc.STATE), "--knob", knob], timeout=120)
    elif knob == "server-ssh-down":
        (dc.RUN / "vm-ssh-down").touch()
        for idx in vm_machine_indexes():
            machine.ssh_down_flag(dc.STATE, idx).touch()
            if machine.running(dc.STATE, idx) and dc.wait_booted(idx):
                machine.stop_sshd(dc.STATE, idx)
    elif knob == "server-ssh-up":
        (dc.RUN / "vm-ssh-down").unlink(missing_ok=True)
        for idx in vm_machine_indexes():
            if machine.ssh_down_flag(dc.STATE, idx).exists():
                dc.ssh_up(idx)
    elif knob == "nova-reset":
        if dc.pid_alive("nova-api", "wsgirun.py nova-api"):
            signal_api(signal.SIGCONT)
        else:
            fault("nova-api-start", None)
        for k in ("server-ok", "server-ssh-up"):
            fault(k, None)
        run([venv("python"), str(HERE / "novasetup.py"), "--state", str(dc.STATE), "--knob", "reset"], timeout=120)


KNOBS = ["nova-api-stop", "nova-api-start", "nova-api-freeze", "nova-api-thaw", "server-error", "server-ok",
         "quota-exhausted", "quota-ok", "server-ssh-down", "server-ssh-up", "hypervisor-full", "hypervisor-ok"]

