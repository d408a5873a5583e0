"""The sweep policy every provider's resources go through: keep or release a run's resources.

Used by the janitor (:mod:`dlbench.providers.janitor`, every configured cloud) and by providers
that sweep their own leftovers before a run (the local provider's guests, a Kubernetes cluster's
namespaces), so there is one rule for what is a leak.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from dlbench.polling import Deadline
from dlbench.providers.base import Driver, Instance, RunIsActive, SweepAction, Tags

RELEASED_ELSEWHERE = "released_elsewhere"
"""``Instance.details`` key a driver's delete sets on a resource another caller (a concurrent sweep,
the run's own teardown) released first: this sweep does not report it as released by itself."""


def decide(instances: list[Instance], is_active: RunIsActive, now: datetime) -> tuple[str, bool]:
    """(reason, keep?) for one run's resources.

    The lease decides when there is one: unexpired = kept, even past the expiry (a live task
    renews it, and a long paper run is alive; a killed run's last lease cannot be told from it
    until it lapses, so the reason says only what is known); lapsed = nothing of the run is alive
    (released, whatever Airflow's metadata says: a killed ``dag.test()`` is never marked failed by
    a scheduler, so the janitor marks it, :func:`dlbench.providers.janitor.close_runs`). Resources
    without a lease fall back to the expiry and the DAG run's state."""
    return decide_tags([i.tags for i in instances], is_active, now)


def decide_tags(found: list[Tags], is_active: RunIsActive, now: datetime) -> tuple[str, bool]:
    """:func:`decide` on the tags of a run's resources, or of its record beside its secrets
    (:func:`dlbench.providers.run_secrets.run_record`): one rule for both."""
    tags = min(found, key=lambda t: t.expires_at)
    leases = [t.lease_until for t in found if t.lease_until is not None]
    if leases:
        lease = max(leases)
        if lease > now:
            past = "; its expiry has passed (a long run looks the same)" if tags.expired(now) else ""
            # What is known: the lease is unexpired. Whether a task of the run still renews it is
            # not (a SIGKILLed run's last lease looks the same until it lapses).
            return (f"lease of run {tags.run_id} unexpired until {lease.isoformat()}: kept until then (renewed "
                    f"while a task of the run lives; a killed run's lease lapses by then){past}"), True
        return f"lease lapsed at {lease.isoformat()}: no live task of the run renewed it", False
    if tags.expired(now):
        return f"expired at {tags.expires_at.isoformat()}", False
    if not is_active(tags):
        return f"DAG run {tags.dag_id}/{tags.dag_run_id} is no longer running", False
    return f"run still active, expires at {tags.expires_at.isoformat()}", True


def sweep_runs(found: dict[str, list[Instance]], release: Callable[[str, list[Instance]], object],
               is_active: RunIsActive, *, now: datetime | None = None, dry_run: bool = False
               ) -> tuple[list[SweepAction], list[dict[str, str]]]:
    """(released or would-release actions, kept runs with the reason) for resources found by run:
    :func:`decide` per run, ``release(run_id, instances)`` for the runs it gives up (not in a dry
    run). A failed release is reported on each of the run's resources and the sweep goes on."""
    now = now or datetime.now(UTC)
    actions, kept = [], []
    for run_id, instances in found.items():
        reason, keep = decide(instances, is_active, now)
        if keep:
            kept.append({"run_id": run_id, "resources": str(len(instances)), "reason": reason})
            continue
        error = ""
        if not dry_run:
            try:
                release(run_id, instances)
            except Exception as exc:  # noqa: BLE001 - reported per resource, the sweep goes on
                error = str(exc)
        for inst in instances:
            if inst.details.get(RELEASED_ELSEWHERE):
                continue
            actions.append(SweepAction(resource_id=inst.id or str(inst.details.get("allocation_id")),
                                       name=inst.name, reason=reason, released=not dry_run and not error, error=error,
                                       run_id=run_id, dag_id=inst.tags.dag_id, dag_run_id=inst.tags.dag_run_id))
    return actions, kept


def sweep_driver(driver: Driver, release_timeout: float, is_active: RunIsActive, *, now: datetime | None = None,
                 dry_run: bool = False) -> tuple[list[SweepAction], list[dict[str, str]]]:
    """(released or would-release actions, kept runs with the reason) for one driver's resources."""
    return sweep_runs(driver.find(), lambda run_id, instances: driver.delete(
        instances, Deadline(release_timeout, f"janitor release of run {run_id}")), is_active, now=now, dry_run=dry_run)
