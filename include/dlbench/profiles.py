"""The profiles this deployment knows, as the controller looks them up by name.

:mod:`dlbench.workloads.profiles` holds the schema, the loaders and the catalog; it runs on the
benchmarked machine too, so it never reads the controller's settings and takes the user's
profiles file as a parameter. This module binds those lookups to the deployment: the installed
built-ins < the file named by ``DLBENCH_PROFILES_FILE`` (:func:`dlbench.settings.profiles_file`) <
profiles registered in this process. The Airflow Variable's profiles (``dlbench_profiles``) are
parsed here too (:func:`parse_user_profiles`) and handed to the request's validation explicitly;
nothing is registered by a lookup or by a validation. The one registration of a run's pinned
profile is :func:`dlbench.pipeline.steps.run_job`'s, where a job of the run runs.
"""

from __future__ import annotations

from dlbench import settings
from dlbench.workloads.profiles import Profile, catalog, loading

USER_PROFILES_SOURCE = f"Airflow Variable {settings.USER_PROFILES.variable}"
"""How errors in the Variable's profiles name where they came from."""


def all_profiles() -> dict[str, Profile]:
    """Every profile this process knows: built-ins, the deployment's file, then registered ones."""
    return catalog.all_profiles(settings.profiles_file())


def profile_names() -> list[str]:
    """The names of :func:`all_profiles`, in precedence order."""
    return list(all_profiles())


def get_profile(name: str) -> Profile:
    """The profile ``name`` among :func:`all_profiles` (ValueError naming the allowed ones)."""
    return catalog.get_profile(name, settings.profiles_file())


def parse_user_profiles(text: str | None, source: str = USER_PROFILES_SOURCE) -> dict[str, Profile]:
    """The Variable's user profiles (YAML or JSON), validated over the built-ins and the
    deployment's file; none for empty text. A bad one raises
    :class:`~dlbench.workloads.profiles.ProfileError` naming ``profiles.<name>.<field>`` and ``source``."""
    return loading.parse_user_profiles(text, source, settings.profiles_file())
