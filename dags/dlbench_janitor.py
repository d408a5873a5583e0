"""Airflow DAG file of dlbench: the dlbench_janitor DAG, defined in the installed
package (dlbench.dags.janitor); written by `dlbench dags install`, never edited."""

from dlbench.dags.janitor import janitor_dag

dag = janitor_dag()
