"""Fixtures the workload suites' tests share."""

from __future__ import annotations

import pytest


@pytest.fixture
def fresh_registry(monkeypatch):
    """Profiles registered from a command line stay in this test."""
    from dlbench.workloads.profiles import catalog as profiles

    monkeypatch.setattr(profiles, "_registered", {})
