"""The micro-benchmarks section: what explains the training numbers (the accelerator, deep-learning
kernels, the CPU, the network, the disk), each normalized to bare metal with the same intervals
and verdicts, in the order that explains training (:data:`dlbench.suites.MICRO_ORDER`).
"""

from __future__ import annotations

from dlbench.reports.analysis import answer
from dlbench.reports.sections.base import RunView
from dlbench.reports.sections.suite_tables import suite_html
from dlbench.suites import MICRO_ORDER as MICRO_SUITES

ORDER = [suite.value for suite in MICRO_SUITES]
"""The micro-benchmarks in the order that explains training."""


def micro_suites(run: RunView) -> list[str]:
    """The run's micro-benchmark suites in :data:`ORDER` (a suite outside it last, by name)."""
    return sorted(filter(answer.is_micro, run.suites),
                  key=lambda s: (ORDER.index(s) if s in ORDER else len(ORDER), s))


class MicroSection:
    id = "micro"
    title: str | None = "Micro-benchmarks"
    style = ""

    def html(self, run: RunView) -> str:
        suites = micro_suites(run)
        if not suites:
            return ""
        return ("<h2 id='micro'>Micro-benchmarks</h2><p class='note'>What explains the training numbers: the "
                "accelerator, deep-learning kernels, the CPU, the network and the disk, each normalized to bare "
                "metal with the same intervals and verdicts.</p>\n"
                + "\n".join(x for x in (suite_html(run, suite) for suite in suites) if x))

    def text(self, run: RunView) -> list[str]:
        micro = answer.micro_summary(run.stats)
        if not micro:
            return []
        width = max(len(p) for _, p, _ in micro)
        return ["", "Micro-benchmarks (headline metrics vs bare metal):",
                *(f"  {suite:9} {platform:{width}}  {summary}" for suite, platform, summary in micro)]
