"""Every setting dlbench reads from outside its code, declared once: name, type, default,
precedence and what it does. docs/settings.md is rendered from these declarations
(``python -m tools.settings_docs docs/settings.md``) and a test fails when they differ.

Why one module: a setting read in several places drifts into several defaults and precedences, and
nobody can list what a deployment may set. So the rest of the product calls the typed accessors
below (:func:`home`, :func:`storage_url`, :func:`warehouse_url`, ...) and never reads
``os.environ``, an Airflow Variable or Airflow's configuration itself
(tests/pipeline/test_settings.py scans the code for that). Airflow *connections* are read by hooks
(Airflow's provider convention: :mod:`dlbench.hooks.warehouse`, :mod:`dlbench.hooks.airflow_api`,
:mod:`dlbench.hooks.openstack`), which take the names and overrides declared here.

It sits at the bottom of the package, above :mod:`dlbench.errors` only, so every layer may read a
setting; it imports nothing else of dlbench. Airflow is imported only inside the accessor that
reads a Variable or the configuration, because executors, the CLI and the tests
import this module in processes that have no Airflow (or must not initialise it).

The workloads (``dlbench.workloads``, on the benchmarked machine) never import it: what they need
of a setting, their executor hands them explicitly (:func:`workload_env`).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

T = TypeVar("T")

_REPO = Path(__file__).resolve().parents[2]
"""The checkout this module runs from (when it is one: a ``pyproject.toml`` there)."""


class Kind(StrEnum):
    """Where a setting's value is read from."""

    ENV = "environment variable"
    VARIABLE = "Airflow Variable"
    CONNECTION = "Airflow connection"
    CONFIG = "Airflow configuration option"


@dataclass(frozen=True)
class Source:
    """One place a setting is read from; ``note`` says when it is consulted."""

    kind: Kind
    key: str
    note: str = ""

    def __str__(self) -> str:
        return f"{self.kind} `{self.key}`" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Setting(Generic[T]):
    """A setting's declaration: what docs/settings.md says about it and what its accessor obeys.

    ``sources`` are in precedence order: the first one that is set wins, else ``default``
    (``None``: unset means "none" or "off"; ``default_doc`` says what that is in words)."""

    name: str
    sources: tuple[Source, ...]
    type: str
    """What a value looks like (a path, a URL, JSON of some shape...)."""
    parse: Callable[[str], T]
    default: T | None
    default_doc: str
    accessors: tuple[str, ...]
    """The functions of this module that read it: the only way the product does."""
    read_by: str
    """Which processes read it (an environment variable must be set there)."""
    doc: str

    @property
    def env(self) -> str:
        """The environment variable among the sources (the first one)."""
        return next(s.key for s in self.sources if s.kind is Kind.ENV)

    @property
    def variable(self) -> str:
        """The Airflow Variable among the sources."""
        return next(s.key for s in self.sources if s.kind is Kind.VARIABLE)


def _env(key: str, note: str = "") -> Source:
    return Source(Kind.ENV, key, note)


def _variable(key: str, note: str = "") -> Source:
    return Source(Kind.VARIABLE, key, note)


def _text(raw: str) -> str:
    return raw


def _flag(raw: str) -> bool:
    return bool(raw)


# --- the declarations, by what they configure ----------------------------------------------------

HOME: Setting[Path] = Setting(
    name="DLBENCH_HOME", sources=(_env("DLBENCH_HOME"),), type="directory path", parse=Path, default=None,
    default_doc="`<repo>/data` when running from a checkout (a `pyproject.toml` beside `include/`), else "
                "`~/.dlbench`",
    accessors=("home()",), read_by="every controller process: Airflow workers, the API server (UI plugin), the CLI",
    doc="This host's local state: the embedded SQLite warehouse, generated datasets, the wheelhouse, staging "
        "copies of result documents and reports, local VMs' state (`dlbench.paths` builds every path under it). "
        "With several workers each keeps its own; what tasks hand to each other goes through the shared store "
        "(`DLBENCH_STORAGE_URL`).",
)

STORAGE_URL: Setting[str] = Setting(
    name="DLBENCH_STORAGE_URL",
    sources=(_env("DLBENCH_STORAGE_URL"),
             _variable("dlbench_storage_url", "only where Airflow is already loaded; read once per process")),
    type="fsspec URL (`s3://bucket/prefix`, `file:///nfs/dlbench`, `memory://x` in tests; "
         "`s3://<conn_id>@bucket/prefix` takes the credentials of that Airflow connection)",
    parse=_text, default=None, default_doc="`file://$DLBENCH_HOME` (the resolved directory)",
    accessors=("storage_url()", "storage_location()"), read_by="every controller process",
    doc="The store every worker shares: the raw result archive, reports, per-run state (docs/storage.md). Every "
        "worker, the UI plugin and the CLI must resolve the same URL: set the Variable once, or the same "
        "environment everywhere. Blank values count as unset.",
)

