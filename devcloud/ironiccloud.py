"""The devcloud's Ironic: the real Ironic service (standalone, fake hardware) over our node agent,
its PostgreSQL database, the nodes enrolled in two pools, their hosts (network namespaces, veths,
the shaped links), the forwarding between them, the sshd knobs, and clouds.yaml. Beside
novacloud, neutroncloud and magnumcloud; devcloud.py is the command line over all of them
(docs/devcloud.md is the contract). Standard library only."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import machine  # devcloud/machine.py, next to this file
from common import (  # devcloud/common.py: what every part shares
    API,
    API_PORT,
    LOGS,
    PG_PORT,
    ROOT,
    RUN,
    STATE,
    VENV,
    api,
    api_ready,
    link_exists,
    log,
    machine_status,
    netns_list,
    pg_running,
    pid_alive,
    sh,
    spawn,
    stop_pid,
    wait_for,
)

CLOUD = "devcloud"
NODE_PREFIX = "devcloud-node-"
RESOURCE_CLASS = "dlbench-bm"
SECOND_POOL_CLASS = "dlbench-bm-2"
"""The resource class of the second node pool (``DEVCLOUD_SECOND_POOL`` nodes after the first
``DEVCLOUD_NODES``): what allocates from one pool never takes a node of the other, so two test
streams can deploy at the same time without waiting for each other's nodes (docs/testing.md)."""
BASE_TRAIT = "CUSTOM_DLBENCH_TEST"
GPU_TRAIT = "CUSTOM_GPU_FAKE"
MAX_NODES = 50
DEPLOY_CALLBACK_TIMEOUT = 8
"""Seconds a ``deploy-fail`` node waits for its (absent) agent before Ironic fails the deploy."""
SHAPE_RATE = "1gbit"
"""The study's testbed link speed; both ends of every veth are shaped to it."""
BENCH_NET = "198.18.0.0/15"
"""The benchmarking range: nodes (198.18.<i>.0/24) and their dockerd bridges (198.19.<i>.0/24)."""
FORWARD_RULE = ["-i", "dc+", "-o", "dc+", "-s", BENCH_NET, "-d", BENCH_NET, "-m", "comment", "--comment",
                "devcloud", "-j", "ACCEPT"]
"""Node <-> node traffic through this host (Docker sets the FORWARD policy to DROP)."""








# --- processes -------------------------------------------------------------------------------









# --- PostgreSQL ------------------------------------------------------------------------------













# --- Ironic ----------------------------------------------------------------------------------





DEFAULT_DEPLOY_DELAY = "1,2"
"""Ironic's [fake] deploy_delay: whole seconds "min,max" per fake deploy step."""
IRONIC_CLEAN = os.environ.get("DEVCLOUD_IRONIC_CLEAN", "1") != "0"
"""Knob DEVCLOUD_IRONIC_CLEAN=1|0: Ironic's automated cleaning after every undeploy (on by default:
a production Ironic cleans, and what a release and the next allocation do then must be tested)."""
IRONIC_CLEAN_DELAY = os.environ.get("DEVCLOUD_IRONIC_CLEAN_DELAY", "2,4")
"""Knob DEVCLOUD_IRONIC_CLEAN_DELAY="min,max" whole seconds one cleaning takes (the fake clean step's
sleep, triangular towards min: "2,4" averages 2.7 s). Long enough that a run started right after
another's release really waits for cleaning, short enough for ~15 back-to-back Ironic DAG runs."""


def clean_delay_arg(value: str) -> str:
    """``value`` checked as Ironic's "min,max" whole seconds (a typo fails ``up``, not every cleaning)."""
    parts = value.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts) or int(parts[0]) > int(parts[1]):
        raise SystemExit(f"devcloud: DEVCLOUD_IRONIC_CLEAN_DELAY must be \"min,max\" whole seconds, not {value!r}")
    return f"{int(parts[0])},{int(parts[1])}"


