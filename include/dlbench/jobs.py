"""What a benchmark run is made of below the request: suites, the jobs of the matrix, their ids.

Low enough that executors, providers and the pipeline all use it without loading any provider
(:mod:`dlbench.request` builds jobs from a validated request; this module knows nothing of it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dlbench.profiles import get_profile
from dlbench.workloads.profiles import DataKind, Framework, Scenario, is_builtin, profile_digest, profile_to_argument
from dlbench.workloads.result import Platform


class Suite(StrEnum):
    """Benchmark suites: ``tf_cnn`` is the core study's training benchmark; ``dltools`` study 001's
    DL-tool training set (FCN5, AlexNet, ResNet-50 on MNIST/CIFAR-10, LSTM on PTB); ``fathom`` study
    003's eight Fathom workloads; ``transformer`` a GPT-style decoder's training and generation; the
    others are the micro-benchmarks that explain them (study 001's CPU/GPU/disk, study 003's DeepBench
    kernels)."""

    TF_CNN = "tf_cnn"
    CPU = "cpu"
    GPU = "gpu"
    DEEPBENCH = "deepbench"
    DISK = "disk"
    NETWORK = "network"
    DLTOOLS = "dltools"
    FATHOM = "fathom"
    TRANSFORMER = "transformer"


BENCHMARK_DAG_ID = "dlbench_benchmark"
"""The benchmark DAG's id (dags/dlbench_benchmark.py declares it from here): the explorer's
permissions are this DAG's, its DAG-run links point at it, ``make run`` runs it."""

OPT_IN_SUITES: tuple[Suite, ...] = (Suite.DLTOOLS, Suite.FATHOM, Suite.TRANSFORMER)
"""Asked for by name only: study 001's DL-tool set (16 jobs per platform even in smoke), Fathom's
eight workloads in two tasks, the transformer's training and generation."""

DEFAULT_SUITES: tuple[Suite, ...] = tuple(s for s in Suite if s not in OPT_IN_SUITES)
"""What a request without ``suites`` runs: the core study and the micro-benchmarks that explain it."""


SUITE_COMMANDS: dict[str, str] = {
    Suite.TF_CNN.value: "tf-cnn", Suite.CPU.value: "cpu", Suite.GPU.value: "gpu",
    Suite.DEEPBENCH.value: "deepbench", Suite.DISK.value: "disk", Suite.NETWORK.value: "network",
    Suite.DLTOOLS.value: "dltools", Suite.FATHOM.value: "fathom", Suite.TRANSFORMER.value: "transformer",
}
"""Suite -> the workload CLI subcommand that runs it."""


TRANSFORMER_FRAMEWORK = Framework.PYTORCH
"""The framework of the ``transformer`` suite's decoder (its jobs name it: ``framework_arg``)."""


def suite_frameworks(suite: Suite, frameworks: Iterable[Framework]) -> set[Framework]:
    """The frameworks a suite's jobs run with: ``tf_cnn`` the request's, ``transformer`` PyTorch, every
    other suite TensorFlow (its code is TensorFlow's, or a micro-benchmark in the TensorFlow image)."""
    if suite is Suite.TF_CNN:
        return set(frameworks)
    return {TRANSFORMER_FRAMEWORK} if suite is Suite.TRANSFORMER else {Framework.TENSORFLOW}


def framework_arg(framework: Framework) -> dict[str, str]:
    """A tf_cnn cell's ``framework`` argument: absent for tensorflow, so a TensorFlow job's id, arguments and
    documents are what they were before frameworks existed (old runs stay comparable)."""
    return {} if framework is Framework.TENSORFLOW else {"framework": framework.value}


def framework_of(args: Mapping[str, object]) -> Framework:
    """The framework a job's arguments name (:func:`framework_arg`'s inverse): none (the micro-benchmarks,
    dltools, fathom, tf_cnn on TensorFlow) is TensorFlow."""
    return Framework(str(args.get("framework", Framework.TENSORFLOW.value)))


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

    def workload_argv(self, out: str, data_dir: str | None = None) -> list[str]:
        """Arguments after ``python -m dlbench.workloads`` for this job."""
        argv = [
            self.command, "--out", out, "--run-id", self.run_id, "--job-id", self.job_id,
            "--repetition", str(self.repetition), "--platform", self.platform.value, "--profile", self.profile,
        ]
        profile = get_profile(self.profile)
        here = profile_digest(profile, self.suite)
        if self.profile_digest is not None and here != self.profile_digest:
            raise ValueError(f"profile {self.profile!r} here has digest {here}, but the job was "
                             f"planned with {self.profile_digest}: pass the run's request to run_job (it carries "
                             "the pinned profile)")
        if not is_builtin(profile):  # a user profile: the machine running the job may not know it
            argv += ["--profile-spec", profile_to_argument(profile)]
        for key, value in self.args.items():
            if isinstance(value, bool):  # a switch: present or absent
                argv += [f"--{key.replace('_', '-')}"] if value else []
            else:
                argv += [f"--{key.replace('_', '-')}", str(value)]
        reads_data = self.args.get("data") == DataKind.REAL.value or (
            self.suite in (Suite.DLTOOLS.value, Suite.FATHOM.value)
            and self.args.get("data") != DataKind.SYNTHETIC.value)
        if data_dir and (reads_data or self.suite == Suite.DISK.value):
            argv += ["--data-dir", data_dir]  # the disk suite tests the directory real data is read from
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
