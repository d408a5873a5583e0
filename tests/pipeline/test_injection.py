"""No request field reaches a shell: every string field of every provider's settings refuses shell
metacharacters with the field named, and remote commands are built from argv, quoted."""

from __future__ import annotations

import shlex
import subprocess
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from dlbench.errors import ConfigError
from dlbench.execution.shell import command_line, pipeline
from dlbench.request import parse_request

PAYLOADS = ["x; touch {marker}", "$(touch {marker})", "`touch {marker}`", "x\ntouch {marker}", "x | touch {marker}",
            "x && touch {marker}", "x > {marker}", "'; touch {marker}; '"]


def string_fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str]]:
    """(dotted field path, shape) for every field that holds strings: 'str', 'list', 'dict_key', 'dict_value'."""
    found = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        text = repr(annotation)
        origin = typing.get_origin(annotation)
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if annotation is str or (origin in (typing.Union, getattr(__import__("types"), "UnionType", None))
                                 and any(a is str or "str" in repr(a) for a in args)):
            found.append((f"{prefix}{name}", "str"))
        elif origin is list and "str" in text:
            found.append((f"{prefix}{name}", "list"))
        elif origin is dict and "str" in text:
            found.append((f"{prefix}{name}", "dict_key"))
            found.append((f"{prefix}{name}", "dict_value"))
        elif "Annotated[str" in text or "typing.Annotated[str" in text:
            found.append((f"{prefix}{name}", "str"))
    return found


def provider_settings() -> dict[str, type[BaseModel]]:
    from dlbench.providers.ironic import IronicSettings

    return {"ironic": IronicSettings}


def test_every_string_field_is_covered():
    fields = {name for name, _ in string_fields(provider_settings()["ironic"])}
    # Guards the walker itself: these are the fields that name things or reach the nodes.
    assert {"cloud", "conn_id", "clouds_file", "resource_class", "traits", "image_source", "ssh_user",
            "ssh_key_path", "remote_python", "docker_image", "address_extra_key", "inventory"} <= fields


@pytest.mark.parametrize("provider", ["ironic"])
def test_shell_metacharacters_are_refused_naming_the_field(provider, tmp_path):
    marker = tmp_path / "pwned"
    model = provider_settings()[provider]
    checked = 0
    for field, shape in string_fields(model):
        if field in ("address_source",):
            continue
        for template in PAYLOADS:
            payload = template.format(marker=marker)
            value: object = {"str": payload, "list": [payload], "dict_key": {payload: "198.18.0.2"},
                             "dict_value": {"node-1": payload}}[shape]
            settings = {"cloud": "devcloud", field: value}
            if field == "inventory":
                settings["address_source"] = "inventory"
            with pytest.raises(ConfigError) as info:
                parse_request({"provider": provider, provider: settings})
            assert f"{provider}.{field}" in str(info.value), (field, payload, str(info.value))
            checked += 1
    assert checked >= 12 * len(PAYLOADS)
    assert not marker.exists()


def test_data_dir_refuses_shell_metacharacters(tmp_path):
    for template in PAYLOADS:
        with pytest.raises(ConfigError, match="data_dir"):
            parse_request({"data_dir": "/data/" + template.format(marker=tmp_path / "x")})


def test_valid_names_still_pass():
    request = parse_request({"provider": "ironic", "ironic": {
        "docker_image": "registry.example.org:5000/team/dlbench-workload:2.21-gpu@sha256:" + "a" * 64,
        "traits": ["CUSTOM_GPU_V100", "HW_CPU_X86_AVX2"], "resource_class": "baremetal-gpu.large",
        "ssh_user": "ubuntu", "remote_python": "/opt/dlbench/venv/bin/python", "cloud": "prod-east_1",
        "image_source": "https://images.example.org/dlbench-node.qcow2?v=2",
        "image_checksum": "sha256:" + "b" * 64, "address_source": "inventory",
        "inventory": {"node-1": "198.18.1.2", "node-2": "node2.example.org:2222"}}})
    assert request.provider.name == "ironic" and request.provider.ssh_user == "ubuntu"


def test_command_line_quotes_every_word(tmp_path):
    marker = tmp_path / "pwned"
    hostile = [template.format(marker=marker) for template in PAYLOADS]
    line = command_line(["printf", "%s\\n", *hostile])
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True).stdout
    assert out == "".join(f"{h}\n" for h in hostile)  # each hostile string arrived as one argument
    assert shlex.split(line)[2:] == hostile
    assert not marker.exists()
    both = pipeline(["true"], ["printf", "%s", hostile[0]])
    assert subprocess.run(["sh", "-c", both], capture_output=True, text=True).stdout == hostile[0]
    assert not Path(marker).exists()
    with pytest.raises(ValueError):
        pipeline(["true"], joiner="; rm -rf /")
