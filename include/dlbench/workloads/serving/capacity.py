"""The capacity answer of one server: the highest Poisson request rate that meets the latency
target, found by the profile's rate sweep and then a bisection between the last rate that met it
and the first that did not.

Latency under an open-loop load grows with the rate (queueing), so "meets the target" is taken as
monotone in the rate: the sweep stops at the first rate that misses it, and the bisection narrows
the interval between the two. The answer says which kind it is (:class:`Bound`): a rate that met
the target with a missed one above it (``measured``: the capacity lies between the two), every
swept rate met it (``at_least`` the highest), or none did (``below`` the lowest).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum


class Bound(StrEnum):
    MEASURED = "measured"
    """A rate met the target and a higher one did not: the capacity is between them."""
    AT_LEAST = "at_least"
    """Every rate swept met the target: the capacity is at least the highest (sweep higher)."""
    BELOW = "below"
    """No rate met the target: the capacity is below the lowest swept (sweep lower, or a larger machine)."""


@dataclass(frozen=True)
class Capacity:
    rate: float
    """The highest rate that met the target (``below``: the lowest rate tried, which did not)."""
    bound: Bound
    missed: float | None
    """The lowest rate that missed the target (None when every rate met it)."""
    tried: tuple[tuple[float, bool], ...]
    """Every rate measured, in order, and whether it met the target."""


def search(rates: Sequence[float], bisection_steps: int, meets: Callable[[float], bool]) -> Capacity:
    """Measure ``rates`` in ascending order until one misses the target, then halve the interval
    between the last that met it and that one ``bisection_steps`` times."""
    tried: list[tuple[float, bool]] = []
    met: float | None = None
    missed: float | None = None
    for rate in rates:
        ok = meets(rate)
        tried.append((rate, ok))
        if not ok:
            missed = rate
            break
        met = rate
    if missed is None:
        return Capacity(rate=rates[-1], bound=Bound.AT_LEAST, missed=None, tried=tuple(tried))
    if met is None:
        return Capacity(rate=rates[0], bound=Bound.BELOW, missed=missed, tried=tuple(tried))
    for _ in range(bisection_steps):
        middle = round((met + missed) / 2, 3)
        if middle in (met, missed):
            break
        ok = meets(middle)
        tried.append((middle, ok))
        if ok:
            met = middle
        else:
            missed = middle
    return Capacity(rate=met, bound=Bound.MEASURED, missed=missed, tried=tuple(tried))
