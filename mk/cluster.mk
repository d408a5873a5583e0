# A real multi-worker Airflow deployment on this host (docs/airflow-cluster.md): PostgreSQL,
# Redis (Celery broker), api-server, scheduler, dag-processor and CLUSTER_WORKERS Celery workers,
# each worker with its own AIRFLOW_HOME and DLBENCH_HOME; one shared store stands for the bucket.
CLUSTER_WORKERS ?= 2
CLUSTER_PORT ?= 8080
CLUSTER_ARGS ?=
.PHONY: airflow-cluster test-cluster cluster-prereqs

cluster-prereqs: ## install redis-server and PostgreSQL (Debian, as root) for the Airflow cluster
	@$(call apt_install,redis-server postgresql,missing system packages for the cluster,exit 1)

airflow-cluster: venv cluster-prereqs ## multi-worker Airflow (Celery, 2 workers) on http://localhost:8080; Ctrl-C stops it
	$(PY) -m tools.cluster --workers $(CLUSTER_WORKERS) --port $(CLUSTER_PORT) $(CLUSTER_ARGS)

test-cluster: venv cluster-prereqs stack-images ## the multi-worker deployment tier alone (tests/cluster, minutes; `make test` runs it after the local stream)
	DLBENCH_CLUSTER_TESTS=1 $(PY) -m pytest -ra --durations=10 tests/cluster $(TEST_ARGS)