WAREHOUSE_URL: Setting[str] = Setting(
    name="DLBENCH_WAREHOUSE_URL",
    sources=(_env("DLBENCH_WAREHOUSE_URL"),
             Source(Kind.CONNECTION, "dlbench_warehouse", "DAG tasks and the UI plugin only; conn_type postgres or "
                    "sqlite (host relative to `DLBENCH_HOME`), or `extra.url`")),
    type="SQLAlchemy URL (`postgresql+psycopg2://user:pass@host/db`, `sqlite:////abs/path.db`)",
    parse=_text, default=None, default_doc="`sqlite:///$DLBENCH_HOME/warehouse.db`",
    accessors=("hooks.warehouse.warehouse_location()", "warehouse_url()"),
    read_by="the DAG's load/report/regressions tasks, the UI plugin, the CLI (`--url` wins there)",
    doc="The warehouse results are loaded into and reports read (docs/warehouse.md). The environment variable "
        "is an explicit override for one process or worker; the connection is the deployment's choice. Each "
        "load logs which one was used, password hidden.",
)

SECRETS: Setting[str] = Setting(
    name="DLBENCH_SECRETS", sources=(_env("DLBENCH_SECRETS"),), type="`airflow` or `memory` (case-insensitive)",
    parse=_text, default=None,
    default_doc="automatic: `airflow` inside an Airflow task, else `memory`",
    accessors=("secrets_backend()",), read_by="any process that makes or reads a run secret",
    doc="Where run secrets (the run's SSH key, a cluster's kubeconfig) live: Airflow Variables "
        "`dlbench_secret__<run_id>__<name>` (every worker reaches them) or this process's memory (the CLI, "
        "unit tests). Other values count as unset (docs/storage.md).",
)

RUN_SECRET: Setting[str] = Setting(
    name="dlbench_secret__<run_id>__<name>", sources=(_variable("dlbench_secret__<run_id>__<name>"),),
    type="the secret's text (an OpenSSH private key, a kubeconfig)", parse=_text, default=None,
    default_doc="none", accessors=("run_secret(key)",), read_by="DAG tasks (through the Task SDK)",
    doc="Not set by people: one Variable per run secret, written by the setup task, deleted at release (or by "
        "the janitor). Its name contains `secret`, so Airflow masks it in task logs; Fernet-encrypted in the "
        "metadata DB. Read only when `DLBENCH_SECRETS` resolves to `airflow`.",
)

def _dag_parse_option(option: tuple[str, str], env_note: str = "Airflow's environment form of the option"
                      ) -> dict[str, Any]:
    """A ``[dlbench]`` option of Airflow's configuration read where the DAGs are parsed: its name
    and sources (``AIRFLOW__<SECTION>__<KEY>``, which wins, then airflow.cfg) and who reads it,
    derived from (section, key) for :class:`Setting`."""
    section, key = option
    name = f"AIRFLOW__{section.upper()}__{key.upper()}"
    return {"name": name, "sources": (_env(name, env_note), Source(Kind.CONFIG, f"[{section}] {key}",
                                                                   "airflow.cfg; only where Airflow is installed")),
            "read_by": "every process that parses the DAGs (scheduler, DAG processor, workers)"}


ROUTING_OPTION = ("dlbench", "routing")
"""Airflow configuration option (section, key) of :data:`ROUTING`."""
ROUTING: Setting[str] = Setting(
    **_dag_parse_option(ROUTING_OPTION, "set, even empty, it wins"),
    type='JSON object: `{"setup_queue": ..., "routes": [{"name", "providers", "queue", "pool"}]}`',
    parse=_text, default=None, default_doc="no routes: every job on `run_job`, every task on the default queue",
    accessors=("routing()",),
    doc="Which Celery queue and pool each provider's jobs run on, and the queue of the tasks that reach every "
        "cloud (`setup_queue`). Read at DAG parse time, because a task's queue and pool are fixed then; a bad "
        "value fails the DAG's import naming the field (docs/scaling.md).",
)

RETRY_DELAY_OPTION = ("dlbench", "retry_delay_seconds")
"""Airflow configuration option (section, key) of :data:`RETRY_DELAY`."""
RETRY_DELAY: Setting[int] = Setting(
    **_dag_parse_option(RETRY_DELAY_OPTION),
    type="whole number of seconds, 0 to 3600", parse=int, default=30, default_doc="30",
    accessors=("retry_delay()",),
    doc="How long the benchmark DAG waits before retrying a task that has retries (a job once, the release "
        "and the load twice): long enough for a cloud API or the warehouse to come back from a blip. Read at "
        "DAG parse time (a task's retry delay is fixed then); a bad value fails the DAG's import naming the "
        "option. The test suite sets 1 s: its retries fail for good, and it waits for nothing.",
)

