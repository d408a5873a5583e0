"""Airflow DAG file of dlbench: the dlbench_benchmark DAG, defined in the installed
package (dlbench.dags.benchmark); written by `dlbench dags install`, never edited."""

from dlbench.dags.benchmark import benchmark_dag

dag = benchmark_dag()
