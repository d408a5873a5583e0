"""The devcloud's Neutron: the real neutron API with ML2/OVN enforcing security groups (docs/devcloud-nova.md).

Started by novacloud.up before the Nova services, stopped by novacloud.down:

- **MariaDB** (Debian's ``mariadbd``; Neutron's migrations do not run on PostgreSQL): data dir
  ``.devcloud/mariadb`` kept between ups like PostgreSQL's (the ``neutron`` database is dropped
  at down), 127.0.0.1:33065, socket in ``.devcloud/run``.
- **OVN central**: the Northbound and Southbound ovsdb-servers and ovn-northd, on unix sockets
  under ``.devcloud/ovn/central/`` (fresh databases at every up).
- **one chassis per hypervisor** (devcloud/ovn.py): namespace ``devcloud-hv-<k>`` with its own
  ovsdb-server, ovs-vswitchd (userspace datapath) and ovn-controller.
- **neutron-server**: ``neutron.wsgi.api:application`` under devcloud/wsgirun.py with ONE
  worker process (with several, OVN's event handling broke and ports stayed DOWN), ML2 with the
  ``ovn`` mechanism driver, types ``flat`` (``physnet1``, the devcloud network) and ``geneve``
  (tenant networks), the ``ovn-router`` service plugin; Keystone tokens; port status changes
  sent to Nova as external events, like a production Neutron.

Standard library only (like devcloud.py); the services run from the nova venv.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import common as dc  # devcloud/common.py: what every part shares
import ovn

MARIADB_DIR = dc.STATE / "mariadb"
MARIADB_PORT = 33065
MARIADB_SOCKET = dc.RUN / "mariadb.sock"
DB_PASSWORD = "devcloud-neutron"
NS_PREFIX = "devcloud-hv-"
OVS_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
OVN_SCHEMAS = {"nb": Path("/usr/share/ovn/ovn-nb.ovsschema"), "sb": Path("/usr/share/ovn/ovn-sb.ovsschema")}


def db_url() -> str:
    return f"mysql+pymysql://neutron:{DB_PASSWORD}@127.0.0.1:{MARIADB_PORT}/neutron"


def conf(os_dir: Path, keystone_url: str, authtoken: str, nova_auth: str, transport_url: str) -> str:
    """neutron.conf (with the ML2 sections: one file, the WSGI app reads it alone)."""
    state = dc.STATE
    return f"""[DEFAULT]
