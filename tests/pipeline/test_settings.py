"""dlbench.settings is the one place that reads the environment, Airflow Variables and Airflow's
configuration: docs/settings.md is its rendering, nothing else reads a setting, each accessor keeps
the precedence and messages the product always had, and a workload gets what it needs of a
setting from its executor, never by importing settings."""

from __future__ import annotations

import ast
import functools
import importlib
import json
from datetime import timedelta
from pathlib import Path

import pytest

from dlbench import settings
from dlbench.hooks import warehouse as warehouse_hook
from dlbench.settings import Kind
from tests.support.prereqs import ROOT
from tools.settings_docs import accessor_path

PACKAGE = ROOT / "include" / "dlbench"
SCANNED = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "dags").glob("*.py"), *(ROOT / "plugins").glob("*.py")])
SETTING_PREFIXES = ("DLBENCH_", "AIRFLOW_VAR_", "AIRFLOW__DLBENCH")


# --- the static guard ----------------------------------------------------------------------------------

def _is_environ(node: ast.expr) -> bool:
    """``os.environ`` or ``environ`` (``from os import environ``)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ")


def _module_file(module: str) -> Path | None:
    """The source of a ``dlbench`` module (None for any other)."""
    if module.split(".")[0] != "dlbench":
        return None
    base = PACKAGE.parent.joinpath(*module.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "text"``, and such names imported from other dlbench modules: what a
    read's key may refer to."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Constant) and isinstance(
                node.value.value, str):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update({t.id: node.value.value for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.ImportFrom) and node.module and _module_file(node.module) is not None:
            theirs = _constants_of(node.module)
            found.update({alias.asname or alias.name: theirs[alias.name] for alias in node.names
                          if alias.name in theirs})
    return found


_IN_PROGRESS: set[str] = set()


@functools.cache
def _constants_of(module: str) -> dict[str, str]:
    """:func:`_constants` of a dlbench module, once per module (an import cycle resolves to nothing)."""
    source = _module_file(module)
    if source is None or module in _IN_PROGRESS:
        return {}
    _IN_PROGRESS.add(module)
    try:
        return _constants(ast.parse(source.read_text()))
    finally:
        _IN_PROGRESS.discard(module)


def _resolve(node: ast.expr, constants: dict[str, str]) -> str | None:
    """The text of a key (a literal, a module constant, ``+`` of those, ``.upper()`` of one); None
    when it cannot be told."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _resolve(node.left, constants), _resolve(node.right, constants)
        return left + right if left is not None and right is not None else None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "upper"
            and not node.args):
        inner = _resolve(node.func.value, constants)
        return inner.upper() if inner is not None else None
    return None


