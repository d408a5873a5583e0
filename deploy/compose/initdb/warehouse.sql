-- The results warehouse beside Airflow's metadata (DLBENCH_WAREHOUSE_URL); its tables are made by
-- `dlbench db upgrade` (the stack's airflow-init service).
CREATE DATABASE dlbench;