def render_conf() -> Path:
    conf = STATE / "ironic.conf"
    for d in (LOGS, STATE / "tmp", STATE / "locks"):
        d.mkdir(parents=True, exist_ok=True)
    slow = RUN / "deploy_delay"  # knob slow-deploy: a slower Ironic (fake deploy steps take longer)
    slow_clean = RUN / "clean_delay"  # knob slow-clean: longer cleanings (until `fault reset`)
    text = (ROOT / "devcloud" / "ironic.conf.tmpl").read_text().format(
        logs=LOGS, state=STATE, api_port=API_PORT, pg_port=PG_PORT,
        deploy_callback_timeout=DEPLOY_CALLBACK_TIMEOUT,
        deploy_delay=slow.read_text().strip() if slow.exists() else DEFAULT_DEPLOY_DELAY,
        automated_clean=str(IRONIC_CLEAN).lower(),
        clean_delay=slow_clean.read_text().strip() if slow_clean.exists() else clean_delay_arg(IRONIC_CLEAN_DELAY))
    conf.write_text(text)
    return conf


def ironic_up(new_db: bool) -> None:
    conf = render_conf()
    if new_db:
        sh([str(VENV / "bin" / "ironic-dbsync"), "--config-file", str(conf), "create_schema"])
    if not pid_alive("ironic", "ironic"):
        if api_ready():
            raise SystemExit(f"devcloud: something else already serves {API}; stop it first")
        spawn("ironic", [str(VENV / "bin" / "ironic"), "--config-file", str(conf)])
    wait_for(f"the Ironic API on {API} (see {LOGS}/ironic.log)", api_ready, timeout=60, interval=0.2)


def ironic_down() -> None:
    pid = pid_alive("ironic", "ironic")
    if pid:
        stop_pid(pid)
    (RUN / "ironic.pid").unlink(missing_ok=True)


def recover_node(i: int, timeout: float = 120) -> None:
    """What an operator does for a ``clean failed`` node: manage it, give it the fake deploy
    interface back (the clean-fail knob's custom-agent never cleans), provide it: Ironic cleans it
    again and it becomes ``available``."""
    name = node_name(i)

    def state() -> str:
        return str(api("GET", f"/v1/nodes/{name}")["provision_state"])

    if state() == "clean failed":
        api("PUT", f"/v1/nodes/{name}/states/provision", {"target": "manage"})
        wait_for(f"{name} manageable", lambda: state() == "manageable", timeout=timeout, interval=0.2)
    api("PATCH", f"/v1/nodes/{name}", [{"op": "replace", "path": "/deploy_interface", "value": "fake"},
                                       {"op": "replace", "path": "/automated_clean", "value": None}])
    api("PUT", f"/v1/nodes/{name}/states/provision", {"target": "provide"})
    wait_for(f"{name} cleaned and available", lambda: state() == "available", timeout=timeout, interval=0.2)


TRANSIENT_STATES = {"deploying", "deleting", "cleaning", "clean wait", "wait call-back"}
"""States a conductor restart cannot resume: Ironic fails such a node when it starts again."""


def transient_nodes() -> list[str]:
    """``<name> <state>`` of every node (any pool) in a state a conductor restart cannot resume."""
    nodes = api("GET", "/v1/nodes?fields=name,provision_state")["nodes"]
    return [f"{n['name']} {n['provision_state']}" for n in nodes if n["provision_state"] in TRANSIENT_STATES]


def settle(timeout: float) -> None:
    """Wait until no node is in a transient state (no-op when Ironic does not answer): a stopped
    conductor fails such a node when it starts again (with cleaning on, an undeploy goes on for
    seconds of cleaning after a run's release returned)."""
    try:
        wait_for("no node deploying or cleaning", lambda: not transient_nodes(), timeout=timeout, interval=0.5)
    except (OSError, ValueError):
        return
    except SystemExit as exc:
        raise SystemExit(f"{exc} (still: {', '.join(transient_nodes())})") from None


SETTLE_S = 180
"""How long the ``settle`` knob and a restart wait for every node to leave its transient state: a
cleaning takes 2-4 s (``DEVCLOUD_IRONIC_CLEAN_DELAY``) and a deploy a few more, longer on a loaded
machine."""