JANITOR_INTERVAL_OPTION = ("dlbench", "janitor_interval_minutes")
"""Airflow configuration option (section, key) of :data:`JANITOR_INTERVAL`."""
JANITOR_INTERVAL: Setting[int] = Setting(
    **_dag_parse_option(JANITOR_INTERVAL_OPTION),
    type="whole number of minutes, 5 to 1440", parse=int, default=30, default_doc="30",
    accessors=("janitor_interval()",),
    doc="How often the janitor DAG sweeps the clouds for expired or orphaned dlbench resources (its schedule). "
        "Shorter releases a killed run's machines sooner; a run's own lease (its expiry) bounds what any sweep "
        "keeps. Read at DAG parse time; a bad value fails the janitor DAG's import naming the option.",
)

MAX_MAP_LENGTH: Setting[int] = Setting(
    name="[core] max_map_length", sources=(Source(Kind.CONFIG, "[core] max_map_length"),), type="integer",
    parse=int, default=1024, default_doc="1024 (Airflow's own default)", accessors=("max_map_length()",),
    read_by="the DAG's validate_request task",
    doc="Airflow's own limit on a mapped task's length: a request that expands to more jobs is refused at "
        "validation, naming the limit, instead of failing at mapping time after provisioning.",
)

DAGS_FOLDER: Setting[str] = Setting(
    name="AIRFLOW__CORE__DAGS_FOLDER", sources=(_env("AIRFLOW__CORE__DAGS_FOLDER", "Airflow's own variable"),),
    type="directory path", parse=_text, default=None, default_doc="`./dags` (of the working directory)",
    accessors=("dags_folder()",), read_by="`make run` (`dlbench.pipeline.embedded`)",
    doc="Where the embedded runner (`make run`: `dag.test()` in one process) loads the DAGs from. Only the "
        "environment variable is read, not airflow.cfg.",
)

PRICES: Setting[str] = Setting(
    name="dlbench_host_prices",
    sources=(_env("AIRFLOW_VAR_DLBENCH_HOST_PRICES", "Airflow's environment form of the Variable; always read"),
             _variable("dlbench_host_prices", "only in the API server's UI plugin, through the metadata DB")),
    type="YAML or JSON: `{currency: EUR, host_hour: {<hardware or *>: <price>}}`", parse=_text, default=None,
    default_doc="the file `DLBENCH_PRICES_FILE`", accessors=("host_prices(airflow=...)",),
    read_by="the UI plugin's capacity view (the Variable too); `dlbench capacity` (the environment form only)",
    doc="Price per host-hour by hardware type, for the capacity view's cost per 1000 images (docs/capacity.md). "
        "An empty value counts as unset.",
)

PRICES_FILE: Setting[Path] = Setting(
    name="DLBENCH_PRICES_FILE", sources=(_env("DLBENCH_PRICES_FILE"),), type="file path (YAML)", parse=Path,
    default=None, default_doc="`$DLBENCH_HOME/prices.yaml` (none when that file does not exist)",
    accessors=("prices_file()",), read_by="as `dlbench_host_prices`, when that is unset",
    doc="The prices file (same content as `dlbench_host_prices`), read when no Variable gives the prices.",
)

DEFAULT_PROVISION_THREADS = 16
PROVISION_THREADS: Setting[int] = Setting(
    name="DLBENCH_PROVISION_THREADS", sources=(_env("DLBENCH_PROVISION_THREADS"),),
    type="whole number from 1 to 256", parse=int, default=DEFAULT_PROVISION_THREADS, default_doc="16",
    accessors=("provision_threads(strict=...)",), read_by="the workers running provision and release",
    doc="Threads per provisioning phase (allocate, deploy, make ready, release): one per machine up to this "
        "cap, so a 100-node fleet does not open 100 API sessions and SSH handshakes at once from one worker "
        "(`dlbench.providers.base.parallelism`). A bad value is refused at the run's validation (before "
        "anything exists, naming the variable); a release never fails on it: it logs and uses 16.",
)

MACHINE_LOCK: Setting[Path] = Setting(
    name="DLBENCH_MACHINE_LOCK", sources=(_env("DLBENCH_MACHINE_LOCK"),), type="file path", parse=Path,
    default=None, default_doc="`/run/lock/dlbench-machine.lock` where writable, else in the temp directory",
    accessors=("machine_lock()",), read_by="the workers running jobs of the local provider",
    doc="This host's machine claim: a job `flock`s it before its workload starts, so two jobs never measure "
        "this host at once; `.busy` beside it is held by every workload while it lives (docs/scaling.md). "
        "Every user and deployment on the host must agree on it; the test streams each use their own.",
)

