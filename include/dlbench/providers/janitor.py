"""The leak janitor: release our resources whose expiry passed or whose DAG run has ended.

Why a janitor at all: a worker killed mid-provisioning, a teardown that failed three times, or a
DAG run marked failed by hand can each leave a GPU node deployed. Every resource carries
:class:`~dlbench.providers.base.Tags`; the janitor lists tagged resources only (each driver's
``find``), so anything without our tag is never touched.

Which clouds: configuration, not code. The Airflow Variable :data:`CLOUDS_VARIABLE` holds a JSON
list of provider settings objects, the same schema as a request's provider
(``[{"name": "ironic", "cloud": "production"}]``); every registered provider with a driver can
appear there. The janitor DAG's ``clouds`` param overrides it for one run.

DAG runs: when the janitor released a run's resources (its lease lapsed, its expiry passed) while
Airflow still shows that DAG run queued or running (a SIGKILLed ``make run`` or ``dag.test()`` is
never marked by a scheduler), it marks the DAG run failed, with a note saying why
(:func:`close_runs`: through Airflow's REST API, the connection ``dlbench_airflow_api``). A DAG run
that already finished is left as it is; without the connection it is reported, not marked.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from dlbench import storage
from dlbench.execution.engine import sweep_containers, sweep_networks
from dlbench.execution.image import docker_available
from dlbench.providers import run_secrets
from dlbench.providers.base import RunIsActive, SweepAction, Tags
from dlbench.providers.machines import remove_run_state
from dlbench.providers.qemu import sweep_local_vms
from dlbench.providers.registry import PROVIDERS, parse_settings
from dlbench.providers.settings import MachineSettings, ProviderSettings
from dlbench.providers.sweep import decide_tags
from dlbench.settings import AIRFLOW_API, JANITOR_CLOUDS

if TYPE_CHECKING:
    from dlbench.hooks.airflow_api import AirflowApi

log = logging.getLogger(__name__)

ACTIVE_STATES = ("queued", "running")
CLOUDS_VARIABLE = JANITOR_CLOUDS.name


def clouds_from(raw: str | list[dict[str, Any]] | None) -> list[ProviderSettings]:
    """Provider settings to sweep, from the Variable's JSON (or the DAG param's list)."""
    if raw is None or raw == "" or raw == []:
        return []
    data = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(data, list):
        raise ValueError(f"{CLOUDS_VARIABLE} must be a JSON list of provider settings objects, e.g. "
                         '[{"name": "ironic", "cloud": "production"}]')
    clouds = [parse_settings(item) for item in data]
    for settings in clouds:
        if not isinstance(settings, MachineSettings) and settings.name != "kubernetes":
            raise ValueError(f"{CLOUDS_VARIABLE}: provider {settings.name!r} provisions nothing to sweep")
    return clouds


def airflow_run_is_active(count_runs: Callable[..., int]) -> RunIsActive:
    """``is_active`` backed by Airflow's metadata: ``count_runs`` is the task SDK's
    ``RuntimeTaskInstance.get_dr_count`` (works under ``dag.test()`` and on workers, no REST).
    Resources without a DAG run (CLI, tests) are governed by their expiry only."""
    cache: dict[tuple[str, str], bool] = {}

    def is_active(tags: Tags) -> bool:
        if not tags.dag_id or not tags.dag_run_id:
            return True
        key = (tags.dag_id, tags.dag_run_id)
        if key not in cache:
            try:
                cache[key] = count_runs(dag_id=tags.dag_id, run_ids=[tags.dag_run_id], states=list(ACTIVE_STATES)) > 0
            except Exception as exc:  # noqa: BLE001 - unknown state: keep the resource, expiry will catch it
                log.warning("cannot read the state of DAG run %s/%s (%s); keeping it until expiry", *key, exc)
                cache[key] = True
        return cache[key]

    return is_active


def sweep_provider(settings: ProviderSettings, is_active: RunIsActive, *, now: datetime | None = None,
                   dry_run: bool = False) -> tuple[list[SweepAction], list[dict[str, str]]]:
    """(released or would-release actions, kept runs with the reason) for one cloud."""
    return PROVIDERS[settings.name].sweep(settings, is_active, now=now, dry_run=dry_run)


class DagRunOutcome(StrEnum):
    """What the janitor did to the DAG run of a run whose resources it released."""

    MARKED_FAILED = "marked failed"
    FINISHED = "already finished"
    NOT_MARKED = "not marked"


DagRunState = Callable[[str, str], str]
"""(dag_id, dag_run_id) -> the DAG run's state: the Task SDK's ``RuntimeTaskInstance.get_dagrun_state``
in the janitor's task (the Execution API: no credentials needed), or :meth:`AirflowApi.dag_run_state`."""


