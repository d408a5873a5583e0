"""The closed vocabularies of the studies: models, data kinds, scenarios, synchronisation modes,
distributed roles, the DL-tool networks and their data sources. Enums, so a request or a profile
naming anything else fails with the allowed values."""

from __future__ import annotations

from enum import StrEnum


class ModelName(StrEnum):
    """Image-classification models of the core study (names as in tf_cnn_benchmarks)."""

    INCEPTION3 = "inception3"
    RESNET50 = "resnet50"
    ALEXNET = "alexnet"


class DataKind(StrEnum):
    SYNTHETIC = "synthetic"
    REAL = "real"


class Scenario(StrEnum):
    """The core study's three scenarios (004 section 3.3): one instance; one job across instances
    (1 parameter server + 2 workers); a job next to a background job on the same machine."""

    SINGLE = "single"
    DISTRIBUTED = "distributed"
    SHARED = "shared"


class DistributedMode(StrEnum):
    """How the roles of a distributed job synchronise. ``distributed_replicated`` is the study's
    (TF1 tf_cnn_benchmarks, synchronous through the parameter server); ``multi_worker_mirrored``
    is TF 2's synchronous all-reduce between workers (no parameter server): a different experiment,
    labelled as such."""

    DISTRIBUTED_REPLICATED = "distributed_replicated"
    MULTI_WORKER_MIRRORED = "multi_worker_mirrored"
    DDP = "ddp"
    """PyTorch's DistributedDataParallel: one process per instance, gradients all-reduced (Gloo on
    CPUs, NCCL on GPUs), rendezvous at the first worker's address."""
    JAX_DISTRIBUTED = "jax_distributed"
    """``jax.distributed``: one process per instance, the first worker the coordinator, gradients
    averaged by XLA collectives across the processes."""

    @property
    def has_parameter_servers(self) -> bool:
        return self is DistributedMode.DISTRIBUTED_REPLICATED


class Framework(StrEnum):
    """The software a job runs in, one image each. Training frameworks (:data:`TRAINING_FRAMEWORKS`):
    what a ``tf_cnn`` job trains with (docs/frameworks.md): the same
    networks (tf_cnn_benchmarks' architectures, one definition each), protocol and documents.
    ``tensorflow`` is the core study's and the default; a document without a ``framework``
    parameter (every run before frameworks existed) is TensorFlow."""

    TENSORFLOW = "tensorflow"
    PYTORCH = "pytorch"
    JAX = "jax"
    VLLM = "vllm"
    """The ``serving`` suite's inference server (on PyTorch): not a training framework, but the
    software a job runs in, with its own image and environment like the others."""

    @property
    def trains(self) -> bool:
        """A training framework (what ``tf_cnn`` jobs and requests' ``frameworks`` may name)."""
        return self is not Framework.VLLM

    @property
    def distributed_modes(self) -> tuple[DistributedMode, ...]:
        """How this framework's distributed job can synchronise (the first is its default)."""
        if self is Framework.VLLM:
            return ()
        if self is Framework.PYTORCH:
            return (DistributedMode.DDP,)
        if self is Framework.JAX:
            return (DistributedMode.JAX_DISTRIBUTED,)
        return (DistributedMode.DISTRIBUTED_REPLICATED, DistributedMode.MULTI_WORKER_MIRRORED)


TRAINING_FRAMEWORKS: tuple[Framework, ...] = tuple(f for f in Framework if f.trains)
"""The frameworks a ``tf_cnn`` job may train with, in order (a request's ``frameworks``)."""


class Precision(StrEnum):
    """The arithmetic of a training step (a profile field; recorded in every document, part of the
    case key when not ``fp32``). ``fp32`` is the study's; ``tf32`` lets matrix units round inputs
    to 10-bit mantissas (NVIDIA Ampere or newer: refused elsewhere, a CPU has none); ``bf16`` is
    mixed precision: bfloat16 compute, float32 weights and loss."""

    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"


class DistributedRole(StrEnum):
    """A process's role in a distributed job: a parameter server (``distributed_replicated`` only)
    or a worker. The profile's roles, the workload's ``--role`` and the ``--cluster`` keys."""

    PS = "ps"
    WORKER = "worker"


class DLToolModel(StrEnum):
    """Study 001's deep-learning-tool networks (Table VII): FCN5 on MNIST, AlexNet and ResNet-50 on
    CIFAR-10, a 2-layer LSTM on PTB (architectures: docs/dltools.md)."""

    FCN5 = "fcn5"
    ALEXNET = "alexnet"
    RESNET50 = "resnet50"
    LSTM = "lstm"


class DLToolsData(StrEnum):
    """Where a DL-tool network's data comes from: ``auto`` the real data set when it is in the data
    directory, else generated data of its shapes; ``real`` it must be there; ``synthetic`` always
    generated."""

    AUTO = "auto"
    REAL = "real"
    SYNTHETIC = "synthetic"


class FathomModel(StrEnum):
    """Fathom's eight reference workloads (Adolf et al., IISWC 2016; study 003 ran them native and
    in containers), re-implemented for TensorFlow 2 (docs/fathom.md)."""

    SEQ2SEQ = "seq2seq"
    MEMNET = "memnet"
    SPEECH = "speech"
    AUTOENC = "autoenc"
    RESIDUAL = "residual"
    VGG = "vgg"
    ALEXNET = "alexnet"
    DEEPQ = "deepq"


class FathomTask(StrEnum):
    """Fathom's two modes: training steps, or inference (the forward pass only)."""

    TRAIN = "train"
    INFER = "infer"


class TransformerTask(StrEnum):
    """What a ``transformer`` job measures: training steps of the decoder, or generation (a batch of
    prompts, then new tokens one at a time with a key/value cache)."""

    TRAIN = "train"
    GENERATE = "generate"