BASE_IMAGE: Setting[str] = Setting(
    name="DLBENCH_BASE_IMAGE", sources=(_env("DLBENCH_BASE_IMAGE"),), type="image reference", parse=_text,
    default=None,
    default_doc="the official `python:3.11-slim-bookworm` or the local `dlbench-base` when present, else pulled, "
                "else built with debootstrap",
    accessors=("base_image()",), read_by="whatever builds the workload image (`ensure_image`, `make image`)",
    doc="The base of the workload image (docs/container.md).",
)

OFFLINE_BUILD: Setting[bool] = Setting(
    name="DLBENCH_OFFLINE_BUILD", sources=(_env("DLBENCH_OFFLINE_BUILD"),), type="flag (any non-empty value)",
    parse=_flag, default=False, default_doc="off (on anyway for the local debootstrap base)",
    accessors=("offline_build()",), read_by="whatever builds the workload image",
    doc="Download the workload's wheels on the host first (`build/wheelhouse`), so the image build itself "
        "needs no package index.",
)

TRACE_SYSCALLS_VALUES = ("1", "true", "yes")
TRACE_SYSCALLS: Setting[bool] = Setting(
    name="DLBENCH_TRACE_SYSCALLS", sources=(_env("DLBENCH_TRACE_SYSCALLS"),),
    type="`1`, `true` or `yes` (anything else: off)", parse=lambda raw: raw in TRACE_SYSCALLS_VALUES,
    default=False, default_doc="off", accessors=("trace_syscalls()", "workload_env()"),
    read_by="the worker running a job (the controller), never the workload",
    doc="Record each workload's system-call counts with `strace -c -f` (metric `syscalls`). Off by default "
        "because tracing slows the traced process; the document's label `syscalls` then says it was not "
        "recorded. The controller reads it here and hands it to the workload explicitly: the executor puts "
        "`DLBENCH_TRACE_SYSCALLS=1` in the workload's environment (`workload_env()`), the workload's own "
        "interface (`dlbench.workloads.counters`), which a person running `python -m dlbench.workloads` by "
        "hand sets the same way. Not a blanket pass-through of the worker's environment, which workloads never "
        "get. Executors that hand it over: the local process executor (the local provider's `bare_metal`); the "
        "Docker, SSH and Kubernetes executors do not (they never did), so their documents say \"not recorded\".",
)

PROFILES_FILE: Setting[str] = Setting(
    name="DLBENCH_PROFILES_FILE", sources=(_env("DLBENCH_PROFILES_FILE"),), type="file path (YAML)",
    parse=_text, default=None, default_doc="none (blank counts as unset)", accessors=("profiles_file()",),
    read_by="the workers (validation, planning, jobs) and the CLI; a workload run by hand reads its own",
    doc="User profiles (docs/profiles.md), re-read when the file changes. Precedence of profiles: built-ins < "
        "this file < the Variable `dlbench_profiles` < a profile pinned by a validated request. A workload "
        "started by the pipeline does not need it (a user profile travels on its command line, "
        "`--profile-spec`); `python -m dlbench.workloads` run by hand reads it from its own environment "
        "(`dlbench.workloads.cli`), its own interface.",
)

OS_CLIENT_CONFIG_FILE: Setting[Path] = Setting(
    name="OS_CLIENT_CONFIG_FILE", sources=(_env("OS_CLIENT_CONFIG_FILE", "OpenStack's own variable"),),
    type="file path (clouds.yaml)", parse=Path, default=None,
    default_doc="`./clouds.yaml`, `~/.config/openstack/clouds.yaml`, `/etc/openstack/clouds.yaml`, "
                "`<repo>/.devcloud/clouds.yaml` (in this order)",
    accessors=("os_client_config_file()",), read_by="the workers reaching an OpenStack cloud by clouds.yaml name",
    doc="The clouds.yaml that names OpenStack clouds (docs/openstack.md); a request's `clouds_file` wins.",
)

DEFAULT_EXPIRY_HOURS = 6.0
DEFAULT_EXPIRY = timedelta(hours=DEFAULT_EXPIRY_HOURS)
"""How long a run's resources live before the janitor may release them: the default of
:data:`EXPIRY_HOURS`, and the expiry of anything launched without its run's (one fact)."""

EXPIRY_HOURS: Setting[float] = Setting(
    name="dlbench_expiry_hours", sources=(_variable("dlbench_expiry_hours"),), type="hours (a number)",
    parse=float, default=DEFAULT_EXPIRY_HOURS, default_doc="6", accessors=("expiry_hours()",),
    read_by="the DAG's run_tags task",
    doc="How long a run's resources may live: the janitor releases them after this even if their DAG run "
        "still exists. A provider's `expiry_hours` in the request wins. Containers and resources launched "
        "without their run's expiry get the same 6 hours (`DEFAULT_EXPIRY`).",
)

