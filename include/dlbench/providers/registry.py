"""The one registry of providers: a name maps to its settings model, driver and backend.

Adding a machine provider = one module in this package holding a settings model (a
:class:`~dlbench.providers.settings.MachineSettings` subclass with ``name: Literal["<name>"]``)
and a :class:`~dlbench.providers.base.Driver`, plus one line in :data:`PROVIDERS`: the machine
lifecycle (:class:`~dlbench.providers.machines.MachineBackend`) does the rest. A provider with a
lifecycle of its own (this host, an existing Kubernetes cluster, a Magnum cluster per run) names
its own backend class. The DAG file and the validate task import this module: provider modules
import their cloud SDKs inside methods, never at top level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, Union, get_args, get_origin

from pydantic import Field, TypeAdapter

from dlbench.providers.backend import ProviderBackend, RunRequest
from dlbench.providers.base import Driver, RunIsActive, SweepAction
from dlbench.providers.composite import CompositeBackend
from dlbench.providers.ironic import IronicDriver, IronicSettings
from dlbench.providers.kubernetes import KubernetesBackend, KubernetesSettings
from dlbench.providers.kubernetes import sweep as sweep_namespaces
from dlbench.providers.local import LocalBackend, LocalSettings
from dlbench.providers.machines import MachineBackend
from dlbench.providers.magnum import MagnumBackend, MagnumDriver, MagnumSettings
from dlbench.providers.nova import NovaDriver, NovaSettings
from dlbench.providers.settings import MachineSettings, ProviderSettings
from dlbench.providers.sweep import sweep_driver


class Sweeper(Protocol):
    def __call__(self, settings: Any, is_active: RunIsActive, *, now: datetime | None = None,
                 dry_run: bool = False) -> tuple[list[SweepAction], list[dict[str, str]]]: ...


@dataclass(frozen=True)
class Provider:
    """One provider, whole: what the request validates, what provisions, what runs the lifecycle."""

    summary: str
    """What it provides, in a few words (the trigger form's Provider field lists them)."""
    settings: type[ProviderSettings]
    backend: Callable[[Any], ProviderBackend]
    """Called with the validated settings (a machine provider's: :class:`MachineBackend` over its driver)."""
    driver: type[Driver] | None = None
    """The machine driver, for providers whose machines go through :class:`MachineBackend` (and the janitor)."""
    sweeper: Sweeper | None = None
    """How the janitor sweeps this provider's leftovers when not through its driver."""

    def sweep(self, settings: ProviderSettings, is_active: RunIsActive, *, now: datetime | None = None,
              dry_run: bool = False) -> tuple[list[SweepAction], list[dict[str, str]]]:
        """(released or would-release actions, kept runs with the reason) for one configured cloud."""
        if self.sweeper is not None:
            return self.sweeper(settings, is_active, now=now, dry_run=dry_run)
        if self.driver is None or not isinstance(settings, MachineSettings):
            raise ValueError(f"provider {settings.name!r} leaves nothing for the janitor to sweep")
        return sweep_driver(driver_for(settings), settings.release_timeout, is_active, now=now, dry_run=dry_run)

    def needs_operator(self, settings: ProviderSettings) -> list[str]:
        """The configured cloud's machines only an operator can give back (:meth:`Driver.needs_operator`)."""
        if self.driver is None or not isinstance(settings, MachineSettings):
            return []
        return driver_for(settings).needs_operator()


def _machines(driver: type[Driver]) -> Callable[[Any], ProviderBackend]:
    # Driver subclasses take their settings (the abstract Driver declares no __init__).
    return lambda settings: MachineBackend(settings, driver(settings))  # type: ignore[call-arg]  # see above


PROVIDERS: dict[str, Provider] = {
    "local": Provider("this host and its Docker engine (no cloud), QEMU guests for the VM platforms",
                      LocalSettings, LocalBackend),
    "ironic": Provider("OpenStack bare metal", IronicSettings, _machines(IronicDriver), IronicDriver),
    "nova": Provider("OpenStack VMs", NovaSettings, _machines(NovaDriver), NovaDriver),
    "kubernetes": Provider("an existing Kubernetes cluster, a namespace per run", KubernetesSettings,
                           KubernetesBackend, sweeper=sweep_namespaces),
    "magnum": Provider("a Kubernetes cluster per run from OpenStack Magnum", MagnumSettings, MagnumBackend,
                       MagnumDriver),
}

if TYPE_CHECKING:
    # What a type checker can know of a union built at run time: each member is a ProviderSettings.
    ProviderSettingsUnion = ProviderSettings
else:
    ProviderSettingsUnion = Annotated[
        Union[tuple(p.settings for p in PROVIDERS.values())],  # noqa: UP007 - built from the registry
        Field(discriminator="name"),
    ]
    """One provider's settings, validated by the model its ``name`` picks (pydantic's discriminated
    union over every model of :data:`PROVIDERS`)."""
_ADAPTER: TypeAdapter[Any] = TypeAdapter(ProviderSettingsUnion)


def provider_names() -> list[str]:
    return list(PROVIDERS)


def provider_choices() -> dict[str, list[str]]:
    """``<provider>.<field>`` -> its allowed values, for every field of a provider's settings typed
    as a ``Literal`` (the request's error messages list them)."""
    choices = {}
    for name, provider in PROVIDERS.items():
        for field, info in provider.settings.model_fields.items():
            if field != "name" and get_origin(info.annotation) is Literal:
                choices[f"{name}.{field}"] = [str(value) for value in get_args(info.annotation)]
    return choices


def settings_model(name: str) -> type[ProviderSettings]:
    if name not in PROVIDERS:
        raise ValueError(f"unknown provider {name!r}; allowed: {', '.join(PROVIDERS)}")
    return PROVIDERS[name].settings


def parse_settings(data: dict[str, Any]) -> ProviderSettings:
    """One provider settings object (``{"name": "ironic", ...}``), validated by its model."""
    return _ADAPTER.validate_python(data)


def driver_for(settings: ProviderSettings) -> Driver:
    """The driver for machine-provisioning settings (raises for a provider that provisions none)."""
    driver = PROVIDERS[settings.name].driver
    if driver is None or not isinstance(settings, MachineSettings):
        raise ValueError(f"provider {settings.name!r} provisions no machines")
    return driver(settings)  # type: ignore[call-arg]  # Driver subclasses take their settings


def backend_for(settings: ProviderSettings) -> ProviderBackend:
    """The backend for one provider's validated settings."""
    return PROVIDERS[settings.name].backend(settings)


def backend_for_request(request: RunRequest) -> ProviderBackend:
    """The backend of a run: its provider's, or a :class:`CompositeBackend` over several."""
    if len(request.providers) == 1:
        return backend_for(request.providers[0])
    return CompositeBackend([(settings, backend_for(settings)) for settings in request.providers])


__all__ = ["PROVIDERS", "Provider", "ProviderSettingsUnion", "backend_for", "backend_for_request", "driver_for",
           "parse_settings", "provider_choices", "provider_names", "settings_model"]
