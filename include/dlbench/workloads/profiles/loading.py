"""Profiles from YAML: the built-ins of the installed package, and user profiles that extend them.

The built-in numbers live in ``profiles.yaml`` beside this package. User profiles (docs/profiles.md)
come as YAML or JSON text or a file; a user profile may ``extends:`` another one and override a few
fields (:func:`resolve_profiles`). Nothing here reads the environment: whoever knows where a user's
file is passes its path (the workload CLI from its own environment, the controller from its
settings), so the same loader serves both sides.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dlbench.workloads.profiles.schema import Profile, ProfileError, field_errors

PROFILES_FILE = Path(__file__).parent.parent / "profiles.yaml"
"""The built-in profiles of the installed package."""
PROFILES_FILE_ENV = "DLBENCH_PROFILES_FILE"
"""Environment variable naming a YAML file of user profiles. Read where a process starts, never by
the loaders: the workload CLI (:mod:`dlbench.workloads.cli`) on its machine, the controller through
its settings; both pass the path to :func:`file_profiles`."""


def _builtin_yaml(path: Path) -> dict[str, Any]:
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: profiles must be a mapping of name -> profile")
    return raw


@cache
def load_profiles(path: Path = PROFILES_FILE) -> dict[str, Profile]:
    """The built-in profiles of the installed package (the user's are in
    :func:`dlbench.workloads.profiles.catalog.all_profiles`)."""
    return {name: Profile.model_validate({"name": name, **body}) for name, body in _builtin_yaml(path).items()}


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; lists and scalars replace (``hpl_sizes: [2000]`` is the whole list)."""
    out = dict(base)
    for key, value in override.items():
        out[key] = _merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) \
            else value
    return out


def _extend(parent: Profile, child: Mapping[str, Any]) -> dict[str, Any]:
    """The child's fields over its parent's. ``tf_cnn.defaults`` in a child applies to every
    model of the parent (``defaults: {batch_size_per_device: 64}`` is batch 64 for all three),
    and the child's per-model entries apply over that."""
    base = parent.model_dump(mode="json", exclude={"name"})
    body = {k: v for k, v in child.items() if k != "tf_cnn"}
    merged = _merge(base, body)
    tf_child = child.get("tf_cnn")
    if isinstance(tf_child, Mapping):
        defaults = tf_child.get("defaults") or {}
        models = {**{m: {} for m in base["tf_cnn"]}, **{k: v for k, v in tf_child.items() if k != "defaults"}}
        merged["tf_cnn"] = {m: {**base["tf_cnn"].get(m, {}), **defaults, **(spec or {})} for m, spec in models.items()}
    elif tf_child is not None:
        merged["tf_cnn"] = tf_child  # not a mapping: let the model say so
    return merged


def resolve_profiles(raw: Any, below: Mapping[str, Profile], source: str) -> dict[str, Profile]:
    """Validate user profiles (name -> body) over the profiles ``below`` them.

    ``extends: NAME`` takes every field of NAME (a profile of the same source, else one below,
    e.g. a built-in) and the body overrides it; a profile without ``extends`` is complete on its
    own. A profile may reuse a built-in name (it replaces it; ``extends: paper`` inside a profile
    named ``paper`` is the built-in one): its results differ in the recorded digest."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ProfileError(f"{source}: profiles must be a mapping of name -> profile (got {type(raw).__name__})")
    resolved: dict[str, Profile] = {}
    resolving: list[str] = []

    def resolve(name: str) -> Profile:
        if name in resolved:
            return resolved[name]
        body = raw[name]
        if not isinstance(body, Mapping):
            raise ProfileError(f"{source}: profiles.{name}: must be a mapping of fields (got {type(body).__name__})")
        if "name" in body and body["name"] != name:
            raise ProfileError(f"{source}: profiles.{name}.name: the key is the name (got {body['name']!r})")
        body = {k: v for k, v in body.items() if k != "name"}
        parent_name = body.pop("extends", None)
        if parent_name is not None:
            parent_name = str(parent_name)
            if parent_name in resolving and parent_name != name:
                raise ProfileError(f"{source}: profiles.{name}.extends: cycle "
                                   f"{' -> '.join([*resolving, name, parent_name])}")
            resolving.append(name)
            try:
                if parent_name in raw and parent_name != name:
                    parent = resolve(parent_name)
                elif parent_name in below:
                    parent = below[parent_name]
                else:
                    allowed = sorted({*below, *(n for n in raw if n != name)})
                    raise ProfileError(f"{source}: profiles.{name}.extends: unknown profile {parent_name!r} "
                                       f"(allowed: {', '.join(allowed)})")
            finally:
                resolving.pop()
            body = _extend(parent, body)
            body.setdefault("description", f"{parent_name}, modified: {parent.description}")
        try:
            resolved[name] = Profile.model_validate({**body, "name": name})
        except ValidationError as exc:
            raise ProfileError(f"{source}:\n  {field_errors(name, exc)}") from None
        return resolved[name]

    for name in raw:
        resolve(str(name))
    return resolved


def parse_profiles_text(text: str, below: Mapping[str, Profile], source: str) -> dict[str, Profile]:
    """YAML or JSON text (JSON is YAML) of user profiles -> validated profiles."""
    try:
        raw = yaml.safe_load(text) if text and text.strip() else None
    except yaml.YAMLError as exc:
        raise ProfileError(f"{source}: not YAML or JSON: {exc}") from None
    return resolve_profiles(raw, below, source)


@cache
def _file_profiles(path: str, mtime_ns: int) -> dict[str, Profile]:
    """The user file's profiles, re-read when the file changes (the key includes its mtime)."""
    del mtime_ns
    return parse_profiles_text(Path(path).read_text(), load_profiles(), f"{PROFILES_FILE_ENV}={path}")


def file_profiles(profiles_file: str | Path | None) -> dict[str, Profile]:
    """Profiles of the user's file ``profiles_file`` (none when it is None or empty), over the
    built-ins; the caller took its path from where that process is configured."""
    path = str(profiles_file or "").strip()
    if not path:
        return {}
    try:
        mtime = Path(path).stat().st_mtime_ns
    except OSError as exc:
        raise ProfileError(f"{PROFILES_FILE_ENV}={path}: cannot read it ({exc.strerror})") from None
    return _file_profiles(path, mtime)


def parse_user_profiles(text: str | None, source: str, profiles_file: str | Path | None = None) -> dict[str, Profile]:
    """User profiles given as text (e.g. the Airflow Variable's), validated over the built-ins and
    the user file's profiles (which they may extend); none for empty text. ``source`` names where
    the text came from in every error."""
    if not text or not text.strip():
        return {}
    return parse_profiles_text(text, {**load_profiles(), **file_profiles(profiles_file)}, source)
