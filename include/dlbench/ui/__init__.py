"""UI: the report browser served inside the Airflow API server by plugins/dlbench_reports.py."""
