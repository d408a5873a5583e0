"""Fixtures for the Ironic tier: the real devcloud (``make devcloud-up``), never a fake API
(defined in :mod:`tests.support.ironic`: the Nova tier's four-platform run uses them too).

``DLBENCH_IRONIC_TEST_CLOUD`` / ``DLBENCH_IRONIC_TEST_CLOUDS_FILE`` /
``DLBENCH_IRONIC_TEST_RESOURCE_CLASS`` point the tier at another Ironic (default: cloud
``devcloud`` from ``.devcloud/clouds.yaml``, resource class ``dlbench-bm``).
"""

from __future__ import annotations

from tests.support.ironic import clean_cloud, cloud_conn  # noqa: F401 - fixtures
