# The results explorer (docs/explorer.md): its browser test drives Debian's headless chromium over
# the DevTools protocol; `make prereqs` (which .ci/run calls) installs it (APT_PACKAGES += chromium in mk/reports.mk).

.PHONY: explorer test-explorer
explorer: venv ## serve the results explorer on 127.0.0.1:8089 outside Airflow (the warehouse of DLBENCH_WAREHOUSE_URL)
	$(VENV)/bin/dlbench explorer --port 8089

test-explorer: venv ## explorer API tests and the headless-chromium page test
	$(PY) -m pytest -q tests/ui