def _owner_name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def setting_reads(source: str) -> list[tuple[int, str]]:
    """(line, what) for every read of the environment, an Airflow Variable or Airflow's
    configuration in ``source``. ``what``: ``env NAME`` (``env ?`` when the key cannot be told),
    ``Variable.get`` or ``conf.get``. Passing the whole environment on (``{**os.environ}``,
    ``dict(os.environ)``) is not a read."""
    tree = ast.parse(source)
    constants = _constants(tree)
    reads: list[tuple[int, str]] = []

    def env(node: ast.AST, key: ast.expr | None) -> None:
        name = _resolve(key, constants) if key is not None else None
        reads.append((node.lineno, f"env {name if name is not None else '?'}"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if func.attr == "get" and _is_environ(func.value):
                env(node, node.args[0] if node.args else None)
            elif func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id == "os":
                env(node, node.args[0] if node.args else None)
            elif func.attr == "get" and _owner_name(func.value).endswith("Variable"):
                reads.append((node.lineno, "Variable.get"))
            elif func.attr.startswith("get") and _owner_name(func.value) == "conf":
                reads.append((node.lineno, "conf.get"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getenv":
            env(node, node.args[0] if node.args else None)
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            env(node, node.slice)
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops) and any(
                _is_environ(c) for c in node.comparators):
            env(node, node.left)
    return sorted(reads)


def _forbidden(what: str, *, workload: bool) -> bool:
    """Whether a module other than settings may not read this."""
    if not what.startswith("env "):
        return True  # Variable.get, conf.get: settings only
    name = what.removeprefix("env ")
    if name == "?":
        return True  # a read nobody can check: name it, or read it through settings
    if workload and name in settings.WORKLOAD_INTERFACE:
        return False  # handed over by the executor (settings.workload_env): the workload's interface
    return name.startswith(SETTING_PREFIXES) or name in settings.declared(Kind.ENV)


def test_the_guard_sees_every_way_of_reading():
    source = '''
import os
from os import environ
ENV = "DLBENCH_X"
a = os.environ.get("DLBENCH_A", "")
b = os.getenv("AIRFLOW_VAR_B")
c = os.environ[ENV]
d = "AIRFLOW__DLBENCH__D" in os.environ
e = environ.get("AIRFLOW_VAR_" + "dlbench_e".upper())
f = Variable.get("dlbench_f", default=None)
g = conf.getint("core", "max_map_length", fallback=1)
h = os.environ.get(some_key)
passed_on = {**os.environ, "X": "1"}
copied = dict(os.environ)
os.environ["TF_CONFIG"] = "{}"
'''
    assert setting_reads(source) == [(5, "env DLBENCH_A"), (6, "env AIRFLOW_VAR_B"), (7, "env DLBENCH_X"),
                                     (8, "env AIRFLOW__DLBENCH__D"), (9, "env AIRFLOW_VAR_DLBENCH_E"),
                                     (10, "Variable.get"), (11, "conf.get"), (12, "env ?")]
    assert not _forbidden("env PATH", workload=False) and _forbidden("env OS_CLIENT_CONFIG_FILE", workload=False)
    assert not _forbidden("env DLBENCH_TRACE_SYSCALLS", workload=True)
    assert _forbidden("env DLBENCH_TRACE_SYSCALLS", workload=False)


def test_only_settings_reads_settings():
    """No module of the product but dlbench.settings reads a dlbench environment variable
    (``DLBENCH_*``, ``AIRFLOW_VAR_*``, ``AIRFLOW__DLBENCH__*`` or any declared one), an Airflow
    Variable or Airflow's configuration. Workloads read only what their executor hands them."""
    found = []
    for path in SCANNED:
        if path == PACKAGE / "settings.py":
            continue
        workload = path.is_relative_to(PACKAGE / "workloads")
        found += [f"{path.relative_to(ROOT).as_posix()}:{line}: {what}"
                  for line, what in setting_reads(path.read_text()) if _forbidden(what, workload=workload)]
    assert not found, "read these through dlbench.settings (declare them there):\n" + "\n".join(found)


def _imports(tree: ast.Module, top_level_only: bool) -> list[str]:
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = []
    for node in nodes:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def test_settings_sits_at_the_bottom_and_imports_airflow_lazily():
    tree = ast.parse((PACKAGE / "settings.py").read_text())
    every = _imports(tree, top_level_only=False)
    ours = {n for n in every if n.split(".")[0] == "dlbench"}
    assert ours <= {"dlbench.errors"} | {n for n in ours if n.startswith("dlbench.errors.")}, ours
    assert not [n for n in _imports(tree, top_level_only=True) if n.split(".")[0] in ("airflow", "sqlalchemy")]


def test_workloads_never_import_settings():
    """They run on the benchmarked machine: what they need of a setting, the executor hands them."""
    offenders = [p.relative_to(ROOT).as_posix() for p in sorted((PACKAGE / "workloads").rglob("*.py"))
                 if any(n == "dlbench.settings" or n.startswith("dlbench.settings.")
                        for n in _imports(ast.parse(p.read_text()), top_level_only=False))]
    assert not offenders


# --- the declarations and docs/settings.md -------------------------------------------------------------

def test_docs_settings_md_is_the_rendering():
    from tools.settings_docs import render_markdown

    rendered = render_markdown()
    assert (ROOT / "docs" / "settings.md").read_text() == rendered, (
        "docs/settings.md differs from dlbench.settings: run "
        "`.venv/bin/python -m tools.settings_docs docs/settings.md`")


def test_every_setting_is_declared_once_with_an_accessor_that_exists():
    names = [s.name for s in settings.SETTINGS]
    assert len(names) == len(set(names))
    keys = [(src.kind, src.key) for s in settings.SETTINGS for src in s.sources]
    assert len(keys) == len(set(keys))
    for setting in settings.SETTINGS:
        assert setting.doc and setting.type and setting.default_doc and setting.read_by and setting.sources
        for accessor in setting.accessors:  # settings' own, or a hook's: the name docs/settings.md prints
            module, _, name = accessor_path(accessor).split("(")[0].rpartition(".")
            assert callable(getattr(importlib.import_module(module), name)), accessor
    for name in ("STORAGE_URL", "WAREHOUSE_URL", "PRICES", "ROUTING"):  # settings.X are the declared ones
        assert getattr(settings, name) in settings.SETTINGS


def test_names_the_workloads_keep_are_the_declared_ones():
    """The workloads cannot import settings, so the names they use are checked equal here."""
    from dlbench.workloads import counters, profiles

    assert profiles.PROFILES_FILE_ENV == settings.PROFILES_FILE.env  # the workload CLI's, and its errors'
    assert settings.WORKLOAD_INTERFACE == (counters.TRACE_SYSCALLS_ENV, profiles.PROFILES_FILE_ENV) == (
        settings.TRACE_SYSCALLS.env, settings.PROFILES_FILE.env)


def test_the_default_expiry_is_one_fact():
    """6 hours, stated once: the Variable's default and what a launch without its run's expiry gets."""
    from dlbench.execution import container
    from dlbench.pipeline import steps
    from dlbench.providers import base

    assert settings.DEFAULT_EXPIRY == timedelta(hours=settings.EXPIRY_HOURS.default) == timedelta(hours=6)
    assert base.DEFAULT_EXPIRY is container.DEFAULT_EXPIRY is steps.DEFAULT_EXPIRY is settings.DEFAULT_EXPIRY
    defined = [p.relative_to(ROOT).as_posix() for p in SCANNED if p != PACKAGE / "settings.py"
               and "DEFAULT_EXPIRY =" in p.read_text()]
    assert not defined


def test_variable_refuses_what_is_not_declared():
    with pytest.raises(KeyError, match="not an Airflow Variable declared"):
        settings.variable("dlbench_something_else")
    with pytest.raises(KeyError):
        settings.variable("dlbench_secret__<run_id>__<name>")


# --- accessors keep the precedence and messages they had ------------------------------------------------

def test_home_storage_and_warehouse_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path))
    monkeypatch.delenv("DLBENCH_STORAGE_URL", raising=False)
    monkeypatch.delenv("DLBENCH_WAREHOUSE_URL", raising=False)
    monkeypatch.setattr(settings, "_variable_cache", {settings.STORAGE_URL.variable: None})
    assert settings.home() == tmp_path
    assert settings.storage_location() == (tmp_path.resolve().as_uri(), "default: DLBENCH_HOME")
    assert settings.warehouse_url() == f"sqlite:///{tmp_path / 'warehouse.db'}"
    monkeypatch.setenv("DLBENCH_STORAGE_URL", "  memory://x  ")
    assert settings.storage_location() == ("memory://x", "env DLBENCH_STORAGE_URL")
    monkeypatch.setenv("DLBENCH_WAREHOUSE_URL", "sqlite:////elsewhere.db")
    assert settings.warehouse_url() == "sqlite:////elsewhere.db"
    assert warehouse_hook.warehouse_location() == ("sqlite:////elsewhere.db",
                                                   "environment variable DLBENCH_WAREHOUSE_URL")
    monkeypatch.delenv("DLBENCH_HOME")
    assert settings.home() == ROOT / "data"  # a checkout


def test_warehouse_connection_urls(monkeypatch, tmp_path):
    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path))
    assert warehouse_hook.url_from_connection("sqlite", "w.db", None, None, None, None, None) == f"sqlite:///{tmp_path}/w.db"
    assert warehouse_hook.url_from_connection("postgres", "h", "u", "p", 5432, "d", {}) == (
        "postgresql+psycopg2://u:p@h:5432/d")
    assert warehouse_hook.url_from_connection("mysql", None, None, None, None, None, {"url": "x://y"}) == "x://y"
    with pytest.raises(ValueError, match="connection dlbench_warehouse: conn_type 'mysql' unsupported; "
                                         "allowed: postgres, sqlite"):
        warehouse_hook.url_from_connection("mysql", None, None, None, None, None, None)


