"""The environment section: where every number was measured (hardware, versions, container limits,
CPU affinity and NUMA per platform and host) and how loaded the machines were while it ran
(:mod:`dlbench.reports.analysis.machine_load`, the flag that marks a measurement not to trust).
"""

from __future__ import annotations

import html

import pandas as pd
from sqlalchemy import Engine, select

from dlbench.reports.analysis import machine_load
from dlbench.reports.analysis.formatting import fmt, platform_index
from dlbench.reports.rendering.tables import scroll
from dlbench.reports.sections.base import RunView
from dlbench.warehouse.models import Environment, Execution, Run


def _ranges(cpus: list[int]) -> str:
    """``0-3,8`` for [0, 1, 2, 3, 8]."""
    parts: list[str] = []
    for cpu in sorted(set(cpus)):
        if parts and "-" in parts[-1] and int(parts[-1].split("-")[1]) == cpu - 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{cpu}"
        elif parts and "-" not in parts[-1] and int(parts[-1]) == cpu - 1:
            parts[-1] = f"{parts[-1]}-{cpu}"
        else:
            parts.append(str(cpu))
    return ",".join(parts)


def _environments_html(engine: Engine, run_id: str) -> str:
    query = (select(Environment.platform, Environment.hostname, Environment.cpu_model, Environment.cpu_count,
                    Environment.memory_bytes, Environment.gpu_model, Environment.gpu_count, Environment.gpu_driver,
                    Environment.tensorflow_version, Environment.cuda_version, Environment.in_container,
                    Environment.container_runtime, Environment.cpu_limit_cores, Environment.memory_limit_bytes,
                    Environment.details)
             .join(Execution, Execution.environment_id == Environment.id).join(Run, Execution.run_pk == Run.id)
             .where(Run.run_id == run_id).distinct())
    with engine.connect() as conn:
        rows = sorted(conn.execute(query).all(), key=lambda r: (platform_index(r.platform), r.hostname or ""))
    cells = []
    for r in rows:
        details = r.details or {}
        versions = dict(details.get("versions") or {})
        for key, value in (("TensorFlow", r.tensorflow_version), ("CUDA", r.cuda_version),
                           ("GPU driver", r.gpu_driver), ("kernel", details.get("kernel")), ("OS", details.get("os")),
                           ("Python", details.get("python"))):
            if value and key.lower() not in {k.lower() for k in versions}:
                versions[key] = value
        affinity = details.get("cpu_affinity") or []
        numa = details.get("numa_nodes") or []
        container = (f"{r.container_runtime or 'yes'}; CPU limit {r.cpu_limit_cores if r.cpu_limit_cores else 'none'}"
                     f"; memory limit "
                     f"{f'{r.memory_limit_bytes / 2**30:.1f} GiB' if r.memory_limit_bytes else 'none'}"
                     if r.in_container else "no")
        cells.append("<tr>" + "".join(f"<td>{html.escape(str(v if v not in (None, '') else '-'))}</td>" for v in (
            r.platform, r.hostname, r.cpu_model, r.cpu_count,
            f"{r.memory_bytes / 2**30:.1f} GiB" if r.memory_bytes else None,
            f"{r.gpu_count} × {r.gpu_model}" if r.gpu_count else "none", container,
            f"{_ranges(affinity)} ({len(affinity)} CPUs)" if affinity else None,
            ",".join(map(str, numa)) if numa else None,
            "; ".join(f"{k} {v}" for k, v in sorted(versions.items())),
        )) + "</tr>")
    return scroll("<table class='env'><tr><th>platform</th><th>host</th><th>CPU</th><th>cores</th><th>memory</th>"
            "<th>GPUs</th><th>container (limits)</th><th>CPU affinity</th><th>NUMA nodes</th><th>versions</th></tr>"
            f"{''.join(cells)}</table>")


def _load_html(table: pd.DataFrame) -> str:
    if table.empty:
        return "<p class='note'>The documents of this run carry no machine-load readings (written before they " \
               "were recorded).</p>"

    rows = []
    for platform, group in table.groupby("platform", sort=False):
        before = [float(v) for v in group["host_load1_before"].dropna()]
        steal = [float(v) for v in group["host_steal_share"].dropna()]
        other = [float(v) for v in group["other_cores"].dropna()]
        rows.append((platform_index(str(platform)), f"<tr><td>{html.escape(str(platform))}</td><td>{len(group)}</td>"
                     f"<td>{fmt(max(before) if before else None, 3)}</td>"
                     f"<td>{fmt(max(steal) * 100 if steal else None, 2)}</td>"
                     f"<td>{fmt(max(other) if other else None, 3)}</td>"
                     f"<td>{int(group['loaded'].notna().sum())}</td></tr>"))
    flagged = table[table["loaded"].notna()]
    items = "".join(f"<li>{html.escape(r.platform)} {html.escape(r.suite)}/{html.escape(r.name)} repetition "
                    f"{r.repetition}: {html.escape(r.loaded)}</li>" for r in flagged.itertuples())
    return ("<p class='note'>Read before and after every job by the workload harness (/proc/loadavg, /proc/stat). "
            "A job ran on a <b>loaded machine</b> when, while it ran, processes outside its own process tree used "
            f"more than {machine_load.OTHER_CORES_FLOOR:.2f} cores and more than "
            f"{machine_load.OTHER_SHARE_OF_JOB * 100:.0f}% of "
            "the cores the job used (the run's own controller was measured at "
            f"{machine_load.CONTROLLER_OTHER_CORES:.2f} cores) or the hypervisor stole more than "
            f"{machine_load.STEAL_THRESHOLD * 100:.0f}% of the CPU time (docs/statistics.md); the load average "
            "before a job "
            "is context only: jobs run back to back, so it mostly holds the previous job. In the "
            "shared scenario and for distributed roles on one host the other processes are the experiment.</p>"
            + scroll("<table><tr><th>platform</th><th>jobs</th><th>max load before</th><th>max steal %</th>"
                     "<th>max other cores</th><th>loaded jobs</th></tr>"
                     + "".join(r for _, r in sorted(rows, key=lambda item: item[0])) + "</table>")
            + (f"<ul class='note bad'>{items}</ul>" if items else ""))


class EnvironmentSection:
    id = "environment"
    title: str | None = "Environment"
    style = ""

    def html(self, run: RunView) -> str:
        return ("<h2 id='environment'>Environment</h2>" + _environments_html(run.engine, run.run_id)
                + "<h3 id='load'>Machine load</h3>" + _load_html(run.load))

    def text(self, run: RunView) -> list[str]:
        return []  # the answer's flags (⚠ loaded machine) say what the reader must know; the page has the rest