SCHEDULED_REQUEST: Setting[str] = Setting(
    name="dlbench_scheduled_request", sources=(_variable("dlbench_scheduled_request"),),
    type="JSON object: the trigger form's fields", parse=_text, default=None,
    default_doc="none: a scheduled run fails, saying so", accessors=("scheduled_request()",),
    read_by="the DAG's validate_request task, for scheduled runs only",
    doc="What a scheduled run benchmarks, validated like the form (docs/scheduling.md). Manual runs ignore it.",
)

PROFILE: Setting[str] = Setting(
    name="dlbench_profile", sources=(_variable("dlbench_profile"),), type="a profile's name", parse=_text,
    default="smoke", default_doc="`smoke`", accessors=("default_profile()",), read_by="the DAG's validate_request task",
    doc="The profile of a run whose `profile` is `auto` (or empty): scheduled runs, mostly.",
)

USER_PROFILES: Setting[str] = Setting(
    name="dlbench_profiles", sources=(_variable("dlbench_profiles"),),
    type="YAML or JSON: profiles, the shape of `DLBENCH_PROFILES_FILE`", parse=_text, default=None,
    default_doc="none", accessors=("user_profiles()",), read_by="the DAG's validate_request task",
    doc="User profiles kept in Airflow (docs/profiles.md); validated with the request, which then carries the "
        "chosen profile's fields to every later task.",
)

JANITOR_CLOUDS: Setting[str] = Setting(
    name="dlbench_janitor_clouds", sources=(_variable("dlbench_janitor_clouds", "when the run's `clouds` param "
                                                      "is empty"),),
    type='JSON list of provider settings objects, e.g. `[{"name": "ironic", "cloud": "production"}]`',
    parse=_text, default=None, default_doc="none: only local Docker containers are swept",
    accessors=("janitor_clouds()",), read_by="the janitor DAG's sweep task",
    doc="The clouds the janitor sweeps every 30 minutes for expired or orphaned resources (docs/scheduling.md): "
        "list every cloud your runs use.",
)

AIRFLOW_API: Setting[str] = Setting(
    name="dlbench_airflow_api",
    sources=(Source(Kind.CONNECTION, "dlbench_airflow_api", "the janitor DAG's sweep task only; conn_type http: "
                    "host = the API server's base URL, login and password of a user who may edit DAG runs, or "
                    "`extra.token`: a JWT"),),
    type="Airflow connection", parse=_text, default=None,
    default_doc="none: the janitor reports such a DAG run as still running and leaves it to you",
    accessors=("hooks.airflow_api.api_connection()",), read_by="the janitor DAG's sweep task",
    doc="Airflow's REST API (v2) as the janitor calls it: after it released the resources of a run whose "
        "process died (its lease lapsed, its expiry passed) while Airflow still shows the DAG run running, it "
        "marks that DAG run failed there (`PATCH /api/v2/dags/{dag_id}/dagRuns/{run_id}`), with a note saying "
        "why. Airflow 3 tasks have no metadata-database access and the Task SDK cannot change another run's "
        "state, so this is the supported way (docs/openstack.md#leases-and-the-janitor).",
)

ON_REGRESSION: Setting[str] = Setting(
    name="dlbench_on_regression", sources=(_variable("dlbench_on_regression", "scheduled runs only"),),
    type="`fail` or `warn`", parse=_text, default=None, default_doc="the run's `on_regression` param (`fail`)",
    accessors=('variable("dlbench_on_regression")',), read_by="the DAG's regressions task",
    doc="What a regression does to a scheduled run: fail the regressions task (and the run) or only warn "
        "(docs/regressions.md).",
)

REGRESSION_NOTIFIERS: Setting[str] = Setting(
    name="dlbench_regression_notifiers", sources=(_variable("dlbench_regression_notifiers"),),
    type='JSON list: dotted paths of callables, or `{"class": <dotted path>, "kwargs": {...}}`', parse=_text,
    default=None, default_doc="a WARNING in the task log", accessors=('variable("dlbench_regression_notifiers")',),
    read_by="the DAG's regressions task, when a run regressed",
    doc="Who is told about a regression (Slack, e-mail... through Airflow notifiers; docs/regressions.md).",
)

GATES: Setting[str] = Setting(
    name="dlbench_gates", sources=(_variable("dlbench_gates", "only for a run whose request has no `gates` field"),),
    type='JSON list of gates, e.g. `[{"platform": "container_on_vm", "metric": "throughput", "op": ">=", '
         '"ratio": 0.9}]`',
    parse=_text, default=None, default_doc="none: a run without `gates` in its request is not gated",
    accessors=("gates()",), read_by="the DAG's validate_request task",
    doc="The deployment's standing pass/fail gates on the comparison with bare metal (docs/gates.md). A request "
        "that has a `gates` field (even `[]`) replaces them whole: the run's own request is the more specific "
        "statement, and merging would leave no way to drop or loosen a standing gate for one run. The gates are "
        "validated with the request (a bad one refuses the run before anything is provisioned, naming "
        "`gates[i].<field>` and this Variable) and archived with it; the run's last task evaluates them.",
)

