"""What an access kind does lives on the access types (dlbench.execution.targets), nowhere else.

Two halves: a scan of ``include/dlbench`` that fails when a module other than
``execution/targets.py`` decides something by an access's ``kind`` (a comparison, a ``match``,
a mapping keyed by it), so a new access kind cannot be half-added by string tests spread over the
code; and the answers each access type gives, pinned, so the behaviour the callers relied on when
they compared strings is the behaviour they get from the types.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path
from typing import Any

import pytest

from dlbench.execution.executors import EXECUTORS, executor_for
from dlbench.execution.targets import (
    ACCESS_TYPES,
    Access,
    ContainerLimits,
    GroupLaunch,
    KubernetesAccess,
    LocalDocker,
    LocalProcess,
    NetworkPeer,
    SSHDocker,
    SSHHost,
    Target,
    secret_field_of,
)
from dlbench.workloads.result import Platform

PACKAGE = Path(__file__).resolve().parents[2] / "include" / "dlbench"
HOME = Path("execution/targets.py")
"""The one module allowed to read ``kind`` to decide (it is where the kinds are defined)."""

ACCESS_CLASSES = {"Access", "_Access", "ContainerLimits", *(cls.__name__ for cls in ACCESS_TYPES)}


# -- the scan ------------------------------------------------------------------------------------


def _key(node: ast.expr) -> str | None:
    """The constant string of ``x.get("k")`` / ``x["k"]``, else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        arg = node.args[0]
        return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def _receiver(node: ast.expr) -> ast.expr | None:
    """``x`` of ``x.get(...)`` / ``x[...]``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.value
    return node.value if isinstance(node, ast.Subscript) else None


class _Finder(ast.NodeVisitor):
    """Decisions taken on an access's kind in one module: comparisons, ``match`` subjects, lookups."""

    def __init__(self) -> None:
        self.access_names: set[str] = set()
        self.kind_names: set[str] = set()
        self.found: list[tuple[int, str]] = []

    def is_access(self, node: ast.expr) -> bool:
        if isinstance(node, ast.NamedExpr):
            return self.is_access(node.value)
        if isinstance(node, ast.Attribute):
            return node.attr == "access"
        if isinstance(node, ast.Name):
            return node.id == "access" or node.id.endswith("_access") or node.id in self.access_names
        if isinstance(node, ast.BoolOp):  # target.get("access") or {}
            return any(self.is_access(v) for v in node.values)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and node.args:
            return self.is_access(node.args[0])
        return _key(node) == "access"

    def is_kind(self, node: ast.expr) -> bool:
        if isinstance(node, ast.NamedExpr):
            return self.is_kind(node.value)
        if isinstance(node, ast.Attribute):
            return node.attr == "kind" and self.is_access(node.value)
        if isinstance(node, ast.Name):
            return node.id in self.kind_names
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and node.args:
            return self.is_kind(node.args[0])
        receiver = _receiver(node)
        return _key(node) == "kind" and receiver is not None and self.is_access(receiver)

    def _assigned(self, targets: list[ast.expr], value: ast.expr | None) -> None:
        if value is None:
            return
        for target in targets:
            if isinstance(target, ast.Name):
                if self.is_kind(value):
                    self.kind_names.add(target.id)
                elif self.is_access(value):
                    self.access_names.add(target.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assigned(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assigned([node.target], node.value)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._assigned([node.target], node.value)
        self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> None:  # def f(access: SSHHost): access.kind ...
        if node.annotation is not None and ACCESS_CLASSES & {
                n.id if isinstance(n, ast.Name) else n.value if isinstance(n, ast.Constant) else None
                for n in ast.walk(node.annotation)}:
            self.access_names.add(node.arg)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if any(self.is_kind(side) for side in (node.left, *node.comparators)):
            self.found.append((node.lineno, "compares an access kind"))
        self.generic_visit(node)

    def visit_Match(self, node: ast.Match) -> None:
        if self.is_kind(node.subject):
            self.found.append((node.lineno, "matches on an access kind"))
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if self.is_kind(node.slice):
            self.found.append((node.lineno, "looks something up by an access kind"))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if (isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args
                and self.is_kind(node.args[0])):
            self.found.append((node.lineno, "looks something up by an access kind"))
        self.generic_visit(node)


def kind_decisions(source: str) -> list[tuple[int, str]]:
    """(line, what) for each place ``source`` decides by an access's kind. Two passes: a name
    assigned from ``x.access`` (or from its kind) counts wherever it is used in the module."""
    tree = ast.parse(source)
    finder = _Finder()
    finder.visit(tree)
    names = (set(finder.access_names), set(finder.kind_names))
    finder.found = []
    finder.visit(tree)
    while (finder.access_names, finder.kind_names) != names:  # names assigned from names: settle
        names = (set(finder.access_names), set(finder.kind_names))
        finder.found = []
        finder.visit(tree)
    return sorted(set(finder.found))


def test_no_module_but_targets_decides_by_access_kind() -> None:
    modules = sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE) != HOME)
    assert len(modules) > 50, f"the scan found too few modules under {PACKAGE}"
    offenders = [f"{path.relative_to(PACKAGE.parents[1])}:{line}: {what}"
                 for path in modules for line, what in kind_decisions(path.read_text())]
    assert not offenders, ("decide by the access type, not its `kind` string: ask the access "
                           "(dlbench.execution.targets) the question instead\n" + "\n".join(offenders))


