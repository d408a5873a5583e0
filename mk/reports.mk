# The report (docs/statistics.md): tests/reports/test_stats.py draws it in headless Chromium to
# check that the first screen is the answer; `make prereqs` installs the browser.
APT_PACKAGES += chromium
