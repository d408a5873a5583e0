"""Benchmark profiles: the parameters of every study, as validated data.

The numbers live in ``profiles.yaml`` beside this module; this module is the one config
model that validates them, so a typo in a profile fails at load time with the field's name.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

PROFILES_FILE = Path(__file__).with_name("profiles.yaml")


class ModelName(StrEnum):
    """Image-classification models of the core study (names as in tf_cnn_benchmarks)."""

    INCEPTION3 = "inception3"
    RESNET50 = "resnet50"
    ALEXNET = "alexnet"


class DataKind(StrEnum):
    SYNTHETIC = "synthetic"
    REAL = "real"


class TrainingSpec(BaseModel):
    """How one model trains in one profile (Table 1 of the core study for ``paper``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_size_per_device: int = Field(gt=0)
    image_size: int = Field(gt=0)
    num_classes: int = Field(gt=1)
    warmup_steps: int = Field(ge=0)
    measured_steps: int = Field(gt=0)
    data_format: Literal["NHWC"] = "NHWC"
    optimizer: Literal["sgd"] = "sgd"
    learning_rate: float = Field(gt=0)
    variable_update: Literal["parameter_server", "mirrored"] = "parameter_server"
    local_parameter_device: Literal["cpu", "gpu"] = "cpu"


class Profile(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    description: str
    repetitions: int = Field(gt=0)
    tf_cnn: dict[ModelName, TrainingSpec]

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("tf_cnn"), dict):
            tf_cnn = dict(data["tf_cnn"])
            defaults = tf_cnn.pop("defaults", {}) or {}
            data = {**data, "tf_cnn": {k: {**defaults, **v} for k, v in tf_cnn.items()}}
        return data

    @model_validator(mode="after")
    def _every_model(self) -> Profile:
        missing = set(ModelName) - set(self.tf_cnn)
        if missing:
            raise ValueError(f"profile {self.name!r} lacks tf_cnn specs for {sorted(m.value for m in missing)}")
        return self

    def training(self, model: ModelName | str) -> TrainingSpec:
        return self.tf_cnn[ModelName(model)]


@cache
def load_profiles(path: Path = PROFILES_FILE) -> dict[str, Profile]:
    raw = yaml.safe_load(path.read_text())
    return {name: Profile.model_validate({"name": name, **body}) for name, body in raw.items()}


def profile_names() -> list[str]:
    return list(load_profiles())


def get_profile(name: str) -> Profile:
    profiles = load_profiles()
    if name not in profiles:
        raise ValueError(f"unknown profile {name!r}; allowed: {', '.join(profiles)}")
    return profiles[name]
