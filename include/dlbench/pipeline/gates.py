"""The run's pass/fail gates as pipeline steps (docs/gates.md): which gates a run has (its
request's, else the Airflow Variable ``dlbench_gates``) and their evaluation by the DAG's last
task, written beside the report as ``gates.json``. Plain functions, tested without Airflow.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dlbench import storage
from dlbench.errors import ConfigError
from dlbench.pipeline.steps import request_from, safe_run_id
from dlbench.settings import GATES

if TYPE_CHECKING:
    from dlbench.reports.analysis.gates import GateResult

log = logging.getLogger(__name__)

VARIABLE = GATES.name
FIELD = "gates"
"""The request's field (:attr:`dlbench.request.BenchmarkRequest.gates`)."""


def with_variable_gates(params: dict[str, Any], variable: str | None) -> tuple[dict[str, Any], bool]:
    """(the request's params with the run's gates, whether they came from the Variable).

    Precedence: a request that has a ``gates`` field (even ``[]``: "no gates for this run") keeps
    its own; otherwise the Variable's list, when set, becomes the request's ``gates`` and is
    validated with it, so a bad one refuses the run before anything is provisioned and the run's
    archived request says which gates it was held to. The request wins because it is the specific
    statement about this run (a CI job's SLA); the Variable is the deployment's standing default."""
    if params.get(FIELD) is not None:
        return params, False
    if variable is None or not variable.strip():
        return params, False
    try:
        gates = json.loads(variable)
    except ValueError as exc:
        raise ConfigError(f"invalid benchmark request: Airflow Variable {VARIABLE} is not JSON: {exc}") from None
    if not isinstance(gates, list):
        raise ConfigError(f"invalid benchmark request: Airflow Variable {VARIABLE} must hold a JSON list of gates "
                          "(docs/gates.md)")
    return {**params, FIELD: gates}, bool(gates)


def source_note(error: str, from_variable: bool) -> str:
    """A validation error about gates that came from the Variable, saying so (the request the
    user wrote has no ``gates``: they would look for the field there in vain)."""
    if from_variable and f"{FIELD}[" in error:
        return f"{error}\n  (the gates come from the Airflow Variable {VARIABLE}: the request declares none)"
    return error


@dataclass(frozen=True)
class GatesOutcome:
    """What the gates task reports: every gate's result, the console lines, why it fails (None:
    every gate passed) and where gates.json went."""

    results: list[GateResult]
    lines: list[str]
    failure: str | None
    url: str

    def as_xcom(self) -> dict[str, Any]:
        return {"passed": self.failure is None, "summary": self.lines[0] if self.lines else "",
                "gates": [r.as_dict() for r in self.results], "json": self.url}


def evaluate_run(run_id: str, request: dict[str, Any], url: str | None, policy: str = "fail") -> GatesOutcome:
    """Evaluate the validated request's gates on the run's results in the warehouse and write
    ``reports/<run>/gates.json`` to the shared store (beside report.html). A run whose results
    never reached the warehouse leaves every gate inconclusive, saying why. ``policy``: what an
    inconclusive gate does (:data:`dlbench.reports.analysis.gates.POLICY_FAIL`, the default, or ``warn``)."""
    # heavy: pandas and SQLAlchemy, only for the gates task
    from dlbench.reports.analysis import compare, run_data
    from dlbench.reports.analysis import gates as report_gates  # heavy: as above
    from dlbench.warehouse import db  # heavy: SQLAlchemy, as above

    safe = safe_run_id(run_id)
    gates = request_from(request).gates
    engine = db.engine_for(url)
    try:
        run_data.resolve_run(engine, safe)
    except LookupError as exc:
        results = report_gates.inconclusive(gates, f"no results to judge: {exc}")
    else:
        results = report_gates.evaluate(gates, compare.samples_frame(engine, safe),
                                        compare.step_checks(engine, safe))
    finally:
        engine.dispose()
    store, key = storage.store(), f"reports/{safe}/gates.json"
    store.write_text(key, json.dumps(report_gates.as_json(safe, results), indent=2))
    lines = report_gates.text_lines(results)
    log.info("gates of run %s:\n%s", safe, "\n".join(lines))
    return GatesOutcome(results=results, lines=lines, failure=report_gates.failure_message(results, policy),
                        url=store.url_of(key))
