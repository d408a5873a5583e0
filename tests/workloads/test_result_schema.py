"""The result document: versioning, validation and its published JSON Schema."""

from __future__ import annotations

import json

import jsonschema
import pytest

from dlbench.workloads.result import SCHEMA_VERSION, Benchmark, Environment, ResultDocument, json_schema


def _doc() -> ResultDocument:
    doc = ResultDocument(benchmark=Benchmark(suite="tf_cnn", name="alexnet"), environment=Environment(hostname="h"))
    doc.add("throughput", 12.5, "images/s", model="alexnet")
    return doc


def test_round_trip_and_schema(tmp_path):
    path = _doc().write(tmp_path / "r.json")
    data = json.loads(path.read_text())
    jsonschema.validate(data, json_schema())
    again = ResultDocument.read(path)
    assert again.sample("throughput", model="alexnet").value == 12.5
    assert again.schema_version == SCHEMA_VERSION


def test_unknown_version_is_refused(tmp_path):
    data = json.loads(_doc().model_dump_json())
    data["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(ValueError, match="unsupported dlbench.result schema_version"):
        ResultDocument.parse(json.dumps(data))


def test_non_finite_values_are_rejected():
    with pytest.raises(ValueError, match="finite"):
        _doc().add("throughput", float("nan"), "images/s")


def test_schema_rejects_unknown_fields():
    data = json.loads(_doc().model_dump_json())
    data["surprise"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, json_schema())
