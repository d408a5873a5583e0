"""Provisioning phase timings as result documents: boot and teardown time are capacity-planning
facts, so they go to the warehouse like any other sample (suite ``provisioning``)."""

from __future__ import annotations

import hashlib

from dlbench.workloads import environment
from dlbench.workloads.result import Benchmark, Platform, ResultDocument

PHASES = ("allocate", "create_to_active", "deploy_to_active", "reachable_over_ssh", "prepare", "stage_data",
          "undeploy", "delete")
"""Known phases, in lifecycle order (drivers name their own; unknown ones follow, sorted)."""
SUITE = "provisioning"


def timings_document(run_id: str, provider: str, node: str, platform: str, timings: dict[str, float],
                     index: int = 0, parameters: dict[str, str] | None = None) -> ResultDocument:
    """One document per node: a sample ``<phase>_time`` (s) per phase measured. Nodes of a run
    are repetitions of the same case (``index``), so the report shows mean/std over nodes; the
    node itself is a document label."""
    job_id = hashlib.sha256(f"{run_id}|{SUITE}|{node}".encode()).hexdigest()[:24]
    doc = ResultDocument(
        job_id=job_id, run_id=run_id, repetition=index,
        benchmark=Benchmark(suite=SUITE, name=provider, parameters=dict(parameters or {})),
        environment=environment.collect(Platform(platform)),
    )
    doc.environment.hostname = node  # the provisioned node, not the controller that measured it
    for phase in [*(p for p in PHASES if p in timings), *sorted(set(timings) - set(PHASES))]:
        doc.add(f"{phase}_time", float(timings[phase]), "s", phase=phase)
    doc.labels["job_label"] = f"{platform}/{SUITE}/{node}"
    doc.labels["node"] = node
    return doc
