"""dlbench: benchmark deep-learning hosting options (bare metal, VM, containers) on OpenStack.

Layers, each its own package:

- ``dlbench.workloads``: runs on the benchmarked machine; never imports Airflow.
- ``dlbench.providers``: one driver per platform behind one small interface.
- ``dlbench.execution``: how a workload is started on a target and how its result returns.
- ``dlbench.warehouse``: SQLAlchemy schema, Alembic migrations, idempotent loads.
- ``dlbench.reports``: comparisons and plots built from the warehouse.
"""

__version__ = "0.1.0"
