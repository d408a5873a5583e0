"""What a report section is, and the run every section reads.

A :class:`Section` says what it is (``id``: its anchor in the page and its name; ``title``: its
entry in the navigation, or none), what it adds to the stylesheet, and how it renders the run as
HTML and as text lines; what it computes it reads from :class:`RunView`, where everything two
sections share is computed once per report. The ordered list of sections is
:data:`dlbench.reports.outline.SECTIONS`: the HTML navigation, the HTML body and the text summary
all follow it, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pandas as pd
from sqlalchemy import Engine

from dlbench.reports.analysis import answer, compare, gates
from dlbench.reports.analysis.run_data import load_table, run_gates, run_request, run_statistics

T = TypeVar("T")


class RunView:
    """One run as the report's sections read it: each fact computed on first use, once.

    ``out``: the report's directory, where a section writes the data files it renders (a figure's
    PNG, its CSV); None when only text is rendered."""

    def __init__(self, engine: Engine, run_id: str, out: Path | None = None) -> None:
        self.engine = engine
        self.run_id = run_id
        self.out = out
        self._memo: dict[str, Any] = {}

    def memo(self, key: str, compute: Callable[[], T]) -> T:
        """``compute()`` once per report under ``key``: what one section computes and another reads
        (the answer's heading promises a cost only when the cost section has one)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    @cached_property
    def _frame_stats(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        return run_statistics(self.engine, self.run_id)

    @property
    def frame(self) -> pd.DataFrame:
        """Every sample of the run, one row each (:func:`~dlbench.reports.analysis.run_data.run_statistics`)."""
        return self._frame_stats[0]

    @property
    def stats(self) -> pd.DataFrame:
        """The comparison: one row per case, metric and platform, with its interval, verdict and flags."""
        return self._frame_stats[1]

    @cached_property
    def head(self) -> pd.DataFrame:
        """The comparison's headline metrics (:func:`~dlbench.reports.analysis.compare.headline`)."""
        return compare.headline(self.stats)

    @cached_property
    def bad(self) -> pd.DataFrame:
        """Executions that failed or were skipped."""
        return compare.problems(self.engine, self.run_id)

    @cached_property
    def suites(self) -> list[str]:
        """The suites with results, in the comparison's order."""
        return list(dict.fromkeys(self.stats["suite"])) if not self.stats.empty else []

    @cached_property
    def _request(self) -> tuple[str | None, dict[str, Any]]:
        return run_request(self.engine, self.run_id)

    @property
    def requested(self) -> dict[str, Any]:
        """The validated request the warehouse recorded (empty for documents loaded without one)."""
        return self._request[1]

    @cached_property
    def profile(self) -> answer.RunProfile:
        """The run's profile and sizes, as the answer names them."""
        return answer.run_profile(self._request[0], self.requested, self.frame)

    @cached_property
    def grade(self) -> answer.Grade:
        """Whether the run is decision-grade, why not and what to run instead."""
        return answer.decision_grade(self.profile, self.stats)

    @cached_property
    def gate_results(self) -> list[gates.GateResult]:
        """The request's gates judged on the run (none without gates)."""
        return run_gates(self.engine, self.run_id, self.frame, self.requested)

    @cached_property
    def load(self) -> pd.DataFrame:
        """The machine-load readings of every execution (:func:`~dlbench.reports.analysis.run_data.load_table`)."""
        return load_table(self.engine, self.run_id)


class Section(Protocol):
    """One section of the report (see the module docstring)."""

    @property
    def id(self) -> str:
        """Its anchor in the page (``<h2 id=...>``) and its name in tests and docs."""
        ...

    @property
    def title(self) -> str | None:
        """Its entry in the navigation; None: listed in none (a part of the section before it)."""
        ...

    @property
    def style(self) -> str:
        """CSS rules the section's HTML needs, added to the page's stylesheet ("" for none)."""
        ...

    def html(self, run: RunView) -> str:
        """The section as HTML; "" when it has nothing to show (then the navigation omits it too)."""
        ...

    def text(self, run: RunView) -> list[str]:
        """The section as lines of the text summary; [] when it has nothing to say there."""
        ...
