"""Benchmark profiles: the parameters of every study, as validated data.

One module per concern; this package re-exports their public names, so
``from dlbench.workloads.profiles import X`` stays the one way in for the workloads, the
controller, the DAG file, bench scripts and tests (the submodules are how it is organised, not
separate interfaces):

- :mod:`~dlbench.workloads.profiles.enums`: models, data kinds, scenarios, modes, DL-tool networks;
- :mod:`~dlbench.workloads.profiles.schema`: the profile model, its digest, :class:`ProfileError`;
- :mod:`~dlbench.workloads.profiles.loading`: the built-ins (``profiles.yaml``) and user profiles
  from YAML with ``extends:`` inheritance; a user file is read from the path its caller passes;
- :mod:`~dlbench.workloads.profiles.catalog`: lookup by name and explicit registration;
- :mod:`~dlbench.workloads.profiles.argv`: a profile on a workload's command line (``--profile-spec``);
- :mod:`~dlbench.workloads.profiles.timeouts`: job timeouts derived from a profile's planned work.

Like all of :mod:`dlbench.workloads`, nothing here imports the rest of dlbench or Airflow, and
nothing here reads the environment: workloads on remote machines import it.
"""

from __future__ import annotations

from dlbench.workloads.profiles.argv import profile_from_argument, profile_to_argument
from dlbench.workloads.profiles.catalog import (
    all_profiles,
    get_profile,
    is_builtin,
    profile_names,
    register_profile,
    register_user_profiles,
)
from dlbench.workloads.profiles.enums import (
    TRAINING_FRAMEWORKS,
    DataKind,
    DistributedMode,
    DistributedRole,
    DLToolModel,
    DLToolsData,
    FathomModel,
    FathomTask,
    Framework,
    ModelName,
    Precision,
    Scenario,
    TransformerTask,
)
from dlbench.workloads.profiles.fathom import FathomModelSpec, FathomSpec
from dlbench.workloads.profiles.loading import (
    PROFILES_FILE,
    PROFILES_FILE_ENV,
    file_profiles,
    load_profiles,
    parse_profiles_text,
    parse_user_profiles,
    resolve_profiles,
)
from dlbench.workloads.profiles.schema import (
    DLTOOLS_TRAIN_EXAMPLES,
    LATER_SECTIONS,
    LSTM_SEQUENCE_LENGTH,
    CpuSpec,
    DeepBenchSpec,
    DiskSpec,
    DistributedSpec,
    DLToolSpec,
    DLToolsSpec,
    GpuSpec,
    MicroSpec,
    MicroSuite,
    NetworkSpec,
    Profile,
    ProfileError,
    ScenarioSpecs,
    SharedSpec,
    TrainingSpec,
    batches_per_full_epoch,
    profile_digest,
)
from dlbench.workloads.profiles.serving import LatencyTarget, ServingModel, ServingSpec
from dlbench.workloads.profiles.timeouts import MIN_JOB_TIMEOUT_S, job_timeout, planned_work
from dlbench.workloads.profiles.transformer import TransformerSpec

__all__ = [
    "DLTOOLS_TRAIN_EXAMPLES", "LSTM_SEQUENCE_LENGTH", "MIN_JOB_TIMEOUT_S", "PROFILES_FILE", "PROFILES_FILE_ENV",
    "CpuSpec", "DLToolModel", "DLToolSpec", "DLToolsSpec", "DataKind", "DeepBenchSpec", "DiskSpec", "DistributedMode",
    "DistributedRole", "DLToolsData", "DistributedSpec", "FathomModel", "FathomModelSpec", "FathomSpec", "FathomTask",
    "Framework", "GpuSpec", "MicroSpec", "MicroSuite", "ModelName",
    "NetworkSpec", "Precision", "Profile", "ProfileError", "Scenario", "ScenarioSpecs", "SharedSpec", "TrainingSpec",
    "LATER_SECTIONS", "LatencyTarget", "ServingModel", "ServingSpec", "TRAINING_FRAMEWORKS",
    "TransformerSpec", "TransformerTask", "all_profiles",
    "batches_per_full_epoch", "file_profiles", "get_profile", "is_builtin", "job_timeout", "load_profiles",
    "parse_profiles_text", "parse_user_profiles", "planned_work", "profile_digest", "profile_from_argument",
    "profile_names", "profile_to_argument", "register_profile", "register_user_profiles", "resolve_profiles",
]
