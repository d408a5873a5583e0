"""Kubernetes memory quantities (``8Gi``, ``512M``): the form the settings accept, stated once, and
the bytes one stands for (what a check compares with a workload's needs before anything runs)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field

MEMORY_PATTERN = r"^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$"
MemoryQuantity = Annotated[str, Field(pattern=MEMORY_PATTERN)]
"""A memory limit as Kubernetes writes it: a whole number, a binary (Ki..Ti) or decimal (k..T) suffix."""

_FACTORS = {"": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9,
            "T": 10**12}


def memory_bytes(quantity: str) -> int:
    """The bytes of a :data:`MemoryQuantity` (``2Gi`` -> 2147483648)."""
    match = re.fullmatch(MEMORY_PATTERN, quantity)
    if match is None:
        raise ValueError(f"not a memory quantity: {quantity!r} (a whole number with Ki, Mi, Gi, Ti, k, M, G or T)")
    return int(quantity[: len(quantity) - len(match.group(1) or "")]) * _FACTORS[match.group(1) or ""]
