"""The OpenStack hook: three ways to a Connection, clear errors, and no secret ever printed."""

from __future__ import annotations

import json
import logging
import os

import pytest

from dlbench.errors import CloudConfigError
from dlbench.hooks.openstack import resolve, spec_from_airflow_fields

SECRET = "s3cr3t-Passw0rd-do-not-print"


def test_clouds_yaml_password_cloud_is_read_and_never_printed(tmp_path, caplog):
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(f"""clouds:
  prod:
    auth:
      auth_url: https://keystone.example:5000/v3
      username: bench
      password: {SECRET}
      project_name: dl
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionTwo
    interface: internal
    cacert: /etc/ssl/our-ca.pem
""")
    spec = resolve("prod", config_file=clouds)
    assert spec.auth["password"] == SECRET and spec.region_name == "RegionTwo"
    assert spec.verify == "/etc/ssl/our-ca.pem" and spec.interface == "internal"
    caplog.set_level(logging.DEBUG)
    logging.getLogger("test").info("using %s / %r", spec, spec)
    for text in (repr(spec), str(spec), caplog.text, f"{spec}"):
        assert SECRET not in text
    assert "***" in repr(spec)


def test_unknown_cloud_names_the_known_ones(tmp_path):
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text("clouds:\n  devcloud:\n    auth_type: none\n    baremetal_endpoint_override: http://127.0.0.1:6385\n")
    with pytest.raises(CloudConfigError, match=r"unknown cloud 'nope'.*allowed: devcloud"):
        resolve("nope", config_file=clouds)


def test_standalone_endpoint_cloud(tmp_path):
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text("clouds:\n  devcloud:\n    auth_type: none\n    baremetal_endpoint_override: http://127.0.0.1:6385\n")
    spec = resolve("devcloud", config_file=clouds)
    assert spec.auth_type == "none" and spec.endpoint == "http://127.0.0.1:6385"
    conn = spec.connect()  # no request is made until the first API call
    assert conn.config.get_endpoint("baremetal") == "http://127.0.0.1:6385"


@pytest.mark.parametrize(("login", "password", "extra", "missing"), [
    ("bench", "", {"project_name": "dl"}, "password"),
    ("", SECRET, {"project_name": "dl"}, "username"),
    ("", "", {"application_credential_id": "abc"}, "application_credential_secret"),
])
def test_missing_credentials_fail_before_any_call(login, password, extra, missing):
    spec = spec_from_airflow_fields("os_conn", "https://keystone.example:5000/v3", login, password, extra)
    with pytest.raises(CloudConfigError, match=f"missing credentials: {missing}"):
        spec.connect()


def test_airflow_connection_fields_application_credential():
    spec = spec_from_airflow_fields("os_conn", "https://ks:5000/v3", None, None, {
        "application_credential_id": "id-1", "application_credential_secret": SECRET, "region_name": "R1",
        "verify": "false"})
    assert spec.auth_type == "v3applicationcredential"
    assert spec.auth == {"auth_url": "https://ks:5000/v3", "application_credential_id": "id-1",
                         "application_credential_secret": SECRET}
    assert spec.verify is False and spec.region_name == "R1"
    assert SECRET not in repr(spec)


def test_airflow_hook_reads_a_real_connection_without_printing_it(monkeypatch, caplog):
    """Through Airflow's own connection lookup (an AIRFLOW_CONN_ env var, as a secrets backend)."""
    conn = {"conn_type": "openstack", "host": "https://keystone.example:5000/v3", "login": "bench",
            "password": SECRET, "extra": {"project_name": "dl", "user_domain_name": "Default",
                                          "project_domain_name": "Default", "region_name": "RegionOne",
                                          "interface": "public"}}
    monkeypatch.setitem(os.environ, "AIRFLOW_CONN_OS_BENCH", json.dumps(conn))
    from dlbench.hooks.openstack import OpenStackHook

    caplog.set_level(logging.DEBUG)
    hook = OpenStackHook(openstack_conn_id="os_bench")
    spec = hook.get_spec()
    assert spec.auth["username"] == "bench" and spec.auth["password"] == SECRET
    assert spec.auth["project_name"] == "dl" and spec.region_name == "RegionOne" and spec.interface == "public"
    assert hook.conn_type == "openstack"
    for text in (repr(hook), str(hook), repr(spec), caplog.text):
        assert SECRET not in text


def test_unknown_airflow_connection():
    with pytest.raises(CloudConfigError, match="unknown Airflow connection 'no_such_conn'"):
        resolve(conn_id="no_such_conn")
