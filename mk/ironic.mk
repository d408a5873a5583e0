# Ironic bare metal: tests against the devcloud (docs/openstack.md, docs/devcloud.md).
.PHONY: test-ironic janitor
test-ironic: venv ## Ironic driver, SSH executor, janitor and provider=ironic end to end (needs `make devcloud-up`)
	$(PY) -m pytest tests/ironic -q

janitor: airflow-init ## run the leak janitor once (JANITOR_CONF='{"dry_run": true}' to only report)
	$(PY) -c "import json, sys; from airflow.dag_processing.dagbag import DagBag; \
	dag = DagBag(dag_folder='$(ROOT)/dags/dlbench_janitor.py').dags['dlbench_janitor']; \
	run = dag.test(run_conf=json.loads(sys.argv[1])); sys.exit(0 if str(run.state).endswith('success') else 1)" \
	'$(or $(JANITOR_CONF),{})'