def test_environment_accessors(monkeypatch, tmp_path):
    for name in settings.declared(Kind.ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path))
    assert (settings.secrets_backend(), settings.routing(), settings.host_prices(), settings.machine_lock(),
            settings.base_image(), settings.offline_build(), settings.trace_syscalls(), settings.profiles_file(),
            settings.os_client_config_file(), settings.provision_threads()) == (
        None, None, None, None, None, False, False, None, None, 16)
    assert settings.prices_file() == tmp_path / "prices.yaml"
    assert settings.dags_folder() == str(Path.cwd() / "dags")
    monkeypatch.setenv("DLBENCH_SECRETS", " Memory ")
    monkeypatch.setenv("AIRFLOW__DLBENCH__ROUTING", "")  # set, even empty: it wins over airflow.cfg
    monkeypatch.setenv("AIRFLOW_VAR_DLBENCH_HOST_PRICES", '{"host_hour": {"*": 1}}')
    monkeypatch.setenv("DLBENCH_PRICES_FILE", str(tmp_path / "p.yaml"))
    monkeypatch.setenv("DLBENCH_MACHINE_LOCK", str(tmp_path / "m.lock"))
    monkeypatch.setenv("DLBENCH_BASE_IMAGE", "debian:bookworm")
    monkeypatch.setenv("DLBENCH_OFFLINE_BUILD", "0")  # any non-empty value: as before
    monkeypatch.setenv("DLBENCH_PROFILES_FILE", "  /etc/p.yaml ")
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(tmp_path / "clouds.yaml"))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(tmp_path))
    assert (settings.secrets_backend(), settings.routing(), settings.host_prices(), settings.prices_file(),
            settings.machine_lock(), settings.base_image(), settings.offline_build(), settings.profiles_file(),
            settings.os_client_config_file(), settings.dags_folder()) == (
        "memory", "", '{"host_hour": {"*": 1}}', tmp_path / "p.yaml", tmp_path / "m.lock", "debian:bookworm", True,
        "/etc/p.yaml", tmp_path / "clouds.yaml", str(tmp_path))
    monkeypatch.setenv("DLBENCH_SECRETS", "vault")
    assert settings.secrets_backend() is None  # anything else: automatic