log_file = {dc.LOGS}/neutron.log
state_path = {os_dir}/neutron/state
core_plugin = ml2
service_plugins = ovn-router
auth_strategy = keystone
api_paste_config = {os_dir}/neutron/api-paste.ini
transport_url = {transport_url}
notify_nova_on_port_status_changes = true
notify_nova_on_port_data_changes = true
api_workers = 1
rpc_workers = 0
rpc_state_report_workers = 0
[database]
connection = {db_url()}
max_pool_size = 5
[keystone_authtoken]
{authtoken}
[nova]
{nova_auth}
[oslo_concurrency]
lock_path = {os_dir}/locks
[oslo_messaging_notifications]
driver = noop
[ml2]
type_drivers = flat,geneve
project_network_types = geneve
mechanism_drivers = ovn
extension_drivers = port_security
overlay_ip_version = 4
[ml2_type_flat]
flat_networks = {ovn.PHYSNET}
[ml2_type_geneve]
vni_ranges = 1:65536
max_header_size = 38
[securitygroup]
enable_security_group = true
[ovn]
ovn_nb_connection = unix:{ovn.nb_socket(state)}
ovn_sb_connection = unix:{ovn.sb_socket(state)}
ovn_metadata_enabled = false
enable_distributed_floating_ip = false
ovsdb_connection_timeout = 60
"""


# --- processes ----------------------------------------------------------------------------------

def services(hypervisors: list[str]) -> list[tuple[str, list[str], str]]:
    """(name, command, marker in its command line) of every long-running process, in start order
    (neutron-server itself is novacloud's: it starts with the other APIs). ``hypervisors``: the
    Nova part's (novacloud.HYPERVISORS), one chassis each."""
    state, central = dc.STATE, ovn.central_dir(dc.STATE)
    out: list[tuple[str, list[str], str]] = [
        ("mariadb", ["/usr/sbin/mariadbd", "--no-defaults", f"--datadir={MARIADB_DIR}", "--user=root",
                     f"--socket={MARIADB_SOCKET}", f"--port={MARIADB_PORT}", "--bind-address=127.0.0.1",
                     f"--pid-file={dc.RUN}/mariadb.mysqld.pid", f"--log-error={dc.LOGS}/mariadb.log",
                     "--skip-log-bin", "--skip-name-resolve", "--innodb-flush-log-at-trx-commit=0",
                     "--innodb-doublewrite=0", "--innodb-buffer-pool-size=64M", "--performance-schema=off",
                     "--max-connections=200", "--character-set-server=utf8mb4"], f"--datadir={MARIADB_DIR}"),
    ]
    for db in ("nb", "sb"):
        out.append((f"ovn-{db}", ["ovsdb-server", str(central / f"{db}.db"), f"--remote=punix:{central}/{db}.sock",
                                  f"--unixctl={central}/{db}.ctl", f"--log-file={dc.LOGS}/ovn-{db}.log",
                                  "-vconsole:off"], str(central / f"{db}.db")))
    out.append(("ovn-northd", ["ovn-northd", f"--ovnnb-db=unix:{central}/nb.sock",
                               f"--ovnsb-db=unix:{central}/sb.sock", f"--unixctl={central}/northd.ctl",
                               f"--log-file={dc.LOGS}/ovn-northd.log", "-vconsole:off"], f"{central}/northd.ctl"))
    for hv in hypervisors:
        d = ovn.chassis_dir(state, hv)
        # Each daemon's run directory is the chassis' own (OVS_RUNDIR: ovs-vswitchd's bridge
        # management sockets, which ovn-controller programs br-int through; OVN_RUNDIR: its
        # control socket): three Open vSwitches on one host must not share /var/run/openvswitch.
        netns = ["ip", "netns", "exec", hv, "env", f"OVS_RUNDIR={d}", f"OVN_RUNDIR={d}"]
        out += [
            (f"ovsdb-{hv}", [*netns, "ovsdb-server", str(d / "conf.db"), f"--remote=punix:{d}/db.sock",
                             f"--unixctl={d}/ovsdb-server.ctl", f"--log-file={dc.LOGS}/ovsdb-{hv}.log",
                             "-vconsole:off"], str(d / "conf.db")),
            # --monitor: a monitor process starts the daemon again when it aborts. Debian 12's Open
            # vSwitch 3.1 userspace conntrack can abort on an assertion ("conn->conn_type ==
            # CT_CONN_TYPE_DEFAULT failed in conn_update_state()", stop 45's CI: hv-2 died mid-tier
            # and every later Nova test on it timed out); ovn-controller then reprograms br-int.
            (f"ovs-vswitchd-{hv}", [*netns, "ovs-vswitchd", f"unix:{d}/db.sock", f"--unixctl={d}/ovs-vswitchd.ctl",
                                    f"--log-file={dc.LOGS}/ovs-vswitchd-{hv}.log", "-vconsole:off", "--monitor"],
             f"{d}/ovs-vswitchd.ctl"),
            (f"ovn-controller-{hv}", [*netns, "ovn-controller", f"unix:{d}/db.sock",
                                      f"--log-file={dc.LOGS}/ovn-controller-{hv}.log", "-vconsole:off"],
             f"ovn-controller unix:{d}/db.sock"),
        ]
    return out


def running(name: str, marker: str) -> bool:
    """By its pid file, or by its marker: ovs-vswitchd's monitor retitles itself, so its pid file's
    process no longer shows the marker, while its daemon child does (an ``up`` that missed it
    started a second vswitchd on the same database: "another ovs-vswitchd process is running")."""
    return bool(dc.pid_alive(name, marker)) or bool(dc.pids_with(marker))


def start(name: str, cmd: list[str], marker: str) -> None:
    if not running(name, marker):
        dc.spawn(name, cmd)


def _svc(hypervisors: list[str]) -> dict[str, tuple[str, list[str], str]]:
    return {name: (name, cmd, marker) for name, cmd, marker in services(hypervisors)}


def alive_or_die(name: str) -> bool:
    """The process we started as ``name`` still runs: by its pid, not its command line (Open
    vSwitch's daemons blank their command line for a moment at start, see proctitle_init)."""
    try:
        pid = int((dc.RUN / f"{name}.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pid = 0
    if not (pid and dc.alive(pid)):
        dc.exited(name, also=f" and {name}.log")
    return True


# --- MariaDB ------------------------------------------------------------------------------------

def mariadb(sql: str, check: bool = True) -> str:
    res = subprocess.run(["mariadb", "--no-defaults", f"--socket={MARIADB_SOCKET}", "-uroot", "-N", "-B", "-e", sql],
                         capture_output=True, text=True, timeout=60)
    if check and res.returncode != 0:
        raise SystemExit(f"devcloud: MariaDB: {sql}: {res.stderr.strip()}")
    return res.stdout.strip()


def mariadb_up() -> None:
    if not (MARIADB_DIR / "mysql").exists():
        MARIADB_DIR.mkdir(parents=True, exist_ok=True)
        dc.sh(["mariadb-install-db", "--no-defaults", f"--datadir={MARIADB_DIR}", "--user=root",
               "--auth-root-authentication-method=socket", "--skip-test-db"], quiet=True)
    start(*_svc([])["mariadb"])


def mariadb_ready() -> None:
    def ready() -> bool:
        alive_or_die("mariadb")
        return subprocess.run(["mariadb-admin", "--no-defaults", f"--socket={MARIADB_SOCKET}", "-uroot", "ping"],
                              capture_output=True).returncode == 0
    dc.wait_for("MariaDB (see .devcloud/logs/mariadb.log)", ready, timeout=60, interval=0.2)
    mariadb("CREATE DATABASE IF NOT EXISTS neutron CHARACTER SET utf8mb4; "
            f"CREATE USER IF NOT EXISTS 'neutron'@'127.0.0.1' IDENTIFIED BY '{DB_PASSWORD}'; "
            "GRANT ALL PRIVILEGES ON neutron.* TO 'neutron'@'127.0.0.1'")


# --- OVN ----------------------------------------------------------------------------------------

def central_up() -> None:
    central = ovn.central_dir(dc.STATE)
    central.mkdir(parents=True, exist_ok=True)
    svc = _svc([])
    for db, schema in OVN_SCHEMAS.items():
        if not (central / f"{db}.db").exists():
            dc.sh(["ovsdb-tool", "create", str(central / f"{db}.db"), str(schema)], quiet=True)
        start(*svc[f"ovn-{db}"])
    dc.wait_for("OVN databases", lambda: all(alive_or_die(f"ovn-{db}") and (central / f"{db}.sock").exists()
                                             for db in OVN_SCHEMAS), timeout=30, interval=0.1)
    start(*svc["ovn-northd"])


def chassis_up(k: int, hv: str, bridge: str) -> None:
    """The hypervisor's namespace, its Open vSwitch and its ovn-controller (registered as chassis
    ``hv`` with the bridge mapping ``physnet1:br-phy``)."""
    d = ovn.chassis_dir(dc.STATE, hv)
    d.mkdir(parents=True, exist_ok=True)
    svc = _svc([hv])
    if hv not in dc.netns_list():
        dc.sh(["ip", "netns", "add", hv])
        dc.sh(["ip", "-n", hv, "link", "set", "lo", "up"])
    host_end, hv_end = f"dchv{k}h", f"dchv{k}p"
    if not dc.link_exists(host_end):
        dc.sh(["ip", "link", "add", host_end, "type", "veth", "peer", "name", hv_end])
        dc.sh(["ip", "link", "set", hv_end, "netns", hv])
        dc.sh(["ip", "link", "set", host_end, "master", bridge])
        ovn.checksum_offload_off(host_end)
        ovn.checksum_offload_off(hv_end, hv)
        dc.sh(["ip", "link", "set", host_end, "up"])
        dc.sh(["ip", "-n", hv, "link", "set", hv_end, "up"])
    if not (d / "conf.db").exists():
        dc.sh(["ovsdb-tool", "create", str(d / "conf.db"), str(OVS_SCHEMA)], quiet=True)
    start(*svc[f"ovsdb-{hv}"])
    dc.wait_for(f"ovsdb-server of {hv}", lambda: alive_or_die(f"ovsdb-{hv}") and (d / "db.sock").exists(),
                timeout=30, interval=0.1)
    underlay = f"{ovn.UNDERLAY_BASE}{1 + k}"
    ovn.vsctl(dc.STATE, hv, "--no-wait", "--", "init", "--", "set", "Open_vSwitch", ".",
              f"external_ids:system-id={hv}", f"external_ids:hostname={hv}",
              f"external_ids:ovn-remote=unix:{ovn.sb_socket(dc.STATE)}", "external_ids:ovn-encap-type=geneve",
              f"external_ids:ovn-encap-ip={underlay}", f"external_ids:ovn-bridge-mappings={ovn.PHYSNET}:br-phy",
              "external_ids:ovn-bridge-datapath-type=netdev")
    start(*svc[f"ovs-vswitchd-{hv}"])
    ovn.vsctl(dc.STATE, hv, "--may-exist", "add-br", "br-phy", "--", "set", "Bridge", "br-phy", "datapath_type=netdev",
              "--", "--may-exist", "add-port", "br-phy", hv_end)
    addrs = dc.sh(["ip", "-n", hv, "-o", "addr", "show", "dev", "br-phy"], quiet=True).stdout
    if f" {underlay}/" not in addrs:
        dc.sh(["ip", "-n", hv, "addr", "add", f"{underlay}/{ovn.VM_NET_PREFIXLEN}", "dev", "br-phy"])
    dc.sh(["ip", "-n", hv, "link", "set", "br-phy", "up"])
    start(*svc[f"ovn-controller-{hv}"])


def registered() -> set[str]:
    """Chassis the Southbound database knows (what Neutron's OVN driver binds ports to)."""
    res = subprocess.run(["ovn-sbctl", f"--db=unix:{ovn.sb_socket(dc.STATE)}", "--timeout=5", "--bare",
                          "--columns=hostname", "list", "Chassis"], capture_output=True, text=True)
    return {line.strip() for line in res.stdout.splitlines() if line.strip()} if res.returncode == 0 else set()


def up(bridge: str, hypervisors: list[str]) -> None:
    """MariaDB, OVN central and one chassis per hypervisor (the neutron API is started by
    novacloud with the other APIs once its database is migrated)."""
    started = time.monotonic()
    mariadb_up()
    central_up()
    for k, hv in enumerate(hypervisors, 1):
        chassis_up(k, hv, bridge)
    want = set(hypervisors)
    dc.wait_for(f"OVN chassis {sorted(want)} registered (see .devcloud/logs/ovn-controller-*.log)",
                lambda: all(alive_or_die(f"ovn-controller-{hv}") for hv in want) and want <= registered(),
                timeout=60, interval=0.2)
    mariadb_ready()
    dc.log(f"neutron data plane up in {time.monotonic() - started:.1f} s: MariaDB, OVN central, "
           f"{len(want)} chassis")


def down(hypervisors: list[str]) -> None:
    """Every process, the hypervisors' namespaces and veths, the OVN databases; the neutron
    database is dropped (MariaDB's data dir stays, like PostgreSQL's)."""
    if running("mariadb", f"--datadir={MARIADB_DIR}"):
        mariadb("DROP DATABASE IF EXISTS neutron", check=False)
    dc.stop_services([(name, marker) for name, _, marker in services(hypervisors)], 15)
    for k, hv in enumerate(hypervisors, 1):
        if dc.link_exists(f"dchv{k}h"):
            dc.sh(["ip", "link", "del", f"dchv{k}h"], check=False)
        if hv in dc.netns_list():
            dc.sh(["ip", "netns", "del", hv], check=False)
    shutil.rmtree(dc.STATE / "ovn", ignore_errors=True)


def status(hypervisors: list[str]) -> dict[str, bool]:
    return {name: running(name, marker) for name, _, marker in services(hypervisors)}
