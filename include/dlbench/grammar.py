"""The real grammars of the names a request carries, so a bad value is refused at validation.

Why here and not in each model: images, users, paths, traits, resource classes and cloud names
appear in several providers' settings and reach remote machines; one definition per kind keeps
them consistent. Every remote command is also built from argv and quoted
(:func:`dlbench.execution.shell.command_line`): validation is the first line, quoting the second.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator

# Docker's reference grammar (distribution/reference/regexp.go), anchored.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?$"
)
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
"""POSIX portable user names (useradd's default NAME_REGEX)."""
GPU_REQUEST = re.compile(r"^(auto|none|all|[1-9][0-9]{0,2})$")
"""GPUs per machine (dlbench.execution.gpus): auto, none, all, or a count."""
TRAIT = re.compile(r"^[A-Z0-9_]{1,255}$")
"""os-traits: standard traits and CUSTOM_* are upper-case letters, digits and underscores."""
RESOURCE_CLASS = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")
"""Cloud names, Airflow connection ids, node names, flavor/network names."""
HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
                  r"[A-Za-z0-9])?)*|[0-9a-fA-F:.]+|\[[0-9a-fA-F:.]+\])(?::[0-9]{1,5})?$")
"""A host name or IP address, optionally with a port."""
IMAGE_SOURCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.~:/?#@!&'()*+,=%-]{0,2047}$")
"""A Glance name/UUID or a URL: RFC 3986 characters, no spaces, quotes, ``;``, ``$`` or backquotes."""
CHECKSUM = re.compile(r"^(?:[a-z0-9]+:)?[0-9a-fA-F]{32,128}$|^https?://[^\s;`$'\"]+$")
ABSOLUTE_PATH = re.compile(r"^/[A-Za-z0-9_./+@%:,=-]*$")
"""An absolute path of safe characters (no spaces, quotes, ``;``, ``$``, newlines...)."""


def _matcher(pattern: re.Pattern[str], what: str) -> Callable[[str], str]:
    """A pydantic validator: ``value`` unchanged when ``pattern`` matches it whole."""
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f"{value!r} is not a valid {what}")
        return value

    return check


def _path(value: str) -> str:
    if not ABSOLUTE_PATH.fullmatch(value) or "/../" in f"{value}/":
        raise ValueError(f"{value!r} is not an absolute path of safe characters "
                         "(letters, digits, / _ . + @ % : , = -)")
    return value


ImageReference = Annotated[str, AfterValidator(_matcher(IMAGE_REFERENCE, "container image reference "
                                                                         "(registry/name:tag[@digest])"))]
UserName = Annotated[str, AfterValidator(_matcher(USER_NAME, "user name"))]
Trait = Annotated[str, AfterValidator(_matcher(TRAIT, "trait (upper-case letters, digits, _)"))]
ResourceClass = Annotated[str, AfterValidator(_matcher(RESOURCE_CLASS, "resource class"))]
Name = Annotated[str, AfterValidator(_matcher(NAME, "name (letters, digits, _ . -)"))]
AbsolutePath = Annotated[str, AfterValidator(_path)]
Host = Annotated[str, AfterValidator(_matcher(HOST, "host name or IP address"))]
ImageSource = Annotated[str, AfterValidator(_matcher(IMAGE_SOURCE, "image (a Glance name/UUID or a URL without "
                                                                   "spaces or shell characters)"))]
Checksum = Annotated[str, AfterValidator(_matcher(CHECKSUM, "checksum (hex digest, algo:hex, or a URL)"))]
GpuRequest = Annotated[str, AfterValidator(_matcher(GPU_REQUEST, "GPU request (auto, none, all, or a count 1..999)"))]
