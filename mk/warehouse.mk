# The warehouse and the reports (docs/warehouse.md). `make report` is in the Makefile.
# The tests start their own PostgreSQL server from Debian's `postgresql` package (already in
# APT_PACKAGES); nothing runs in the background.
CI_PREREQS += postgres-binaries

.PHONY: warehouse-upgrade warehouse-reload postgres-binaries test-warehouse
warehouse-upgrade: venv ## migrate the warehouse (DLBENCH_WAREHOUSE_URL, else SQLite in DLBENCH_HOME)
	$(VENV)/bin/dlbench db upgrade

warehouse-reload: venv ## reload the whole raw result archive into the warehouse (idempotent)
	$(VENV)/bin/dlbench reload-archive

postgres-binaries: ## check that the PostgreSQL server binaries the tests start are installed
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || \
	  { echo "PostgreSQL server binaries missing: apt-get install postgresql"; exit 1; }

test-warehouse: venv ## warehouse and report tests (SQLite and a private PostgreSQL server)
	$(PY) -m pytest -q tests/warehouse tests/reports
