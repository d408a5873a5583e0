"""The leak janitor: release our resources whose expiry passed or whose DAG run has ended.

Why a janitor at all: a worker killed mid-provisioning, a teardown that failed three times, or a
DAG run marked failed by hand can each leave a GPU node deployed. Every resource carries
:class:`~dlbench.providers.base.Tags`; the janitor lists tagged resources only (each driver's
``find``), so anything without our tag is never touched.

Which clouds: configuration, not code. The Airflow Variable :data:`CLOUDS_VARIABLE` holds a JSON
list of provider settings objects, the same schema as a request's provider
(``[{"name": "ironic", "cloud": "production"}]``); every registered provider with a driver can
appear there. The janitor DAG's ``clouds`` param overrides it for one run.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from dlbench import storage
from dlbench.execution.engine import sweep_containers, sweep_networks
from dlbench.execution.image import docker_available
from dlbench.providers.base import RunIsActive, SweepAction, Tags
from dlbench.providers.machines import RUN_STATE_TAGS, remove_run_state
from dlbench.providers.qemu import sweep_local_vms
from dlbench.providers.registry import PROVIDERS, parse_settings
from dlbench.providers.settings import MachineSettings, ProviderSettings
from dlbench.settings import JANITOR_CLOUDS

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


STATE_WITHOUT_TAGS_MAX_AGE_S = 24 * 3600
"""A run directory without readable tags (a setup killed before writing them) is removed after a day."""


def sweep_run_state(is_active: RunIsActive, *, now: datetime | None = None, dry_run: bool = False,
                    released_runs: set[str] | None = None) -> list[dict[str, str]]:
    """Remove the private state of runs that are over: their secrets (the SSH key: an Airflow
    Variable, :mod:`dlbench.providers.run_secrets`) and their state in the shared store
    (``runs/<run>``: tags, known_hosts), when expired, DAG run no longer running, or released in
    this sweep. A setup that failed removes its own; this catches a process that was killed before
    it could (its tags are written before its key, so a killed setup's key is always found)."""
    now = now or datetime.now(UTC)
    store = storage.store()
    actions = []
    for run_id in store.children("runs"):
        try:
            tags = Tags.from_dict(json.loads(store.read_text(storage.run_state_key(run_id, RUN_STATE_TAGS))))
        except (OSError, ValueError):
            tags = None
        if tags is None:
            modified = store.modified(storage.run_state_key(run_id))
            if modified is not None and time.time() - modified < STATE_WITHOUT_TAGS_MAX_AGE_S:
                continue
            reason = "no readable tags and older than a day"
        elif run_id in (released_runs or set()):
            reason = "its resources were released in this sweep"
        elif tags.expired(now):
            reason = f"expired at {tags.expires_at.isoformat()}"
        elif not is_active(tags):
            reason = f"DAG run {tags.dag_id}/{tags.dag_run_id} is no longer running"
        else:
            continue
        if not dry_run:
            remove_run_state(run_id)
        actions.append({"run_id": run_id, "reason": reason})
    return actions


def sweep(clouds: list[ProviderSettings], is_active: RunIsActive, *, dry_run: bool = False, docker: bool = True,
          now: datetime | None = None, local_vms: bool = True) -> dict[str, Any]:
    """Sweep every configured cloud, this host's QEMU guests (``local_vms``) and the local Docker
    engine; a JSON-able report of what was (or, dry run, would be) released, what was kept and
    why, and errors."""
    report: dict[str, Any] = {"dry_run": dry_run, "released": [], "kept": [], "containers": [], "keys": [],
                              "errors": []}
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
    verb = "would release" if dry_run else "released"
    for action in report["released"]:
        log.info("%s %s on %s (%s)%s", verb, action["name"], action["cloud"], action["reason"],
                 f" ERROR: {action['error']}" if action["error"] else "")
    for item in report["kept"]:
        log.info("kept run %s on %s (%s resources): %s", item["run_id"], item["cloud"], item["resources"],
                 item["reason"])
    for name in report["containers"]:
        log.info("%s container %s (expired)", verb, name)
    for item in report["keys"]:
        log.info("%s the private state (SSH key) of run %s: %s", "would remove" if dry_run else "removed",
                 item["run_id"], item["reason"])
    log.info("janitor: %d resource(s) %s, %d run(s) kept, %d container(s), %d error(s)", len(report["released"]),
             verb, len(report["kept"]), len(report["containers"]), len(report["errors"]))
    return report
