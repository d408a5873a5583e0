"""What a benchmark run is made of below the request: the jobs of the matrix, their ids (the suites
they run are :mod:`dlbench.suites`'s).

Low enough that executors, providers and the pipeline all use it without loading any provider
(:mod:`dlbench.request` builds jobs from a validated request; this module knows nothing of it).
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dlbench.profiles import get_profile
from dlbench.suites import find_spec
from dlbench.suites.spec import reads_real_data
from dlbench.workloads.profiles import Scenario, is_builtin, profile_digest, profile_to_argument
from dlbench.workloads.result import Platform

BENCHMARK_DAG_ID = "dlbench_benchmark"
"""The benchmark DAG's id (dlbench.dags.benchmark declares it from here): the explorer's
permissions are this DAG's, its DAG-run links point at it, ``make run`` runs it."""


class Job(BaseModel):
    """One cell of the matrix: one workload execution on one platform."""

    model_config = ConfigDict(extra="forbid")

    job_id: str
    run_id: str
    platform: Platform
    suite: str
    command: str
    args: dict[str, str | int | float | bool] = Field(default_factory=dict)
    profile: str
    profile_digest: str | None = None
    """Digest of the profile the job was planned with (:func:`profile_digest`): the workload's
    argv refuses a different definition under the same name, and the document records it."""
    timeout_s: int | None = None
    """Derived from the profile's planned work (:func:`job_timeout`); None: derived when run."""
    repetition: int = 0
    scenario: Scenario = Scenario.SINGLE
    """single: the workload runs once on one target; distributed/shared: the cell of a group of
    cooperating workloads that :mod:`dlbench.pipeline.scenarios` starts, stops and aggregates."""
    machine: int | None = Field(default=None, ge=0)
    """The index of the machine this job runs on among its platform's targets (in the stable order
    of :func:`dlbench.execution.placement.pick_target`), set by a fleet survey (``every_machine``); None:
    the job goes to a machine picked by a hash of its id."""

    @property
    def label(self) -> str:
        scenario = [] if self.scenario is Scenario.SINGLE else [self.scenario.value]
        machine = [] if self.machine is None else [f"m{self.machine}"]
        parts = [self.platform.value, self.suite, *scenario, *(str(v) for v in self.args.values()), *machine,
                 f"r{self.repetition}"]
        return "/".join(parts)

    def profile_argv(self) -> list[str]:
        """``--profile`` (and ``--profile-spec`` for a user profile the machine running the job may
        not know): how any workload command of this job names the profile it was planned with."""
        profile = get_profile(self.profile)
        here = profile_digest(profile, self.suite)
        if self.profile_digest is not None and here != self.profile_digest:
            raise ValueError(f"profile {self.profile!r} here has digest {here}, but the job was "
                             f"planned with {self.profile_digest}: pass the run's request to run_job (it carries "
                             "the pinned profile)")
        return ["--profile", self.profile, *([] if is_builtin(profile) else ["--profile-spec",
                                                                             profile_to_argument(profile)])]

    def workload_argv(self, out: str, data_dir: str | None = None) -> list[str]:
        """Arguments after ``python -m dlbench.workloads`` for this job."""
        argv = [
            self.command, "--out", out, "--run-id", self.run_id, "--job-id", self.job_id,
            "--repetition", str(self.repetition), "--platform", self.platform.value, *self.profile_argv(),
        ]
        for key, value in self.args.items():
            if isinstance(value, bool):  # a switch: present or absent
                argv += [f"--{key.replace('_', '-')}"] if value else []
            else:
                argv += [f"--{key.replace('_', '-')}", str(value)]
        spec = find_spec(self.suite)
        reads_data = spec.reads_data if spec is not None else reads_real_data  # a suite outside the registry
        if data_dir and reads_data(self.args):
            argv += ["--data-dir", data_dir]
        return argv


def job_id_for(run_id: str, platform: str, suite: str, args: dict[str, Any], repetition: int,
               scenario: Scenario = Scenario.SINGLE, machine: int | None = None) -> str:
    """Deterministic id: re-running a task for the same cell overwrites, never duplicates. A fleet
    survey's machine index is part of it (one document per machine); without one the id is as before."""
    parts = [run_id, platform, suite, repr(sorted(args.items())), str(repetition)]
    if scenario is not Scenario.SINGLE:
        parts.append(scenario.value)
    if machine is not None:
        parts.append(f"machine={machine}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]