@pytest.mark.parametrize(("raw", "strict", "expected"), [("40", True, 40), (" 7 ", False, 7), ("0", False, 16),
                                                         ("lots", False, 16), ("300", True, None)])
def test_provision_threads(monkeypatch, raw, strict, expected):
    monkeypatch.setenv("DLBENCH_PROVISION_THREADS", raw)
    if expected is None:
        with pytest.raises(ValueError, match=f"DLBENCH_PROVISION_THREADS='{raw}': must be a whole number from 1 to"):
            settings.provision_threads(strict=strict)
    else:
        assert settings.provision_threads(strict=strict) == expected


@pytest.mark.parametrize(("raw", "seconds"), [(None, 30), ("", 30), (" 5 ", 5), ("0", 0), ("3600", 3600),
                                              ("3601", None), ("-1", None), ("soon", None)])
def test_retry_delay(monkeypatch, raw, seconds):
    """The DAG's retry delay: 30 s unless set (the suite sets 1 s in tests/conftest.py); a bad value
    names the option."""
    if raw is None:
        monkeypatch.delenv("AIRFLOW__DLBENCH__RETRY_DELAY_SECONDS", raising=False)
    else:
        monkeypatch.setenv("AIRFLOW__DLBENCH__RETRY_DELAY_SECONDS", raw)
    if seconds is None:
        with pytest.raises(ValueError, match=r"AIRFLOW__DLBENCH__RETRY_DELAY_SECONDS \(\[dlbench\] "
                                             r"retry_delay_seconds\) = .*whole number of seconds from 0 to 3600"):
            settings.retry_delay()
    else:
        assert settings.retry_delay() == timedelta(seconds=seconds)


@pytest.mark.parametrize(("raw", "handed"), [(None, None), ("1", "1"), ("yes", "1"), ("true", "1"), ("0", None),
                                             ("TRUE", None)])
def test_trace_syscalls_reaches_a_local_workload_only_through_settings(monkeypatch, tmp_path, raw, handed):
    """The controller reads the setting; the local executor hands the workload ``DLBENCH_TRACE_SYSCALLS=1``
    exactly when the workload would have traced before (it accepts 1, true, yes)."""
    from dlbench.execution.local import LocalProcessExecutor
    from dlbench.execution.targets import LocalProcess, Target
    from dlbench.jobs import Job

    if raw is None:
        monkeypatch.delenv("DLBENCH_TRACE_SYSCALLS", raising=False)
    else:
        monkeypatch.setenv("DLBENCH_TRACE_SYSCALLS", raw)
    assert settings.workload_env() == ({"DLBENCH_TRACE_SYSCALLS": "1"} if handed else {})
    probe = tmp_path / "probe"
    (probe / "dlbench" / "workloads").mkdir(parents=True)
    (probe / "dlbench" / "__init__.py").write_text("")
    (probe / "dlbench" / "workloads" / "__init__.py").write_text("")
    seen_file = tmp_path / "seen.json"
    (probe / "dlbench" / "workloads" / "__main__.py").write_text(
        f"import json, os\nopen({str(seen_file)!r}, 'w').write(json.dumps(dict(os.environ)))\n")
    monkeypatch.setenv("PYTHONPATH", str(probe))
    job = Job(job_id="f" * 24, run_id="tracetest", platform="bare_metal", suite="cpu", command="cpu", profile="smoke")
    LocalProcessExecutor().execute(job, Target(name="h", platform="bare_metal", access=LocalProcess()),
                                   tmp_path / "archive" / "doc.json", 60)
    assert json.loads(seen_file.read_text()).get("DLBENCH_TRACE_SYSCALLS") == handed
