"""Pipeline: the steps the DAGs wire together, callable and testable without Airflow."""
