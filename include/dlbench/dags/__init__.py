"""The DAGs of dlbench, in the package so that an Airflow which installs it (``pip install
dlbench``) has them: a DAG folder needs one line per DAG (:data:`DAG_FILES`, written by
``dlbench dags install DIR``), which builds the DAG at each parse (docs/install.md)."""

from __future__ import annotations

DAG_FILES: dict[str, str] = {
    "dlbench_benchmark.py": "benchmark_dag",
    "dlbench_janitor.py": "janitor_dag",
}
"""A DAG file's name -> the function of this package that builds its DAG (module: the function's
name without ``_dag``)."""


def dag_file(name: str) -> str:
    """The text of the DAG file ``name`` (one of :data:`DAG_FILES`): a docstring (Airflow's DAG
    folder parses only files that mention both "airflow" and "dag") and the one line."""
    function = DAG_FILES[name]
    module = function.removesuffix("_dag")
    return (f'"""Airflow DAG file of dlbench: the {name.removesuffix(".py")} DAG, defined in the installed\n'
            f'package (dlbench.dags.{module}); written by `dlbench dags install`, never edited."""\n\n'
            f"from dlbench.dags.{module} import {function}\n\n"
            f"dag = {function}()\n")
