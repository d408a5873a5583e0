"""Each test gets its own store: ``file://`` under a temp dir, or a fresh ``memory://`` root."""

from __future__ import annotations

import uuid

import pytest

from dlbench import storage


@pytest.fixture(params=["file", "memory"])
def store_url(request, tmp_path, monkeypatch):
    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path / "home"))
    url = (tmp_path / "store").as_uri() if request.param == "file" else f"memory://dlbench-{uuid.uuid4().hex}"
    monkeypatch.setenv(storage.ENV, url)
    monkeypatch.setenv("DLBENCH_SECRETS", "memory")
    yield url
    if request.param == "memory":
        storage.store(url).remove("")
