#!/usr/bin/env python3
"""The devcloud: a real Ironic (standalone, fake hardware) whose nodes are machines on this host.

``python3 devcloud/devcloud.py up|down|status|fault <knob> [i]`` (the make targets in
mk/devcloud.mk call it). The contract it implements (endpoint, names, addresses, keys, images,
knobs) is docs/devcloud.md; change both together. A node's machine (own root filesystem from an
image, own namespaces, sshd, dockerd) is devcloud/machine.py; the node agent
(devcloud/nodeagent.py) boots it when Ironic deploys the node and stops it on undeploy.

Standard library only, so ``down`` and ``status`` work even when the devcloud venv is broken.
Everything it makes lives under ``.devcloud/`` or is named ``devcloud-node-<i>`` / ``dc<i>h`` /
``dc<i>n`` (namespaces, veths, cgroups) or carries the iptables comment ``devcloud``, so ``down``
removes exactly what ``up`` made.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import k8s_control  # devcloud/k8s_control.py: the Kubernetes control planes (docs/kubernetes.md)
import machine  # devcloud/machine.py, next to this file
import novacloud  # devcloud/novacloud.py: Keystone, Nova, Glance... (docs/devcloud-nova.md)
from common import (  # devcloud/common.py: what every part shares
    API,
    RUN,
    STATE,
    VENV,
    api,
    api_ready,
    children,
    log,
    pg_down,
    pg_up,
    pid_alive,
    sh,
    ssh_down,
    ssh_up,
    stop_pid,
    wait_for,
)
from ironiccloud import (
    CLOUD,
    MAX_NODES,
    RESOURCE_CLASS,
    SECOND_POOL_CLASS,
    SETTLE_S,
    forward_down,
    forward_up,
    get_node,
    host_down,
    host_indexes,
    host_up,
    ironic_down,
    ironic_restart,
    ironic_status,
    ironic_up,
    legacy_sshd_down,
    machine_indexes,
    node_name,
    nodeagent_down,
    nodeagent_up,
    nodes_up,
    recover_node,
    settle,
)


def write_clouds_yaml() -> Path:
    path = STATE / "clouds.yaml"
    text = f"""# Written by devcloud/devcloud.py up (docs/devcloud.md, docs/devcloud-nova.md).
clouds:
  {CLOUD}:
    auth_type: none
    baremetal_endpoint_override: {API}
"""
    if novacloud.enabled():
        for cloud, user, password, project in (("devcloud-nova", "dlbench", novacloud.USER_PASSWORD, "dlbench"),
                                               ("devcloud-admin", "admin", novacloud.ADMIN_PASSWORD, "admin")):
            text += f"""  {cloud}:
    auth_type: password
    auth:
      auth_url: {novacloud.KEYSTONE_URL}
      username: {user}
      password: {password}
      project_name: {project}
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    interface: public
    identity_api_version: 3