def close_run(dag_id: str, dag_run_id: str, run_id: str, reason: str, state_of: DagRunState,
              api: AirflowApi | None) -> dict[str, str]:
    """Mark the DAG run failed when Airflow still shows it queued or running: the janitor released
    its resources (``reason``), so it can never succeed, and no scheduler will ever mark it (the
    process that drove it is gone). A finished DAG run is left as it is (a no-op with its reason)."""
    item = {"dag_id": dag_id, "dag_run_id": dag_run_id, "run_id": run_id}
    try:
        state = str(state_of(dag_id, dag_run_id)).rsplit(".", 1)[-1].lower()  # a str or a DagRunState
    except Exception as exc:  # noqa: BLE001 - reported; the resources are released whatever the answer
        return {**item, "outcome": DagRunOutcome.NOT_MARKED.value,
                "detail": f"its state could not be read ({type(exc).__name__}: {exc})"}
    if state not in ACTIVE_STATES:
        return {**item, "outcome": DagRunOutcome.FINISHED.value, "detail": f"already {state}: left as it is"}
    if api is None:
        return {**item, "outcome": DagRunOutcome.NOT_MARKED.value,
                "detail": f"still {state} in Airflow, not marked failed: no Airflow connection {AIRFLOW_API.name} "
                          "(docs/openstack.md#leases-and-the-janitor); mark it failed in the UI"}
    note = f"Marked failed by dlbench_janitor: it released the resources of run {run_id} ({reason})."
    try:
        now = api.mark_failed(dag_id, dag_run_id, note)
    except Exception as exc:  # noqa: BLE001 - reported (and fails the sweep task: a setup problem)
        return {**item, "outcome": DagRunOutcome.NOT_MARKED.value,
                "detail": f"still {state}; marking it failed through {api.url} failed: {type(exc).__name__}: {exc}",
                "error": "yes"}
    return {**item, "outcome": DagRunOutcome.MARKED_FAILED.value, "detail": f"was {state}, now {now}: {note}"}


def close_runs(released: list[dict[str, Any]], state_of: DagRunState, api: AirflowApi | None) -> list[dict[str, str]]:
    """:func:`close_run` once per DAG run whose resources were released or whose run state was
    removed as over (not in a dry run, not when a release failed: then the resources are still
    there and the next sweep retries)."""
    done: dict[tuple[str, str], dict[str, str]] = {}
    for action in released:
        key = (str(action.get("dag_id") or ""), str(action.get("dag_run_id") or ""))
        if not action["released"] or not all(key) or key in done:
            continue
        if any(a["run_id"] == action["run_id"] and not a["released"] for a in released):
            continue  # part of the run is still there
        done[key] = close_run(*key, action["run_id"], action["reason"], state_of, api)
    return list(done.values())


STATE_WITHOUT_TAGS_MAX_AGE_S = 24 * 3600
"""A run directory without readable tags (a setup killed before writing them) is removed after a day."""


def sweep_run_state(is_active: RunIsActive, *, now: datetime | None = None, dry_run: bool = False,
                    released_runs: set[str] | None = None) -> list[dict[str, str]]:
    """Remove the private state of runs that are over: their secrets (the SSH key, a kubeconfig: Airflow
    Variables, :mod:`dlbench.providers.run_secrets`) and their state in the shared store
    (``runs/<run>``: record, known_hosts). Judged by the run's record alone, with the rule the
    resources go by (:func:`dlbench.providers.sweep.decide_tags`: a lapsed lease, else the expiry
    and the DAG run's state), or released in this sweep: a run killed during its own release
    (machines untagged, nothing left to find in the cloud) loses its key within one lease. A
    setup that failed removes its own; the record is written before the key, so a killed setup's
    key is always found."""
    now = now or datetime.now(UTC)
    store = storage.store()
    actions = []
    for run_id in store.children("runs"):
        tags = run_secrets.run_record(run_id)
        if tags is None:
            modified = store.modified(storage.run_state_key(run_id))
            if modified is not None and time.time() - modified < STATE_WITHOUT_TAGS_MAX_AGE_S:
                continue
            reason = "no readable record and older than a day"
        elif run_id in (released_runs or set()):
            reason = "its resources were released in this sweep"
        else:
            reason, keep = decide_tags([tags], is_active, now)
            if keep:
                continue
        if not dry_run:
            remove_run_state(run_id)
        dag_run = {"dag_id": tags.dag_id, "dag_run_id": tags.dag_run_id} if tags is not None else {}
        actions.append({"run_id": run_id, "reason": reason, **dag_run})
    return actions