@pytest.mark.parametrize("source", [
    'if target.access.kind == "docker": pass',
    'ok = access.kind in ("ssh", "ssh_docker")',
    'ok = peer.access.kind not in {"ssh"}',
    'kind = ready[0].access.kind\nif kind == "process": pass',
    'access = target.access\nif access.kind != "kubernetes": pass',
    'a = t.access\nb = a\nok = b.kind == "ssh"',
    'def f(x: SSHHost | None) -> None:\n    return x.kind == "ssh"',
    'def f(x: "KubernetesAccess") -> None:\n    return x.kind == "kubernetes"',
    'ok = target.access.kind == other.access.kind',
    'FIELDS = {"kubernetes": "kubeconfig"}\nfield = FIELDS.get(str(access.get("kind")), "key_path")',
    'field = FIELDS[target["access"]["kind"]]',
    'ok = (target.get("access") or {}).get("kind") == "ssh"',
    'match target.access.kind:\n    case "docker": pass',
    'if (k := t.access.kind) == "docker": pass',
])
def test_the_scan_catches(source: str) -> None:
    assert kind_decisions(source), source


@pytest.mark.parametrize("source", [
    'raise ValueError(f"target {target.name} ({target.access.kind}) runs no container image")',
    'log.info("kind %s", access.kind)',
    'if self.kind == "machine root": pass',  # a workload's environment kind, not an access
    'labels = {"data": train_data.kind}',
    'ok = kind == "connections"',
    'if target.access.runs_in_container: pass',
    'ok = isinstance(access, SSHHost)',
])
def test_the_scan_leaves_alone(source: str) -> None:
    assert not kind_decisions(source), source


# -- the answers ---------------------------------------------------------------------------------


ACCESSES: dict[type, Any] = {
    LocalProcess: LocalProcess(),
    LocalDocker: LocalDocker(image="dlbench:test"),
    SSHHost: SSHHost(address="198.18.1.2", key_path="/nonexistent/key"),
    SSHDocker: SSHDocker(address="198.18.1.2", key_path="/nonexistent/key", image="dlbench:test"),
    KubernetesAccess: KubernetesAccess(image="dlbench:test", namespace="dlbench-run"),
}

# kind: runs_in_container, runs_on_this_host, takes_cpuset, group_launch, network_peer, executor, secret field
EXPECTED: dict[str, tuple[bool, bool, bool, GroupLaunch, NetworkPeer, str, str]] = {
    "process": (False, True, False, GroupLaunch.LOCAL_PROCESSES, NetworkPeer.LOOPBACK, "LocalProcessExecutor",
                "key_path"),
    "docker": (True, True, True, GroupLaunch.ENGINE_NETWORK, NetworkPeer.ENGINE_BRIDGE, "DockerExecutor", "key_path"),
    "ssh": (False, False, False, GroupLaunch.INSTANCES, NetworkPeer.INSTANCE, "SSHExecutor", "key_path"),
    "ssh_docker": (True, False, True, GroupLaunch.PUBLISHED_INSTANCES, NetworkPeer.INSTANCE, "SSHExecutor",
                   "key_path"),
    "kubernetes": (True, False, False, GroupLaunch.INSTANCES, NetworkPeer.POD, "KubernetesExecutor", "kubeconfig"),
}
"""What the callers decided from the kind strings before they asked the types (the same table)."""


