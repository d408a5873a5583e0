"""What a regression does to the DAG run: fail the ``regressions`` task (or only warn), and call
the operator's notifiers, so the usual alerting (Slack, e-mail...) picks it up. docs/regressions.md.

- ``on_regression``: the DAG's Param (``fail`` by default, or ``warn``); scheduled runs take the
  Airflow Variable ``dlbench_on_regression`` when it is set.
- Notifiers: the Airflow Variable ``dlbench_regression_notifiers``, a JSON list; each item is a
  dotted path to a callable taking the task context (a function, or a notifier class built with
  no arguments), or ``{"class": "<dotted path>", "kwargs": {...}}`` for a notifier class built with
  keyword arguments, e.g. the Slack provider's::

      [{"class": "airflow.providers.slack.notifications.slack.SlackNotifier",
        "kwargs": {"slack_conn_id": "slack_default", "channel": "#benchmarks",
                   "text": "{{ regressions_text }}"}}]

  Templates see the task context plus ``regressions_text`` (one line per regression) and
  ``regressions`` (the list of dicts). Without the Variable, :class:`RegressionLogNotifier` logs.
  A notifier that fails is logged; it never hides the regression (the task still fails).
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Callable
from typing import Any

from airflow.sdk import BaseNotifier
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from dlbench.pipeline import steps
from dlbench.pipeline.airflow_support import first_failure, is_scheduled, not_run_because
from dlbench.settings import ON_REGRESSION, REGRESSION_NOTIFIERS

log = logging.getLogger(__name__)

NOTIFIERS_VARIABLE = REGRESSION_NOTIFIERS.name
ON_REGRESSION_VARIABLE = ON_REGRESSION.name
MODES = ("fail", "warn")


class RegressionLogNotifier(BaseNotifier):
    """The default notifier: a WARNING in the task log (templated ``message``)."""

    template_fields = ("message",)

    def __init__(self, message: str = "dlbench regressions in {{ run_id }}:\n{{ regressions_text }}") -> None:
        super().__init__()
        self.message = message

    def notify(self, context: Any) -> None:
        log.warning("%s", self.message)


def _import(path: str) -> Any:
    module, _, name = path.rpartition(".")
    if not module:
        raise ValueError(f"not a dotted path: {path!r}")
    return getattr(importlib.import_module(module), name)


def notifiers_from(spec: str | list | None) -> list[Callable[[Any], Any]]:
    """The notifiers named by the Variable's value (see the module docstring)."""
    if spec in (None, "", []):
        return [RegressionLogNotifier()]
    items = json.loads(spec) if isinstance(spec, str) else spec
    if not isinstance(items, list):
        raise ValueError(f"{NOTIFIERS_VARIABLE}: expected a JSON list")
    out: list[Callable[[Any], Any]] = []
    for item in items:
        if isinstance(item, str):
            target = _import(item)
            out.append(target() if isinstance(target, type) else target)
        elif isinstance(item, dict) and "class" in item:
            out.append(_import(item["class"])(**(item.get("kwargs") or {})))
        else:
            raise ValueError(f"{NOTIFIERS_VARIABLE}: each item is a dotted path or {{'class': ..., 'kwargs': ...}}")
    return out


def notify(context: dict[str, Any], result: dict[str, Any], notifiers: list[Callable[[Any], Any]]) -> list[str]:
    """Call every notifier with the context (plus the regressions); returns the errors (logged)."""
    context["regressions_text"] = result["text"]
    context["regressions"] = result["regressions"]
    errors = []
    for notifier in notifiers:
        try:
            notifier(context)
        except Exception as exc:  # noqa: BLE001 - one channel down must not hide the regression
            log.error("regression notifier %r failed: %s", notifier, exc)
            errors.append(f"{type(notifier).__name__}: {exc}")
    return errors


def mode(param: str | None, variable: str | None, *, scheduled: bool) -> str:
    """fail or warn: the Variable for scheduled runs when set, else the Param (default fail)."""
    chosen = (variable if scheduled and variable else param) or "fail"
    if chosen not in MODES:
        raise ValueError(f"on_regression must be one of {', '.join(MODES)}, not {chosen!r}")
    return chosen


def run(context: dict[str, Any], report_result: dict | None, *, variable: Callable[[str], str | None],
        warehouse_url: Callable[[], str | None]) -> dict[str, Any]:
    """The DAG's ``regressions`` task: compare, notify, then fail (or warn) on a regression.

    ``variable`` reads an Airflow Variable (None when unset); ``warehouse_url`` names the
    warehouse. Raises AirflowSkipException without a report, AirflowFailException on a regression
    in ``fail`` mode."""
    if not report_result:
        failure = first_failure(context["ti"], "regressions") if context.get("ti") is not None else None
        raise AirflowSkipException(not_run_because(failure, "regressions") if failure else
                                   "no report: nothing to compare (see the report task)")
    params = context.get("params") or {}
    chosen = mode(params.get("on_regression"), variable(ON_REGRESSION_VARIABLE),
                  scheduled=is_scheduled(context.get("dag_run")))
    result = steps.compare_run(context["run_id"], warehouse_url(),
                               baseline_run=params.get("regression_baseline") or None)
    log.info("regressions: %s", result["text"])
    if result["count"]:
        errors = notify(context, result, notifiers_from(variable(NOTIFIERS_VARIABLE)))
        message = f"{result['count']} regression(s) against the baseline:\n{result['text']}"
        if errors:
            message += f"\n(notifiers failed: {'; '.join(errors)})"
        blocking = [r for r in result["regressions"] if r["fails_run"]]  # Regression.fails_run: the one rule
        if chosen == "fail" and blocking:
            raise AirflowFailException(message)
        if chosen == "fail":
            message += ("\n(provisioning times or cases measured on a loaded machine only: reported, not failing the "
                        "run: they measure the cloud's or the machine's other load as much as the platform; "
                        "docs/regressions.md)")
        log.warning("%s", message)
    return {"count": result["count"], "mode": chosen}