def sweep(clouds: list[ProviderSettings], is_active: RunIsActive, *, dry_run: bool = False, docker: bool = True,
          now: datetime | None = None, local_vms: bool = True, dag_run_state: DagRunState | None = None,
          api: AirflowApi | None = None) -> dict[str, Any]:
    """Sweep every configured cloud, this host's QEMU guests (``local_vms``) and the local Docker
    engine; a JSON-able report of what was (or, dry run, would be) released, what was kept and
    why, errors, and (``operator``) bare-metal nodes whose cleaning failed, named, logged at error.
    With ``dag_run_state`` (the janitor's task), the DAG runs of released runs
    that Airflow still shows running are marked failed through ``api`` (:func:`close_runs`)."""
    report: dict[str, Any] = {"dry_run": dry_run, "released": [], "kept": [], "containers": [], "keys": [],
                              "dag_runs": [], "errors": [], "operator": []}
    if not clouds:
        log.info("janitor: no clouds configured (Airflow Variable %s); sweeping local containers only",
                 CLOUDS_VARIABLE)
    for settings in clouds:
        where = f"{settings.name}:{settings.location()}"
        try:
            actions, kept = sweep_provider(settings, is_active, now=now, dry_run=dry_run)
        except Exception as exc:  # noqa: BLE001 - report it and still sweep the others
            report["errors"].append(f"{where}: {type(exc).__name__}: {exc}")
            continue
        report["released"] += [{"cloud": where, **dataclasses.asdict(a)} for a in actions]
        report["kept"] += [{"cloud": where, **k} for k in kept]
        try:  # e.g. nodes whose cleaning failed after a release: only an operator can give them back
            report["operator"] += [f"{where}: {n}" for n in PROVIDERS[settings.name].needs_operator(settings)]
        except Exception as exc:  # noqa: BLE001 - report it and still sweep the others
            report["errors"].append(f"{where}: listing failed machines: {type(exc).__name__}: {exc}")
    if local_vms:
        try:
            actions, kept = sweep_local_vms(is_active, now=now, dry_run=dry_run)
            report["released"] += [{"cloud": "local-vm", **dataclasses.asdict(a)} for a in actions]
            report["kept"] += [{"cloud": "local-vm", **k} for k in kept]
        except Exception as exc:  # noqa: BLE001 - report it and still sweep the rest
            report["errors"].append(f"local-vm: {type(exc).__name__}: {exc}")
    if docker:
        # Containers first: a network is removable only once its expired containers are gone.
        # Networks go when expired or when their run's resources were released in this sweep.
        report["networks"] = []
        try:
            if docker_available()[0]:
                report["containers"] = sweep_containers(now=now, dry_run=dry_run)
                over = {r["run_id"] for r in report["released"] if r["released"]}
                report["networks"] = sweep_networks(now=now, dry_run=dry_run, runs_over=over)
                for name in report["networks"]:
                    log.info("%s docker network %s", "would remove" if dry_run else "removed", name)
        except Exception as exc:  # noqa: BLE001
            report["errors"].append(f"docker: {type(exc).__name__}: {exc}")
    try:
        released_runs = {r["run_id"] for r in report["released"] if r["released"]}
        report["keys"] = sweep_run_state(is_active, now=now, dry_run=dry_run, released_runs=released_runs)
    except Exception as exc:  # noqa: BLE001
        report["errors"].append(f"run state: {type(exc).__name__}: {exc}")
    if dag_run_state is not None and not dry_run:
        # The DAG runs of released resources, and of runs whose state went by their record alone (a
        # run killed during its release: nothing of it was left in the cloud to release).
        over = report["released"] + [{**k, "released": True} for k in report["keys"] if k.get("dag_run_id")]
        report["dag_runs"] = close_runs(over, dag_run_state, api)
        report["errors"] += [f"DAG run {d['dag_id']}/{d['dag_run_id']}: {d['detail']}"
                             for d in report["dag_runs"] if d.get("error")]
    verb = "would release" if dry_run else "released"
    for action in report["released"]:
        log.info("%s %s on %s (%s)%s", verb, action["name"], action["cloud"], action["reason"],
                 f" ERROR: {action['error']}" if action["error"] else "")
    for item in report["kept"]:
        log.info("kept run %s on %s (%s resources): %s", item["run_id"], item["cloud"], item["resources"],
                 item["reason"])
    for item in report["operator"]:
        log.error("needs an operator (never allocated until made available): %s", item)
    for item in report["dag_runs"]:
        log.info("DAG run %s/%s of run %s: %s: %s", item["dag_id"], item["dag_run_id"], item["run_id"], item["outcome"],
                 item["detail"])
    for name in report["containers"]:
        log.info("%s container %s (expired)", verb, name)
    for item in report["keys"]:
        log.info("%s the private state (SSH key) of run %s: %s", "would remove" if dry_run else "removed",
                 item["run_id"], item["reason"])
    log.info("janitor: %d resource(s) %s, %d run(s) kept, %d container(s), %d error(s)", len(report["released"]),
             verb, len(report["kept"]), len(report["containers"]), len(report["errors"]))
    return report