def ironic_restart(timeout: float = SETTLE_S) -> None:
    """Restart Ironic (a new configuration) once no node deploys or cleans (:func:`settle`)."""
    settle(timeout)
    ironic_down()
    ironic_up(new_db=False)


# --- nodes -----------------------------------------------------------------------------------

def node_name(i: int) -> str:
    return f"{NODE_PREFIX}{i}"


def host_address(i: int) -> str:
    return f"198.18.{i}.2"


def get_node(name: str) -> dict[str, Any] | None:
    try:
        return api("GET", f"/v1/nodes/{name}")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def create_node(i: int, resource_class: str) -> None:
    """Enroll node i with its port, traits and the test-host address in ``extra``."""
    name = node_name(i)
    node = api("POST", "/v1/nodes", {
        "name": name, "driver": "fake-hardware", "resource_class": resource_class,
        "boot_interface": "fake", "deploy_interface": "fake", "power_interface": "fake",
        "management_interface": "fake", "network_interface": "noop", "inspect_interface": "fake",
        "properties": {"cpus": 2, "memory_mb": 4096, "local_gb": 20, "cpu_arch": "x86_64"},
        "extra": {"test_host_address": host_address(i), "devcloud_netns": name},
    })
    traits = [BASE_TRAIT] + ([GPU_TRAIT] if i == 1 else [])
    api("PUT", f"/v1/nodes/{name}/traits", {"traits": traits})
    api("POST", "/v1/ports", {"node_uuid": node["uuid"], "address": f"52:54:00:c6:12:{i:02x}"})


def set_states(names: Iterable[str], kind: str, target: str, until: Callable[[dict[str, Any]], bool],
               timeout: float = 60) -> None:
    """Ask every node for ``target`` at once, then wait for all: parallel fake delays, fast up."""
    names = list(names)
    for name in names:
        api("PUT", f"/v1/nodes/{name}/states/{kind}", {"target": target})

    def done() -> bool:
        nodes = [api("GET", f"/v1/nodes/{n}") for n in names]
        failed = [n for n in nodes if n.get("last_error") and n.get("provision_state") in ("enroll", "manageable")
                  and kind == "provision"]
        if failed:
            raise SystemExit(f"devcloud: {target} failed: {[(n['name'], n['last_error']) for n in failed]}")
        return all(until(n) and not n.get("target_provision_state") and not n.get("target_power_state")
                   for n in nodes)

    wait_for(f"{kind} {target} on {names}", done, timeout=timeout, interval=0.2)


def pool_of(i: int, count: int) -> str:
    """Node i's resource class: the first ``count`` nodes are the main pool, the rest the second."""
    return RESOURCE_CLASS if i <= count else SECOND_POOL_CLASS


def nodes_up(count: int, second: int) -> None:
    new = []
    for i in range(1, count + second + 1):
        node = get_node(node_name(i))
        if node is None:
            create_node(i, pool_of(i, count))
            new.append(node_name(i))
        elif node["resource_class"] != pool_of(i, count):
            raise SystemExit(f"devcloud: {node_name(i)} is in resource class {node['resource_class']}, but "
                             f"DEVCLOUD_NODES={count} puts it in {pool_of(i, count)}: run `make devcloud-down` "
                             "first to change the pools")
    if not new:
        return
    set_states(new, "provision", "manage", lambda n: n["provision_state"] == "manageable")
    # Known fact: allocations skip a node whose power state is unknown.
    set_states(new, "power", "power off", lambda n: n["power_state"] == "power off")
    set_states(new, "provision", "provide", lambda n: n["provision_state"] == "available")
    log(f"enrolled {len(new)} node(s): {', '.join(new)}")


# --- node networks ---------------------------------------------------------------------------





