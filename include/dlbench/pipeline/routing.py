"""Where the benchmark DAG's tasks run: Celery queues and Airflow pools that match the hardware.

Why a deployment setting and not a form field: a task's queue and pool are fixed when the DAG is
parsed (Airflow cannot choose them per mapped index at run time), and they describe the
deployment (which worker sits next to which cloud, how many machines may benchmark at once), not
one run. So they come from the Airflow configuration, option ``[dlbench] routing`` (environment
form ``AIRFLOW__DLBENCH__ROUTING``), a JSON object::

    {"setup_queue": "dc-east",
     "routes": [{"name": "dc_east", "providers": ["ironic", "nova"], "queue": "dc-east",
                 "pool": "dlbench_dc_east"},
                {"name": "k8s", "providers": ["kubernetes", "magnum"], "queue": "k8s-west"}]}

- Each route gets its own mapped job task (``run_job__<name>``) on ``queue`` (a Celery queue
  that only workers near that cloud serve: ``airflow celery worker --queues dc-east``) and in
  ``pool``; a run's jobs go to the route of the provider that provisions their platform in that
  run. Jobs of providers named by no route stay on ``run_job`` (the default queue, pool
  :data:`DEFAULT_POOL`). Without the option the DAG is the single ``run_job`` it always was.
- ``setup_queue``: the queue of the tasks that reach clouds and machines outside a job
  (provision, release, the janitor's sweep). They serve every provider of a run, so the workers of
  that queue must reach every cloud's API and every machine's SSH. Unset: the default queue.

Bad values fail the DAG's import with the field named (``routing.routes[0].providers: ...``),
before any run can provision anything. Pools must exist (``airflow pools set NAME SLOTS DESC``;
``airflow_settings.yaml`` creates :data:`DEFAULT_POOL`); docs/scaling.md says how to size them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dlbench import settings
from dlbench.jobs import Job
from dlbench.providers.registry import provider_names
from dlbench.request import BenchmarkRequest

DEFAULT_POOL = "dlbench_benchmark"
"""The job pool of the default route: slots = benchmark jobs at once across all runs."""
ENV = settings.ROUTING.env
"""The option's environment form (the option itself: ``[dlbench] routing``; docs/settings.md)."""
JOB_TASK = "run_job"
"""The default route's mapped job task (also its prefix: ``run_job__<route>``)."""

_NAME = re.compile(r"^[a-z0-9_]{1,40}$")


class Route(BaseModel):
    """Jobs of these providers run on this queue, within this pool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """Names the route's job task, ``run_job__<name>``: lower-case letters, digits, ``_``."""
    providers: tuple[str, ...] = Field(min_length=1)
    queue: str | None = None
    """Celery queue; None: Airflow's ``[operators] default_queue``."""
    pool: str = DEFAULT_POOL

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} is not a route name: 1-40 of a-z, 0-9, _")
        return value

    @field_validator("providers")
    @classmethod
    def _providers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [p for p in value if p not in provider_names()]
        if unknown:
            raise ValueError(f"unknown provider {unknown[0]!r}; allowed: {', '.join(provider_names())}")
        return value

    @property
    def task_id(self) -> str:
        return f"{JOB_TASK}__{self.name}"


class Routing(BaseModel):
    """The deployment's routes (see the module's docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    setup_queue: str | None = None
    routes: tuple[Route, ...] = ()

    @model_validator(mode="after")
    def _one_route_per_provider(self) -> Routing:
        seen: dict[str, str] = {}
        for route in self.routes:
            for provider in route.providers:
                if provider in seen:
                    raise ValueError(f"provider {provider!r} is in routes {seen[provider]!r} and {route.name!r}: "
                                     "a provider's jobs go to one queue")
                seen[provider] = route.name
        names = [r.name for r in self.routes]
        if len(set(names)) != len(names):
            raise ValueError(f"route names repeat: {names}")
        return self

    def route_of(self, provider: str) -> Route | None:
        """The route of a provider's jobs; None: the default job task."""
        return next((r for r in self.routes if provider in r.providers), None)

    def task_of(self, provider: str) -> str:
        route = self.route_of(provider)
        return route.task_id if route else JOB_TASK


def parse_routing(raw: str | dict[str, Any] | None) -> Routing:
    """The routing from its JSON text (or object); empty: no routes. Errors name the field."""
    if raw in (None, "", {}):
        return Routing()
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        raise ValueError(f"[dlbench] routing is not JSON: {exc}") from None
    try:
        return Routing.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"[dlbench] routing.{where}: {first['msg']}".replace("routing.: ", "routing: ")) from None


def load_routing() -> Routing:
    """The deployment's routing: ``AIRFLOW__DLBENCH__ROUTING``, else ``[dlbench] routing`` of
    airflow.cfg (Airflow's own precedence), else none (:func:`dlbench.settings.routing`). Cheap:
    read at DAG parse time."""
    return parse_routing(settings.routing())


def jobs_for_task(jobs: list[dict[str, Any]], request: dict[str, Any], task_id: str,
                  routing: Routing) -> list[dict[str, Any]]:
    """The planned jobs that ``task_id`` runs: those whose platform's provider (in this run)
    is routed to it. Every job belongs to exactly one job task."""
    req = BenchmarkRequest.model_validate(request)
    return [job for job in jobs
            if routing.task_of(req.provider_for(Job.model_validate(job).platform).name) == task_id]
