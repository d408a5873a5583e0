"""Study 003's Fathom suite in a profile: Fathom's default hyper-parameters (``paper``) or tiny
sizes (``smoke``), one spec per workload (docs/fathom.md says where every default comes from).

The defaults are Fathom's, so a user profile written before this suite existed still validates
and a ``fathom:`` block need only name what it changes.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from dlbench.workloads.profiles.enums import FathomModel, FathomTask


class FathomModelSpec(BaseModel):
    """What every Fathom workload has: its batch size and its optimizer's learning rate. Each
    workload's subclass adds its architecture's sizes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_size: PositiveInt
    learning_rate: float = Field(gt=0)


# -- the workloads' specs (architecture sizes: Fathom's defaults) --------------------------------


class Seq2SeqSpec(FathomModelSpec):
    batch_size: PositiveInt = 64
    learning_rate: float = Field(default=0.5, gt=0)


class MemNetSpec(FathomModelSpec):
    batch_size: PositiveInt = 32
    learning_rate: float = Field(default=0.01, gt=0)


class SpeechSpec(FathomModelSpec):
    batch_size: PositiveInt = 32
    learning_rate: float = Field(default=1e-4, gt=0)


class AutoencSpec(FathomModelSpec):
    batch_size: PositiveInt = 100
    learning_rate: float = Field(default=1e-3, gt=0)


class ResidualSpec(FathomModelSpec):
    batch_size: PositiveInt = 64
    learning_rate: float = Field(default=0.1, gt=0)


class VGGSpec(FathomModelSpec):
    batch_size: PositiveInt = 32
    learning_rate: float = Field(default=0.01, gt=0)


class AlexNetSpec(FathomModelSpec):
    batch_size: PositiveInt = 128
    learning_rate: float = Field(default=0.01, gt=0)


class DeepQSpec(FathomModelSpec):
    batch_size: PositiveInt = 32
    learning_rate: float = Field(default=2.5e-4, gt=0)


class FathomSpec(BaseModel):
    """Fathom's eight workloads: each in each task (training steps, inference), ``warmup_steps``
    untimed then ``measured_steps`` timed steps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repetitions: PositiveInt = Field(default=3, description="executions of each workload and task")
    warmup_steps: int = Field(default=10, ge=1, description="untimed steps first (tracing, first touches)")
    measured_steps: int = Field(default=100, ge=2, description="timed steps")
    tasks: list[FathomTask] = Field(default=[FathomTask.TRAIN, FathomTask.INFER], min_length=1)
    models: list[FathomModel] = Field(default=list(FathomModel), min_length=1,
                                      description="the workloads a run plans (default all eight)")
    seq2seq: Seq2SeqSpec = Seq2SeqSpec()
    memnet: MemNetSpec = MemNetSpec()
    speech: SpeechSpec = SpeechSpec()
    autoenc: AutoencSpec = AutoencSpec()
    residual: ResidualSpec = ResidualSpec()
    vgg: VGGSpec = VGGSpec()
    alexnet: AlexNetSpec = AlexNetSpec()
    deepq: DeepQSpec = DeepQSpec()

    def model(self, name: FathomModel | str) -> FathomModelSpec:
        spec: FathomModelSpec = getattr(self, FathomModel(name).value)
        return spec