SETTINGS: tuple[Setting[Any], ...] = (
    HOME, STORAGE_URL, WAREHOUSE_URL, SECRETS, RUN_SECRET, PROFILES_FILE, PRICES, PRICES_FILE, PROVISION_THREADS,
    MACHINE_LOCK, TRACE_SYSCALLS, BASE_IMAGE, OFFLINE_BUILD, OS_CLIENT_CONFIG_FILE, ROUTING, RETRY_DELAY,
    JANITOR_INTERVAL, MAX_MAP_LENGTH,
    DAGS_FOLDER, SCHEDULED_REQUEST, PROFILE, USER_PROFILES, EXPIRY_HOURS, JANITOR_CLOUDS, AIRFLOW_API, ON_REGRESSION,
    REGRESSION_NOTIFIERS, GATES,
)
"""Every setting, in the order docs/settings.md lists them."""


def declared(kind: Kind) -> tuple[str, ...]:
    """The keys of every declared source of one kind (the names the product may read)."""
    return tuple(s.key for setting in SETTINGS for s in setting.sources if s.kind is kind)


# --- accessors: the only readers --------------------------------------------------------------------

def home() -> Path:
    """``DLBENCH_HOME``, else ``<repo>/data`` in a checkout, else ``~/.dlbench``."""
    value = os.environ.get(HOME.env)
    if value:
        return HOME.parse(value)
    if (_REPO / "pyproject.toml").exists():
        return _REPO / "data"
    return Path.home() / ".dlbench"


_variable_cache: dict[str, str | None] = {}
"""Airflow Variables read once per process (Variable name -> value, None when unset)."""
_lock = threading.Lock()


def reset() -> None:
    """Forget the cached Airflow Variables (tests; a long-lived process after changing one)."""
    with _lock:
        _variable_cache.clear()


def _loaded_airflow_variable(name: str) -> str | None:
    """A Variable read once per process, only where Airflow is already loaded (None elsewhere or
    when unset; blank counts as unset)."""
    with _lock:
        if name in _variable_cache:
            return _variable_cache[name]
    value: str | None = None
    # Only where Airflow is already loaded (a task, the API server, a dag.test process): importing
    # it here would initialise Airflow's configuration in a process that is not an Airflow
    # component (an executor, the CLI, a test), before its AIRFLOW_HOME is set up, and that
    # process would then read Variables with another Fernet key. Outside Airflow: env or default.
    if "airflow.sdk" in sys.modules:
        try:  # in a task: the Task SDK (API server, secrets backends)
            from airflow.sdk import Variable  # why: Airflow is optional here, and already loaded

            value = Variable.get(name, default=None)
        except Exception:  # noqa: BLE001 - not in a task
            value = None
    if value is None and "airflow.models" in sys.modules:
        try:  # the API server (the UI plugin) and other processes with the metadata DB
            from airflow.models.variable import Variable as CoreVariable  # why: as above

            value = CoreVariable.get(name, default_var=None)
        except Exception:  # noqa: BLE001 - no metadata DB here
            value = None
    with _lock:
        _variable_cache[name] = value.strip() if isinstance(value, str) and value.strip() else None
        return _variable_cache[name]


def storage_location() -> tuple[str, str]:
    """(the store's root URL, where it came from): ``DLBENCH_STORAGE_URL`` > Variable
    ``dlbench_storage_url`` > ``file://$DLBENCH_HOME``."""
    env = os.environ.get(STORAGE_URL.env, "").strip()
    if env:
        return env, f"env {STORAGE_URL.env}"
    variable = _loaded_airflow_variable(STORAGE_URL.variable)
    if variable:
        return variable, f"Airflow Variable {STORAGE_URL.variable}"
    return Path(home()).resolve().as_uri(), "default: DLBENCH_HOME"


def storage_url() -> str:
    """The store's root URL (:func:`storage_location`)."""
    return storage_location()[0]


WAREHOUSE_CONNECTION = next(s.key for s in WAREHOUSE_URL.sources if s.kind is Kind.CONNECTION)


def warehouse_url() -> str:
    """``DLBENCH_WAREHOUSE_URL``, else the embedded SQLite file: the default of a process that does
    not consult Airflow (the CLI, ``db.engine_for(None)``)."""
    return os.environ.get(WAREHOUSE_URL.env) or f"sqlite:///{home() / 'warehouse.db'}"


def warehouse_url_override() -> str | None:
    """``DLBENCH_WAREHOUSE_URL`` when set: the override that wins over the Airflow connection
    (:func:`dlbench.hooks.warehouse.warehouse_location`, the precedence)."""
    return os.environ.get(WAREHOUSE_URL.env) or None


