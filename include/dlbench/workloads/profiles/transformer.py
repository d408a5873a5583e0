"""The ``transformer`` suite in a profile: a GPT-style decoder (GPT-2 small's shape by default),
its training and its generation (docs/transformer.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from dlbench.workloads.profiles.enums import Precision, TransformerTask


class TransformerSpec(BaseModel):
    """GPT-2 small's shape (12 layers, 12 heads, 768 wide, context 1024, vocabulary 50257) unless the
    profile says otherwise; random initialisation, synthetic token ids."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repetitions: PositiveInt = 3
    tasks: list[TransformerTask] = Field(default=[TransformerTask.TRAIN, TransformerTask.GENERATE], min_length=1)
    layers: PositiveInt = 12
    heads: PositiveInt = 12
    width: PositiveInt = 768
    context: PositiveInt = 1024
    vocabulary: PositiveInt = 50257
    precision: Precision = Precision.FP32
    batch_size: PositiveInt = 8
    warmup_steps: int = Field(default=10, ge=1)
    measured_steps: int = Field(default=50, ge=2)
    learning_rate: float = Field(default=6e-4, gt=0)
