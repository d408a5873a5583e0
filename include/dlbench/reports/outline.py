"""The report's outline: its sections, in order, once.

The HTML page's navigation and body and the text summary all follow :data:`SECTIONS`, so the
three cannot disagree; a section with nothing to show is left out of each. Adding a section: a
:class:`~dlbench.reports.sections.base.Section` in ``reports/sections/`` and its place here.
"""

from __future__ import annotations

from dlbench.reports.sections.answer import AnswerSection
from dlbench.reports.sections.base import Section
from dlbench.reports.sections.cost import COST
from dlbench.reports.sections.environment import EnvironmentSection
from dlbench.reports.sections.frameworks import FrameworksSection
from dlbench.reports.sections.gates import GatesSection
from dlbench.reports.sections.micro import MicroSection
from dlbench.reports.sections.model_figures import WorkloadsSection
from dlbench.reports.sections.problems import ProblemsSection
from dlbench.reports.sections.regressions import RegressionsSection
from dlbench.reports.sections.scenarios import StudyFiguresSection, TrainingNumbersSection
from dlbench.reports.sections.serving import ServingSection

SECTIONS: tuple[Section, ...] = (
    AnswerSection(),
    FrameworksSection(),
    GatesSection(),
    COST,
    RegressionsSection(),
    StudyFiguresSection(),
    TrainingNumbersSection(),
    ServingSection(),
    WorkloadsSection(),
    MicroSection(),
    EnvironmentSection(),
    ProblemsSection(),
)
"""The report's sections in the order a reader meets them: the answer first, failures last."""
