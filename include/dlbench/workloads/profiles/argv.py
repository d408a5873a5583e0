"""A profile on a workload's command line: one ASCII JSON word (``--profile-spec``).

A user profile travels this way to the machine that runs the job, which needs neither the user's
file nor Airflow; the workload validates it like any profile.
"""

from __future__ import annotations

import json

from pydantic import ValidationError

from dlbench.workloads.profiles.schema import Profile, ProfileError, field_errors


def profile_to_argument(profile: Profile) -> str:
    """The profile as one ASCII JSON word (``--profile-spec``): shell-quoted by every executor."""
    return json.dumps(profile.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=True)


def profile_from_argument(text: str) -> Profile:
    """Inverse of :func:`profile_to_argument`, validated like any profile."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProfileError(f"--profile-spec: not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ProfileError("--profile-spec: a JSON object with the profile's fields and its name")
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(f"--profile-spec:\n  {field_errors(data['name'], exc)}") from None