def secrets_backend() -> Literal["airflow", "memory"] | None:
    """The backend ``DLBENCH_SECRETS`` forces, None when unset (or another value): automatic."""
    forced = os.environ.get(SECRETS.env, "").strip().lower()
    if forced == "airflow":
        return "airflow"
    if forced == "memory":
        return "memory"
    return None


def run_secret(key: str) -> str | None:
    """The run secret kept in the Airflow Variable ``key`` (None when there is none)."""
    from airflow.sdk import Variable  # why: only inside a task (secrets_backend() is airflow)

    try:
        return Variable.get(key, default=None)
    except Exception:  # noqa: BLE001 - not found surfaces as an error in some SDK versions
        return None


def _airflow_option(setting: Setting[Any], option: tuple[str, str]) -> str | None:
    """An option of ours in Airflow's configuration: its environment variable (set, even empty, it
    wins), else airflow.cfg (Airflow's own precedence), else None; outside Airflow, the environment only."""
    raw = os.environ.get(setting.env)
    if raw is None:
        try:
            from airflow.configuration import conf  # why: absent in a process without Airflow (tests, CLI)

            raw = conf.get(*option, fallback=None)
        except Exception:  # noqa: BLE001 - outside Airflow (tests, CLI): the environment only
            raw = None
    return raw


def routing() -> str | None:
    """The routing's JSON text: ``AIRFLOW__DLBENCH__ROUTING`` (set, even empty, it wins), else
    ``[dlbench] routing`` of airflow.cfg (Airflow's own precedence), else None."""
    return _airflow_option(ROUTING, ROUTING_OPTION)


def _whole_option(setting: Setting[int], option: tuple[str, str], low: int, high: int, unit: str) -> int:
    """One of our whole-number options (:func:`_airflow_option`'s precedence), its default when unset;
    a value that is not a whole number from ``low`` to ``high`` raises ValueError naming the option
    (read at DAG parse time: an import error in the UI)."""
    raw = _airflow_option(setting, option)
    if raw is None or not raw.strip():
        assert setting.default is not None, setting.name  # declared with one
        return setting.default
    value = setting.parse(raw) if raw.strip().isdigit() else -1
    if not low <= value <= high:
        section, key = option
        raise ValueError(f"{setting.env} ([{section}] {key}) = {raw!r}: must be a whole number of {unit} "
                         f"from {low} to {high}")
    return value


def retry_delay() -> timedelta:
    """The DAG tasks' retry delay: ``AIRFLOW__DLBENCH__RETRY_DELAY_SECONDS`` (it wins), else
    ``[dlbench] retry_delay_seconds`` of airflow.cfg, else 30 s. A value that is not 0-3600 whole
    seconds raises ValueError naming the option (at DAG parse time: an import error in the UI)."""
    return timedelta(seconds=_whole_option(RETRY_DELAY, RETRY_DELAY_OPTION, 0, 3600, "seconds"))


def janitor_interval() -> timedelta:
    """The janitor DAG's schedule: ``AIRFLOW__DLBENCH__JANITOR_INTERVAL_MINUTES`` (it wins), else
    ``[dlbench] janitor_interval_minutes`` of airflow.cfg, else 30 minutes. A value that is not 5-1440
    whole minutes raises ValueError naming the option (at DAG parse time: an import error in the UI)."""
    return timedelta(minutes=_whole_option(JANITOR_INTERVAL, JANITOR_INTERVAL_OPTION, 5, 1440, "minutes"))


def max_map_length() -> int:
    """Airflow's ``[core] max_map_length`` (1024 when unset)."""
    from airflow.configuration import conf  # why: read inside a task only; settings is imported without Airflow

    return conf.getint("core", "max_map_length", fallback=MAX_MAP_LENGTH.default)


def dags_folder() -> str:
    """``AIRFLOW__CORE__DAGS_FOLDER``, else ``./dags``."""
    return os.environ.get(DAGS_FOLDER.env, str(Path.cwd() / "dags"))


def host_prices(*, airflow: bool = False) -> str | None:
    """The prices' text: ``AIRFLOW_VAR_DLBENCH_HOST_PRICES``, else (when ``airflow``: inside
    Airflow's API server or a task) the Variable ``dlbench_host_prices``; None when unset or empty."""
    value = os.environ.get(PRICES.env)
    if not value and airflow:
        try:
            from airflow.models import Variable  # why: the UI plugin only; settings is imported without Airflow

            value = Variable.get(PRICES.variable, default_var=None)
        except Exception:  # noqa: BLE001 - no metadata DB reachable: the file decides
            value = None
    return value or None


def prices_file() -> Path:
    """``DLBENCH_PRICES_FILE``, else ``$DLBENCH_HOME/prices.yaml`` (it may not exist)."""
    return PRICES_FILE.parse(os.environ.get(PRICES_FILE.env) or str(home() / "prices.yaml"))


