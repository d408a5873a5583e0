"""UI: the report browser served inside the Airflow API server by the plugin dlbench.ui.plugin
(registered through Airflow's plugin entry point)."""
