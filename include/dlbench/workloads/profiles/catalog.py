"""The profiles a process knows by name: the built-ins, a user file, and the ones registered in it.

Registration is always explicit, by the one place that runs something with a profile that this
process may not have on disk: the workload CLI registers the profile its command line gave
(``--profile-spec``), the pipeline step that runs a job registers the run's pinned profile. A
lookup never registers anything, and validating a request does not either.
Precedence: built-ins < the user file < registered profiles.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from dlbench.workloads.profiles.loading import file_profiles, load_profiles, parse_user_profiles
from dlbench.workloads.profiles.schema import Profile, profile_digest

log = logging.getLogger(__name__)

_registered: dict[str, Profile] = {}
"""Profiles registered in this process (:func:`register_profile`), by name."""
_registered_lock = threading.Lock()


def register_profile(profile: Profile) -> Profile:
    """Make ``profile`` resolvable by name in this process: a run's pinned profile, registered by
    the step that runs one of its jobs (so a task on any worker runs what was validated), or one a
    workload got on its command line. Same name, other content: the newer wins, with a warning."""
    with _registered_lock:
        old = _registered.get(profile.name)
        if old is not None and profile_digest(old, whole=True) != profile_digest(profile, whole=True):
            log.warning("profile %r redefined in this process (digest %s -> %s)", profile.name,
                        profile_digest(old, whole=True), profile_digest(profile, whole=True))
        _registered[profile.name] = profile
    return profile


def register_user_profiles(text: str | None, source: str, profiles_file: str | Path | None = None) -> list[str]:
    """Validate user profiles given as text (:func:`parse_user_profiles`) and register them; their names."""
    profiles = parse_user_profiles(text, source, profiles_file)
    for profile in profiles.values():
        register_profile(profile)
    return list(profiles)


def all_profiles(profiles_file: str | Path | None = None) -> dict[str, Profile]:
    """Every profile this process knows: built-ins, the user file ``profiles_file`` (when given),
    then registered ones."""
    with _registered_lock:
        registered = dict(_registered)
    return {**load_profiles(), **file_profiles(profiles_file), **registered}


def profile_names(profiles_file: str | Path | None = None) -> list[str]:
    """The names of :func:`all_profiles`, in precedence order."""
    return list(all_profiles(profiles_file))


def get_profile(name: str, profiles_file: str | Path | None = None) -> Profile:
    """The profile ``name`` among :func:`all_profiles` (ValueError naming the allowed ones)."""
    profiles = all_profiles(profiles_file)
    if name not in profiles:
        raise ValueError(f"unknown profile {name!r}; allowed: {', '.join(profiles)}")
    return profiles[name]


def is_builtin(profile: Profile) -> bool:
    """Whether ``profile`` is the installed package's profile of that name, unchanged: then a
    workload resolves it by name and nothing else travels on its command line."""
    builtin = load_profiles().get(profile.name)
    return builtin is not None and profile_digest(builtin, whole=True) == profile_digest(profile, whole=True)