"""
    path.write_text(text)
    return path


def magnum() -> Any:
    """devcloud/magnumcloud.py (Magnum API + conductor, docs/magnum.md), imported on first use: a
    devcloud brought up without Magnum never loads it."""
    import magnumcloud

    return magnumcloud


# --- commands --------------------------------------------------------------------------------

def node_counts() -> tuple[int, int]:
    """(``DEVCLOUD_NODES``, default 3: the main pool; ``DEVCLOUD_SECOND_POOL``, default 2: the
    second pool's nodes, numbered after the main pool's)."""
    counts = []
    for var, default, low in (("DEVCLOUD_NODES", "3", 1), ("DEVCLOUD_SECOND_POOL", "2", 0)):
        raw = os.environ.get(var, default)
        try:
            counts.append(int(raw))
        except ValueError:
            counts.append(-1)
        if not low <= counts[-1] <= MAX_NODES:
            raise SystemExit(f"devcloud: {var} must be an integer from {low} to {MAX_NODES}, got {raw!r}")
    count, second = counts
    if count + second > MAX_NODES:
        raise SystemExit(f"devcloud: DEVCLOUD_NODES + DEVCLOUD_SECOND_POOL must be at most {MAX_NODES}, "
                         f"got {count} + {second}")
    return count, second


def cmd_up(_: argparse.Namespace) -> None:
    count, second = node_counts()
    if os.geteuid() != 0:
        raise SystemExit("devcloud: needs root (network namespaces, veths, tc)")
    if not (VENV / "bin" / "ironic").exists():
        raise SystemExit(f"devcloud: {VENV} has no ironic; run `make devcloud-install` first")
    started = time.monotonic()
    STATE.mkdir(parents=True, exist_ok=True)
    RUN.mkdir(parents=True, exist_ok=True)
    new_db = pg_up()
    ironic_up(new_db)
    legacy_sshd_down()  # a devcloud from before machines: its sshds and key agent
    pid = pid_alive("keyagent", "keyagent.py")
    if pid:
        stop_pid(pid, timeout=5)
    for name in ("keyagent.pid", "keyagent.ready"):
        (RUN / name).unlink(missing_ok=True)
    for i in range(1, count + second + 1):
        host_up(i)
    forward_up()
    nodeagent_up()
    nodes_up(count, second)
    if not machine.images(STATE)[machine.DEFAULT_IMAGE].exists():
        log(f"warning: no {machine.DEFAULT_IMAGE} image: deployed nodes cannot boot until `make devcloud-images`")
    novacloud.up()
    magnum().up()
    clouds = write_clouds_yaml()
    log(f"up in {time.monotonic() - started:.1f} s: {count} node(s) in {RESOURCE_CLASS}, {second} in "
        f"{SECOND_POOL_CLASS}, API {API}, cloud '{CLOUD}'")
    print(f"export OS_CLIENT_CONFIG_FILE={clouds}")


def cmd_down(args: argparse.Namespace) -> None:
    magnum().down()  # first: its clusters' nodes are undeployed through Ironic
    left = k8s_control.sweep()  # control planes whose owner died before stopping them
    if left:
        log(f"stopped {len(left)} leftover Kubernetes control-plane process(es)")
    nodeagent_down()  # first: it would boot machines again
    novacloud.down()
    settle(timeout=60)  # a node stopped mid-cleaning would come back `clean failed`
    ironic_down()
    for i in machine_indexes():
        machine.stop(STATE, i, wipe=True)
        machine.ssh_down_flag(STATE, i).unlink(missing_ok=True)
    legacy_sshd_down()
    for i in host_indexes():
        host_down(i)
    forward_down()
    pg_down(purge=args.purge)
    for name in ("clouds.yaml", "ironic.conf"):
        (STATE / name).unlink(missing_ok=True)
    mounted = [m for m in machine._host_mounts() if m.startswith(str(STATE / "nodes") + "/")]
    if mounted:  # never happens (machines mount only in their own namespaces): never delete through one
        raise SystemExit(f"devcloud: still mounted, not deleting {STATE / 'nodes'}: {mounted}")
    shutil.rmtree(STATE / "nodes", ignore_errors=True)
    if args.purge:
        for d in ("logs", "run", "tmp", "locks", "ssh"):
            shutil.rmtree(STATE / d, ignore_errors=True)
    log("down" + (" (purged)" if args.purge else ""))




def cmd_status(args: argparse.Namespace) -> None:
    ironic_status()
    novacloud.status()
    magnum().status()


def fault(args: argparse.Namespace) -> None:
    """The knobs fault-injection tests turn (docs/devcloud.md, "Fault knobs")."""
    knob, i = args.knob, args.node
    if knob in magnum().KNOBS:
        magnum().fault(knob, i)
        log(f"fault {knob}{'' if i is None else f' {i}'}: done")
        return
    if knob in novacloud.KNOBS:
        novacloud.fault(knob, i)
        log(f"fault {knob}{'' if i is None else f' {i}'}: done")
        return
    needs_node = {"deploy-fail", "deploy-ok", "clean-fail", "ssh-down", "ssh-up", "link-down", "link-up"}
    if knob in needs_node and i not in host_indexes():
        raise SystemExit(f"devcloud: fault {knob} needs the index of an existing node: one of {host_indexes()}")
    if knob == "api-stop":
        ironic_down()
    elif knob == "api-kill":
        pid = pid_alive("ironic", "ironic")
        for p in [pid, *children(pid)] if pid else []:
            os.kill(p, signal.SIGKILL)
        wait_for("ironic to die", lambda: not api_ready(), timeout=10)
        (RUN / "ironic.pid").unlink(missing_ok=True)
    elif knob == "api-start":
        ironic_up(new_db=False)
    elif knob in ("api-freeze", "api-thaw"):
        pid = pid_alive("ironic", "ironic")
        if not pid:
            raise SystemExit("devcloud: ironic is not running")
        for p in [pid, *children(pid)]:
            os.kill(p, signal.SIGSTOP if knob == "api-freeze" else signal.SIGCONT)
    elif knob in ("deploy-fail", "deploy-ok"):
        # custom-agent would also make the node's cleaning wait for the absent agent (that is the
        # clean-fail knob): a deploy-fail node skips automated cleaning (Ironic's per-node field),
        # so its undeploy still ends `available`; deploy-ok gives it the configured cleaning back.
        fail = knob == "deploy-fail"
        api("PATCH", f"/v1/nodes/{node_name(i)}", [
            {"op": "replace", "path": "/deploy_interface", "value": "custom-agent" if fail else "fake"},
            {"op": "replace", "path": "/automated_clean", "value": False if fail else None}])
    elif knob == "ssh-down":
        ssh_down(i)
    elif knob == "ssh-up":
        ssh_up(i)
    elif knob in ("link-down", "link-up"):
        sh(["ip", "link", "set", f"dc{i}h", "down" if knob == "link-down" else "up"])
    elif knob == "slow-deploy":
        if i is None or not 1 <= i <= 120:
            raise SystemExit("devcloud: fault slow-deploy needs the extra seconds per deploy step (1..120)")
        (RUN / "deploy_delay").write_text(f"{i},{i + 1}\n")
        ironic_restart()
    elif knob == "slow-clean":
        if i is None or not 1 <= i <= 600:
            raise SystemExit("devcloud: fault slow-clean needs the seconds one cleaning takes (1..600)")
        (RUN / "clean_delay").write_text(f"{i},{i + 1}\n")
        ironic_restart()
    elif knob == "clean-fail":
        # Real Ironic behaviour: with the custom-agent deploy interface a cleaning boots the (absent)
        # agent and waits in `clean wait` until clean_callback_timeout, then `clean failed`. An
        # interface may change on a deployed node only in maintenance: in and out of it around.
        name = node_name(i)
        api("PATCH", f"/v1/nodes/{name}", [{"op": "replace", "path": "/maintenance", "value": True}])
        api("PATCH", f"/v1/nodes/{name}", [{"op": "replace", "path": "/deploy_interface", "value": "custom-agent"},
                                           {"op": "replace", "path": "/automated_clean", "value": None}])
        api("PATCH", f"/v1/nodes/{name}", [{"op": "replace", "path": "/maintenance", "value": False}])
    elif knob == "settle":
        if i is not None and not 1 <= i <= 600:
            raise SystemExit("devcloud: fault settle takes the seconds it may wait (1..600), or nothing")
        settle(SETTLE_S if i is None else i)
    elif knob == "reset":
        slow = [f for f in (RUN / "deploy_delay", RUN / "clean_delay") if f.exists()]
        for f in slow:  # back to the normal speed (restarts the API, ~2.5 s)
            f.unlink()
        if slow:
            ironic_restart()
        if pid_alive("ironic", "ironic"):
            fault(argparse.Namespace(knob="api-thaw", node=None))
        else:
            ironic_up(new_db=False)
        for j in host_indexes():
            sh(["ip", "link", "set", f"dc{j}h", "up"])
            ssh_up(j)
            node = get_node(node_name(j))
            if node and node["provision_state"] in ("clean failed", "manageable"):
                recover_node(j)  # clean-fail, or a restart mid-cleaning
                node = get_node(node_name(j))
            if node and (node["deploy_interface"] != "fake" or node.get("automated_clean") is not None):
                fault(argparse.Namespace(knob="deploy-ok", node=j))
        if novacloud.enabled() and novacloud.installed() and pid_alive("keystone", "wsgirun.py keystone"):
            novacloud.fault("nova-reset", None)
        if magnum().enabled() and magnum().installed():
            magnum().fault("magnum-reset", None)
    log(f"fault {knob}{'' if i is None else f' node {i}'}: done")


KNOBS = ["api-stop", "api-kill", "api-start", "api-freeze", "api-thaw", "deploy-fail", "deploy-ok",
         "ssh-down", "ssh-up", "link-down", "link-up", "slow-deploy", "slow-clean", "clean-fail", "settle", "reset"]


def main(argv: list[str] | None = None) -> None:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `devcloud status | head` is not an error
    parser = argparse.ArgumentParser(prog="devcloud", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="bring the devcloud up (idempotent); DEVCLOUD_NODES=N").set_defaults(func=cmd_up)
    down = sub.add_parser("down", help="remove everything up made")
    down.add_argument("--purge", action="store_true", default=os.environ.get("DEVCLOUD_PURGE") == "1",
                      help="also delete the PostgreSQL cluster and logs (images are kept)")
    down.set_defaults(func=cmd_down)
    sub.add_parser("status", help="processes and nodes").set_defaults(func=cmd_status)
    sub.add_parser("nova-up", help="only the Nova part (the rest must be up)").set_defaults(
        func=lambda _: (novacloud.up(), write_clouds_yaml()))
    sub.add_parser("nova-down", help="only the Nova part").set_defaults(func=lambda _: novacloud.down())
    sub.add_parser("magnum-up", help="only the Magnum part (the Nova part must be up)").set_defaults(
        func=lambda _: magnum().up())
    sub.add_parser("magnum-down", help="only the Magnum part").set_defaults(func=lambda _: magnum().down())
    knob = sub.add_parser("fault", help="fault-injection knobs (docs/devcloud.md)")
    knob.add_argument("knob", choices=KNOBS + novacloud.KNOBS + magnum().KNOBS)
    knob.add_argument("node", nargs="?", type=int, help="node index for per-node knobs")
    knob.set_defaults(func=fault)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    sys.exit(main())
