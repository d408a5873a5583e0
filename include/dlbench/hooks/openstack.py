"""An openstacksdk ``Connection`` from a clouds.yaml cloud, an Airflow connection, or a bare endpoint.

Why not ``apache-airflow-providers-openstack``'s hook: it calls openstacksdk APIs that were
removed (``_normalize_volume``, cloud-layer cache invalidation). We keep that package only for
its registered ``openstack`` connection type (the UI's form) and read connections in its field
convention: host = auth URL, login, password, extras (project_name, user_domain_name,
project_domain_name, region_name, interface, cacert/verify, application_credential_id/secret,
auth_type, endpoint).

Secrets: :class:`CloudSpec` keeps the password/secret out of ``repr``/``str``; nothing here logs
credentials, and only the cloud *name* or connection *id* ever travels through XCom.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dlbench import settings
from dlbench.errors import CloudConfigError

SECRET_KEYS = frozenset({"password", "application_credential_secret", "token", "secret"})
"""Auth fields that must never be printed."""



@dataclass(frozen=True)
class CloudSpec:
    """Everything needed to open a connection. ``auth`` may hold secrets: never printed."""

    name: str
    auth_type: str = "password"
    auth: dict[str, str] = field(default_factory=dict, repr=False)
    region_name: str | None = None
    interface: str | None = None
    verify: bool | str = True
    endpoint: str | None = None  # auth_type none: the Ironic endpoint
    api_timeout: float = 30.0  # per request: a hung API must not hang a task forever

    def __repr__(self) -> str:
        shown = {k: ("***" if k in SECRET_KEYS else v) for k, v in self.auth.items()}
        return (f"CloudSpec(name={self.name!r}, auth_type={self.auth_type!r}, auth={shown!r}, "
                f"region_name={self.region_name!r}, endpoint={self.endpoint!r})")

    __str__ = __repr__

    def check(self) -> None:
        """Fail before any API call when the credentials are incomplete (names the field)."""
        if self.auth_type == "none":
            if not self.endpoint:
                raise CloudConfigError(f"cloud {self.name!r}: auth_type none needs an endpoint "
                                       "(baremetal_endpoint_override)")
            return
        if not self.auth.get("auth_url"):
            raise CloudConfigError(f"cloud {self.name!r}: missing auth_url (Airflow connection: host)")
        if self.auth_type in ("v3applicationcredential", "applicationcredential"):
            need = ["application_credential_id", "application_credential_secret"]
        else:
            need = ["username", "password"]
        missing = [k for k in need if not self.auth.get(k)]
        if missing:
            raise CloudConfigError(f"cloud {self.name!r}: missing credentials: {', '.join(missing)} "
                                   f"(auth_type {self.auth_type})")

    def connect(self) -> Any:
        """An ``openstack.connection.Connection`` (openstacksdk imported here, not at parse time)."""
        self.check()
        import openstack.connection  # heavy: openstacksdk takes a second to import; only a connection needs it

        if self.auth_type == "none":
            return openstack.connection.Connection(
                auth_type="none", baremetal_endpoint_override=self.endpoint, verify=self.verify,
                baremetal_api_version="1", region_name=self.region_name, api_timeout=self.api_timeout,
            )
        kwargs: dict[str, Any] = {"auth_type": self.auth_type, "auth": dict(self.auth), "verify": self.verify,
                                  "region_name": self.region_name, "api_timeout": self.api_timeout}
        if self.interface:
            kwargs["interface"] = self.interface
        return openstack.connection.Connection(**kwargs)


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() not in ("false", "0", "no", "off", "")


def spec_from_airflow_fields(conn_id: str, host: str | None, login: str | None, password: str | None,
                             extra: dict[str, Any]) -> CloudSpec:
    """The apache-airflow-providers-openstack field convention -> a :class:`CloudSpec`."""
    auth_type = str(extra.get("auth_type") or ("v3applicationcredential" if extra.get("application_credential_id")
                                               else "password"))
    endpoint = extra.get("endpoint") or extra.get("baremetal_endpoint_override")
    if auth_type == "none":
        return CloudSpec(name=conn_id, auth_type="none", endpoint=str(endpoint or host or "") or None,
                         verify=_verify(extra), region_name=extra.get("region_name"))
    auth: dict[str, str] = {"auth_url": host or ""}
    if auth_type in ("v3applicationcredential", "applicationcredential"):
        auth["application_credential_id"] = str(extra.get("application_credential_id") or "")
        auth["application_credential_secret"] = str(extra.get("application_credential_secret") or password or "")
    else:
        auth["username"] = login or ""
        auth["password"] = password or ""
        for key in ("project_name", "project_id", "user_domain_name", "project_domain_name", "user_domain_id",
                    "project_domain_id"):
            if extra.get(key):
                auth[key] = str(extra[key])
    return CloudSpec(name=conn_id, auth_type=auth_type, auth=auth, region_name=extra.get("region_name"),
                     interface=extra.get("interface"), verify=_verify(extra))


def _verify(extra: dict[str, Any]) -> bool | str:
    if extra.get("cacert"):
        return str(extra["cacert"])
    if "verify" in extra:
        return _truthy(extra["verify"])
    return True


def _clouds_yaml_paths() -> list[Path]:
    configured = settings.os_client_config_file()
    if configured:
        return [configured]
    repo = Path(__file__).resolve().parents[3]
    return [Path.cwd() / "clouds.yaml", Path.home() / ".config/openstack/clouds.yaml",
            Path("/etc/openstack/clouds.yaml"), repo / ".devcloud" / "clouds.yaml"]


def spec_from_clouds_yaml(cloud: str, config_file: str | os.PathLike[str] | None = None) -> CloudSpec:
    """A cloud from clouds.yaml (``config_file``, else ``OS_CLIENT_CONFIG_FILE``, else the standard places)."""
    paths = [Path(config_file)] if config_file else _clouds_yaml_paths()
    known: list[str] = []
    for path in paths:
        if not path.is_file():
            continue
        clouds = (yaml.safe_load(path.read_text()) or {}).get("clouds", {}) or {}
        known += list(clouds)
        if cloud in clouds:
            entry = clouds[cloud]
            auth = {k: str(v) for k, v in (entry.get("auth") or {}).items()}
            auth_type = str(entry.get("auth_type", "password"))
            endpoint = entry.get("baremetal_endpoint_override") or entry.get("endpoint") or auth.get("endpoint")
            verify: bool | str = entry.get("cacert") or entry.get("verify", True)
            return CloudSpec(name=cloud, auth_type=auth_type, auth=auth if auth_type != "none" else {},
                             region_name=entry.get("region_name"), interface=entry.get("interface"),
                             verify=verify, endpoint=str(endpoint) if endpoint else None)
    where = ", ".join(str(p) for p in paths)
    raise CloudConfigError(f"unknown cloud {cloud!r} (looked in {where}); "
                           f"allowed: {', '.join(sorted(set(known))) or '(no clouds.yaml found)'}")


def resolve(cloud: str | None = None, *, conn_id: str | None = None, endpoint: str | None = None,
            config_file: str | os.PathLike[str] | None = None) -> CloudSpec:
    """One entry point: an explicit ``endpoint`` (standalone Ironic, no auth), an Airflow
    ``conn_id``, or a clouds.yaml ``cloud``. Raises :class:`CloudConfigError` naming what is wrong."""
    if endpoint:
        return CloudSpec(name=cloud or "standalone", auth_type="none", endpoint=endpoint)
    if conn_id:
        from airflow.sdk.bases.hook import BaseHook  # optional: only a connection id needs Airflow

        try:
            conn = BaseHook.get_connection(conn_id)
        except Exception as exc:  # noqa: BLE001 - Airflow raises its own NotFound types per version
            raise CloudConfigError(f"unknown Airflow connection {conn_id!r}: {type(exc).__name__}") from None
        return spec_from_airflow_fields(conn_id, conn.host, conn.login, conn.password, conn.extra_dejson or {})
    if cloud:
        return spec_from_clouds_yaml(cloud, config_file)
    raise CloudConfigError("no cloud given: set ironic.cloud (clouds.yaml name) or ironic.conn_id (Airflow connection)")


def connect(cloud: str | None = None, *, conn_id: str | None = None, endpoint: str | None = None,
            config_file: str | os.PathLike[str] | None = None) -> Any:
    """An openstacksdk Connection (see :func:`resolve`)."""
    return resolve(cloud, conn_id=conn_id, endpoint=endpoint, config_file=config_file).connect()


def make_hook_class() -> type:
    """The Airflow hook class (built lazily so importing this module does not import Airflow)."""
    from airflow.sdk.bases.hook import BaseHook  # optional: only the Airflow plugin asks for the hook

    class OpenStackHook(BaseHook):
        """Airflow hook for conn_type ``openstack``: ``get_conn()`` -> openstacksdk Connection."""

        conn_name_attr = "openstack_conn_id"
        default_conn_name = "openstack_default"
        conn_type = "openstack"
        hook_name = "OpenStack (dlbench, openstacksdk)"

        def __init__(self, openstack_conn_id: str = default_conn_name, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.openstack_conn_id = openstack_conn_id
            self._conn: Any = None

        def __repr__(self) -> str:
            return f"OpenStackHook(openstack_conn_id={self.openstack_conn_id!r})"

        def get_spec(self) -> CloudSpec:
            return resolve(conn_id=self.openstack_conn_id)

        def get_conn(self) -> Any:
            if self._conn is None:
                self._conn = self.get_spec().connect()
            return self._conn

    return OpenStackHook


def __getattr__(name: str) -> Any:
    if name == "OpenStackHook":
        cls = make_hook_class()
        globals()["OpenStackHook"] = cls
        return cls
    raise AttributeError(name)