def test_every_access_kind_is_listed_once() -> None:
    union = typing.get_args(typing.get_args(Access)[0])
    assert ACCESS_TYPES == union
    assert set(ACCESSES) == set(ACCESS_TYPES)
    assert sorted(a.kind for a in ACCESSES.values()) == sorted(EXPECTED)


@pytest.mark.parametrize("cls", ACCESS_TYPES, ids=lambda c: c.__name__)
def test_each_access_type_answers(cls: type) -> None:
    access = ACCESSES[cls]
    in_container, this_host, cpuset, launch, peer, executor, secret = EXPECTED[access.kind]
    assert access.runs_in_container is in_container
    assert access.runs_on_this_host is this_host
    assert access.takes_cpuset is cpuset
    assert access.group_launch is launch
    assert access.network_peer is peer
    assert secret_field_of(access.model_dump(mode="json")) == secret
    target = Target.from_xcom({"name": "t", "platform": "bare_metal", "access": access.model_dump(mode="json")})
    assert type(target.access) is cls
    assert target.runtime == ("docker" if in_container else "host")
    assert type(executor_for(target)).__name__ == executor


def test_executors_carry_what_the_access_says() -> None:
    """The process executor's interpreter and the docker executor's image come from the access."""
    def on(access: Any) -> Any:
        return executor_for(Target(name="t", platform=Platform.BARE_METAL, access=access))

    process: Any = on(LocalProcess(python="/opt/py/bin/python3"))
    docker: Any = on(LocalDocker(image="dlbench:other"))
    assert (process.given.python, docker.image) == ("/opt/py/bin/python3", "dlbench:other")


def test_secret_field_of_an_unknown_or_missing_kind_is_the_ssh_key() -> None:
    assert secret_field_of({}) == "key_path"
    assert secret_field_of({"kind": "something-new"}) == "key_path"
    assert secret_field_of({"kind": None}) == "key_path"


def test_every_access_type_has_an_executor() -> None:
    assert set(EXECUTORS) == set(ACCESS_TYPES)


def test_an_access_type_must_answer_every_question() -> None:
    """The questions without a default are abstract: a new access type that forgets one cannot be
    made (here: the limits alone, which are not a kind)."""
    with pytest.raises(TypeError, match="abstract"):
        ContainerLimits()  # type: ignore[abstract]


def test_the_serialised_form_is_unchanged() -> None:
    """The questions are properties, not fields: XCom carries what it carried before."""
    assert LocalProcess().model_dump(mode="json") == {"gpus": None, "kind": "process", "python": None}
    assert set(SSHDocker.model_fields) == {*SSHHost.model_fields, *ContainerLimits.model_fields, "image", "engine"}


@pytest.mark.parametrize("cls", ACCESS_TYPES, ids=lambda c: c.__name__)
def test_machine_facts_are_the_access_types_answers(cls: type) -> None:
    """Where other instances reach a target and how many CPUs its machine has (the shared
    scenario halves them) are answers of the types, not isinstance tests in the scenario code:
    an SSH machine's address is its access's unless the target names one; a machine of this host
    has os.cpu_count(); an access that neither runs here nor reaches its machine refuses to guess.
    (An SSH machine's ``nproc`` runs on the devcloud: tests/ironic, the shared scenario.)"""
    import os

    from dlbench.errors import ExecutionError
    from dlbench.execution.targets import Target

    access = ACCESSES[cls]
    target = Target(name="t", platform="bare_metal", access=access)
    if isinstance(access, SSHHost):
        assert target.reach_address == "198.18.1.2"
    else:
        with pytest.raises(ExecutionError, match="t has no address other instances reach"):
            _ = target.reach_address
    assert Target(name="t", platform="bare_metal", access=access, address="198.18.9.9").reach_address == "198.18.9.9"
    if access.runs_on_this_host:
        assert access.machine_cpus() == (os.cpu_count() or 1)
    elif not isinstance(access, SSHHost):
        with pytest.raises(ExecutionError, match="the CPU count of its machine is not known"):
            access.machine_cpus()