def provision_threads(*, strict: bool = False) -> int:
    """The cap on threads per provisioning phase (``DLBENCH_PROVISION_THREADS``, default 16).

    A value that is not a whole number from 1 to 256 raises ValueError naming the variable when
    ``strict`` (the lifecycle's preflight, before anything exists); otherwise it is logged and the
    default is used (a release never fails on it)."""
    raw = os.environ.get(PROVISION_THREADS.env, "").strip()
    cap = DEFAULT_PROVISION_THREADS
    if raw:
        if raw.isdigit() and 1 <= int(raw) <= 256:
            cap = PROVISION_THREADS.parse(raw)
        elif strict:
            raise ValueError(f"{PROVISION_THREADS.env}={raw!r}: must be a whole number from 1 to 256")
        else:
            logging.getLogger(__name__).warning("%s=%r is not 1-256: using %d", PROVISION_THREADS.env, raw, cap)
    return cap


def machine_lock() -> Path | None:
    """``DLBENCH_MACHINE_LOCK`` (None when unset: the caller's default place)."""
    value = os.environ.get(MACHINE_LOCK.env)
    return MACHINE_LOCK.parse(value) if value else None


def base_image() -> str | None:
    """``DLBENCH_BASE_IMAGE`` (None when unset: the image module chooses)."""
    return os.environ.get(BASE_IMAGE.env) or None


def offline_build() -> bool:
    """Whether ``DLBENCH_OFFLINE_BUILD`` is set (to anything non-empty)."""
    return OFFLINE_BUILD.parse(os.environ.get(OFFLINE_BUILD.env, ""))


def trace_syscalls() -> bool:
    """Whether ``DLBENCH_TRACE_SYSCALLS`` asks workloads to trace their system calls."""
    return TRACE_SYSCALLS.parse(os.environ.get(TRACE_SYSCALLS.env, ""))


def workload_env() -> dict[str, str]:
    """What an executor adds to a workload's environment from the controller's settings (the
    workload's interface: it never imports this module): ``DLBENCH_TRACE_SYSCALLS=1`` when on."""
    return {TRACE_SYSCALLS.env: "1"} if trace_syscalls() else {}


WORKLOAD_INTERFACE = (TRACE_SYSCALLS.env, PROFILES_FILE.env)
"""The environment variables a workload reads from its own environment, its interface (it never
imports this module): ``DLBENCH_TRACE_SYSCALLS``, handed over by its executor (:func:`workload_env`);
``DLBENCH_PROFILES_FILE``, set by a person running a workload by hand (the pipeline hands a user
profile over on the command line, ``--profile-spec``, never this variable)."""


def profiles_file() -> str | None:
    """The path in ``DLBENCH_PROFILES_FILE`` as given (stripped; messages quote it), None when blank."""
    return os.environ.get(PROFILES_FILE.env, "").strip() or None


def os_client_config_file() -> Path | None:
    """``OS_CLIENT_CONFIG_FILE`` (None when unset: the standard clouds.yaml places)."""
    value = os.environ.get(OS_CLIENT_CONFIG_FILE.env)
    return OS_CLIENT_CONFIG_FILE.parse(value) if value else None


def _task_variable(name: str, default: str | None = None) -> Any:
    """An Airflow Variable through the Task SDK: ``default`` when it is not set."""
    from airflow.sdk import Variable  # why: read inside DAG tasks only; settings is imported without Airflow

    return Variable.get(name, default=default)


def scheduled_request() -> str | None:
    """The Variable ``dlbench_scheduled_request`` (None when unset)."""
    return _task_variable(SCHEDULED_REQUEST.name)


def default_profile() -> str:
    """The Variable ``dlbench_profile``, else ``smoke``."""
    return _task_variable(PROFILE.name, default=PROFILE.default)


def user_profiles() -> str | None:
    """The Variable ``dlbench_profiles`` (None when unset)."""
    return _task_variable(USER_PROFILES.name)


def expiry_hours() -> float:
    """The Variable ``dlbench_expiry_hours`` as hours, else :data:`DEFAULT_EXPIRY_HOURS`."""
    raw = _task_variable(EXPIRY_HOURS.name)
    return DEFAULT_EXPIRY_HOURS if raw is None else EXPIRY_HOURS.parse(raw)


def gates() -> str | None:
    """The Variable ``dlbench_gates`` (None when unset)."""
    return _task_variable(GATES.name)


def janitor_clouds() -> str | None:
    """The Variable ``dlbench_janitor_clouds`` (None when unset)."""
    return _task_variable(JANITOR_CLOUDS.name)


def variable(name: str) -> str | None:
    """A declared Airflow Variable by name, None when unset: for code handed a reader
    (``regression_alerts.run``). A name not declared here is refused, so every Variable the
    product reads is in docs/settings.md."""
    if name not in declared(Kind.VARIABLE) or "<" in name:
        raise KeyError(f"{name!r} is not an Airflow Variable declared in dlbench.settings")
    return _task_variable(name)
