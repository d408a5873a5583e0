"""The providers dlbench knows: their settings models (one discriminated union) and drivers.

Adding a provider = one module with a settings model (a :class:`MachineSettings` subclass with
``name: Literal["<name>"]``) and a :class:`~dlbench.provisioning.base.Driver`, plus one line
in :data:`PROVIDERS`. Settings modules must import nothing heavy at top level (the DAG file and
the validate task import this registry); drivers import their cloud SDKs inside methods.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter

from dlbench.provisioning.base import Driver
from dlbench.provisioning.ironic import IronicDriver, IronicSettings
from dlbench.provisioning.kubernetes import KubernetesSettings
from dlbench.provisioning.magnum import MagnumDriver, MagnumSettings
from dlbench.provisioning.nova import NovaDriver, NovaSettings
from dlbench.provisioning.settings import LocalSettings, MachineSettings, ProviderSettings

PROVIDERS: dict[str, tuple[type[ProviderSettings], type[Driver] | None]] = {
    "local": (LocalSettings, None),  # this host: no driver, see dlbench.pipeline.local_backend
    "ironic": (IronicSettings, IronicDriver),
    "nova": (NovaSettings, NovaDriver),
    "kubernetes": (KubernetesSettings, None),  # an existing cluster: dlbench.pipeline.kubernetes_backend
    "magnum": (MagnumSettings, MagnumDriver),  # a cluster per run: dlbench.pipeline.magnum_backend
}
"""name -> (settings model, driver class or None when the provider provisions nothing)."""

ProviderSettingsUnion = Annotated[
    Union[tuple(model for model, _ in PROVIDERS.values())],  # noqa: UP007 - built from the registry
    Field(discriminator="name"),
]
_ADAPTER: TypeAdapter[Any] = TypeAdapter(ProviderSettingsUnion)


def provider_names() -> list[str]:
    return list(PROVIDERS)


def settings_model(name: str) -> type[ProviderSettings]:
    if name not in PROVIDERS:
        raise ValueError(f"unknown provider {name!r}; allowed: {', '.join(PROVIDERS)}")
    return PROVIDERS[name][0]


def parse_settings(data: dict[str, Any]) -> ProviderSettings:
    """One provider settings object (``{"name": "ironic", ...}``), validated by its model."""
    return _ADAPTER.validate_python(data)


def driver_for(settings: ProviderSettings) -> Driver:
    """The driver for machine-provisioning settings (raises for ``local``)."""
    _, driver = PROVIDERS[settings.name]
    if driver is None or not isinstance(settings, MachineSettings):
        raise ValueError(f"provider {settings.name!r} provisions no machines")
    return driver(settings)  # type: ignore[call-arg]


__all__ = ["PROVIDERS", "ProviderSettingsUnion", "driver_for", "parse_settings", "provider_names",
           "settings_model"]
