"""What the tests share, as plain modules (issue 40): a conftest holds only fixtures and hooks.

- :mod:`tests.support.prereqs`: the checkout's root and :func:`~tests.support.prereqs.require`
  (a missing prerequisite skips, or fails under ``DLBENCH_REQUIRE_ALL``).
- :mod:`tests.support.leaks`: one leak guard for every provider tier (wait for what earlier tests
  released, scrub what a failed test left, assert that this test left nothing).
- :mod:`tests.support.devcloud`: the devcloud's addresses, pools and images, and the helpers that
  drive its Ironic directly (allocate, deploy, SSH into a node).
- :mod:`tests.support.fleet`: nodes deployed by a test itself (the execution and Kubernetes tiers).
- :mod:`tests.support.clouds`: each provider's test settings, with overrides.
- :mod:`tests.support.cli`: the workload CLI as the benchmarked machine runs it.
"""
