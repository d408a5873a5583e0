"""The leak janitor: release our resources whose expiry passed or whose DAG run has ended.

Why a janitor at all: a worker killed mid-provisioning, a teardown that failed three times, or a
DAG run marked failed by hand can each leave a GPU node deployed. Every resource carries
:class:`~dlbench.provisioning.base.Tags`; the janitor lists tagged resources only, so anything
without our tag is never touched.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from dlbench.provisioning.base import RunIsActive, Tags

log = logging.getLogger(__name__)

ACTIVE_STATES = ("queued", "running")


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


def sweep(settings: Any, is_active: RunIsActive, *, dry_run: bool = False, docker: bool = True,
          now: datetime | None = None) -> dict[str, Any]:
    """Sweep Ironic (``settings``: :class:`dlbench.config.IronicSettings`, or None to skip) and the
    local Docker engine; return a JSON-able report of what was (or, dry run, would be) released."""
    report: dict[str, Any] = {"dry_run": dry_run, "ironic": [], "containers": [], "errors": []}
    if settings is not None:
        try:
            from dlbench.pipeline.ironic_backend import provisioner_for

            actions = provisioner_for(settings).sweep(is_active, now=now, dry_run=dry_run,
                                                      timeout=settings.undeploy_timeout)
            report["ironic"] = [dataclasses.asdict(a) for a in actions]
        except Exception as exc:  # noqa: BLE001 - report it and still sweep containers
            report["errors"].append(f"ironic: {type(exc).__name__}: {exc}")
    if docker:
        try:
            from dlbench.execution.image import docker_available

            if docker_available()[0]:
                from dlbench.execution.docker import sweep_containers

                report["containers"] = sweep_containers(now=now, dry_run=dry_run)
        except Exception as exc:  # noqa: BLE001
            report["errors"].append(f"docker: {type(exc).__name__}: {exc}")
    verb = "would release" if dry_run else "released"
    for action in report["ironic"]:
        log.info("%s %s (%s)%s", verb, action["name"], action["reason"],
                 f" ERROR: {action['error']}" if action["error"] else "")
    for name in report["containers"]:
        log.info("%s container %s (expired)", verb, name)
    log.info("janitor: %d Ironic resource(s), %d container(s), %d error(s)", len(report["ironic"]),
             len(report["containers"]), len(report["errors"]))
    return report