def host_up(i: int) -> None:
    """Namespace + shaped veth for node i (its machine boots on deploy); each step skipped when
    already in place."""
    ns, host_dev, ns_dev = node_name(i), f"dc{i}h", f"dc{i}n"
    if ns not in netns_list():
        sh(["ip", "netns", "add", ns])
    if not link_exists(host_dev):
        if link_exists(ns_dev, ns):  # half-made: start over
            sh(["ip", "-n", ns, "link", "del", ns_dev], check=False)
        sh(["ip", "link", "add", host_dev, "type", "veth", "peer", "name", ns_dev])
        sh(["ip", "link", "set", ns_dev, "netns", ns])
        sh(["ip", "addr", "add", f"198.18.{i}.1/24", "dev", host_dev])
        sh(["ip", "-n", ns, "addr", "add", f"{host_address(i)}/24", "dev", ns_dev])
    sh(["ip", "link", "set", host_dev, "up"])
    sh(["ip", "-n", ns, "link", "set", ns_dev, "up"])
    sh(["ip", "-n", ns, "link", "set", "lo", "up"])
    # Other nodes (198.18.<j>.2) are reached through this machine (forwarding rules below).
    sh(["ip", "-n", ns, "route", "replace", "default", "via", f"198.18.{i}.1"])
    if not link_exists(ns_dev, ns) or sh(["ip", "-n", ns, "-br", "addr", "show", ns_dev], quiet=True).stdout.find(
            host_address(i)) < 0:
        raise SystemExit(f"devcloud: {ns_dev} in {ns} has no {host_address(i)}")
    tbf = ["root", "tbf", "rate", SHAPE_RATE, "burst", "256kb", "latency", "50ms"]
    sh(["tc", "qdisc", "replace", "dev", host_dev, *tbf])
    sh(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", ns_dev, *tbf])
    node_dir = STATE / "nodes" / str(i)
    node_dir.mkdir(parents=True, exist_ok=True)
    keys = node_dir / "authorized_keys"
    if not keys.exists():
        keys.write_text("")
    keys.chmod(0o600)


def host_indexes() -> list[int]:
    """Indexes of every node network that exists (namespaces named devcloud-node-<i>)."""
    return sorted(int(ns[len(NODE_PREFIX):]) for ns in netns_list()
                  if ns.startswith(NODE_PREFIX) and ns[len(NODE_PREFIX):].isdigit())


def host_down(i: int) -> None:
    if link_exists(f"dc{i}h"):
        sh(["ip", "link", "del", f"dc{i}h"], check=False)
    if node_name(i) in netns_list():
        sh(["ip", "netns", "del", node_name(i)], check=False)


def forward_chain() -> str:
    """DOCKER-USER when this host's Docker made it (Docker's own rules come after it), else FORWARD."""
    return "DOCKER-USER" if sh(["iptables", "-S", "DOCKER-USER"], check=False, quiet=True).returncode == 0 \
        else "FORWARD"


def forward_up() -> None:
    """IP forwarding on, and node <-> node traffic accepted (idempotent)."""
    fwd = Path("/proc/sys/net/ipv4/ip_forward")
    if fwd.read_text().strip() != "1":
        (RUN / "ip_forward.orig").write_text(fwd.read_text())
        fwd.write_text("1\n")
    chain = forward_chain()
    if sh(["iptables", "-C", chain, *FORWARD_RULE], check=False, quiet=True).returncode != 0:
        sh(["iptables", "-I", chain, "1", *FORWARD_RULE])


def forward_down() -> None:
    for chain in ("DOCKER-USER", "FORWARD"):
        while sh(["iptables", "-D", chain, *FORWARD_RULE], check=False, quiet=True).returncode == 0:
            pass
    orig = RUN / "ip_forward.orig"
    if orig.exists():
        # Put back what up found, unless Docker (which needs forwarding) has started since.
        if sh(["iptables", "-S", "DOCKER"], check=False, quiet=True).returncode != 0:
            Path("/proc/sys/net/ipv4/ip_forward").write_text(orig.read_text())
        orig.unlink()


# --- machines --------------------------------------------------------------------------------

def machine_indexes() -> list[int]:
    """Nodes that have a machine running or a disk left: from the pid files and node directories."""
    found = set()
    for f in RUN.glob("machine-*.pid") if RUN.exists() else []:
        if f.stem.split("-", 1)[1].isdigit():
            found.add(int(f.stem.split("-", 1)[1]))
    for f in RUN.glob("machine-*.cgroups") if RUN.exists() else []:
        if f.stem.split("-", 1)[1].isdigit():
            found.add(int(f.stem.split("-", 1)[1]))
    for d in (STATE / "nodes").iterdir() if (STATE / "nodes").exists() else []:
        if d.name.isdigit():
            found.add(int(d.name))
    return sorted(found)








def legacy_sshd_down() -> None:
    """sshd processes of a devcloud from before machines (pid files run/sshd-<i>.pid)."""
    for pidfile in RUN.glob("sshd-*.pid") if RUN.exists() else []:
        pid = pid_alive(pidfile.stem, "sshd")
        if pid:
            stop_pid(pid, timeout=3)
        pidfile.unlink(missing_ok=True)


# --- node agent, clouds.yaml -----------------------------------------------------------------

def nodeagent_up() -> None:
    if pid_alive("nodeagent", "nodeagent.py"):
        return
    spawn("nodeagent", [str(VENV / "bin" / "python"), str(ROOT / "devcloud" / "nodeagent.py"),
                        "--state", str(STATE), "--pg-port", str(PG_PORT)])
    wait_for("the node agent", lambda: (RUN / "nodeagent.ready").exists(), timeout=20)


def nodeagent_down() -> None:
    for name, marker in (("nodeagent", "nodeagent.py"), ("keyagent", "keyagent.py")):  # keyagent: before machines
        pid = pid_alive(name, marker)
        if pid:
            stop_pid(pid, timeout=5)
        for suffix in (".pid", ".ready"):
            (RUN / f"{name}{suffix}").unlink(missing_ok=True)


def ironic_status() -> None:
    procs = {"postgres": pg_running(), "ironic": bool(pid_alive("ironic", "ironic")),
             "nodeagent": bool(pid_alive("nodeagent", "nodeagent.py"))}
    print("processes: " + ", ".join(f"{k}={'up' if v else 'DOWN'}" for k, v in procs.items()))
    images = machine.images(STATE).items()
    print("images: " + ", ".join(f"{name}={'built' if tar.exists() else 'MISSING'}" for name, tar in images))
    try:
        nodes = api("GET", "/v1/nodes/detail", timeout=5)["nodes"]
    except (OSError, ValueError) as exc:
        print(f"API {API}: not answering ({exc})")
        nodes = [{"name": node_name(i), "provision_state": "?", "power_state": "?", "deploy_interface": "?",
                  "extra": {"test_host_address": host_address(i)}} for i in host_indexes()]
    print(f"{'node':<18} {'provision':<14} {'power':<10} {'deploy_if':<13} {'address':<13} "
          f"{'machine':<8} {'image':<13} {'sshd':<5} {'dockerd':<8} {'keys':<4} allocation / last_error")
    for n in sorted(nodes, key=lambda n: n["name"] or ""):
        i = n["name"][len(NODE_PREFIX):] if (n["name"] or "").startswith(NODE_PREFIX) else "?"
        keys_file = STATE / "nodes" / i / "authorized_keys"
        keys = len(keys_file.read_text().split("\n")) - 1 if keys_file.exists() else 0
        m = machine_status(int(i)) if i.isdigit() else {"machine": "?", "image": "?", "sshd": "?", "dockerd": "?"}
        note = n.get("allocation_uuid") or ""
        if n.get("last_error"):
            note += f" {n['last_error'][:80]}"
        print(f"{n['name']:<18} {n['provision_state']:<14} {str(n['power_state']):<10} "
              f"{n['deploy_interface']:<13} {(n.get('extra') or {}).get('test_host_address', '-'):<13} "
              f"{m['machine']:<8} {m['image']:<13} {m['sshd']:<5} {m['dockerd']:<8} {keys:<4} {note}")
