"""A real multi-worker Airflow deployment (tools.cluster): PostgreSQL, Redis, api-server,
scheduler, dag-processor and two Celery workers with nothing local in common. Slow (minutes): its
own pytest session, which ``make test`` runs after the local stream (``tests/streams.py``) and
``make test-cluster`` runs alone."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator

import pytest

from dlbench.settings import RETRY_DELAY
from tests.support.cluster import FAST_DETECTION, ROUTING, WORKER_QUEUES, Api
from tests.support.pg import pg_bin
from tests.support.prereqs import require

# Its own session: a plain pytest over tests/ does not even collect it; tests/streams.py (make test)
# and `make test-cluster` set this.
if os.environ.get("DLBENCH_CLUSTER_TESTS", "") in ("", "0"):
    collect_ignore_glob = ["test_*.py"]

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    require(pg_bin() is not None, "PostgreSQL server binaries (Debian: apt-get install postgresql)")
    require(shutil.which("redis-server") is not None, "redis-server (Debian: apt-get install redis-server)")
    pytest.importorskip("airflow.providers.celery", reason="apache-airflow-providers-celery (make venv)")
    from tools.cluster import Cluster

    with Cluster(tmp_path_factory.mktemp("cluster"), workers=3, concurrency=2, queues=WORKER_QUEUES,
                 extra_env={**FAST_DETECTION, "AIRFLOW__DLBENCH__ROUTING": json.dumps(ROUTING),
                            # the suite's retry delay (tests/conftest.py): the Cluster passes no AIRFLOW__ of ours
                            RETRY_DELAY.env: os.environ[RETRY_DELAY.env]}) as c:
        yield c


@pytest.fixture(scope="module")
def api(cluster) -> Api:
    client = Api(cluster.api_url, cluster.user, cluster.password, alive=cluster.check_alive)
    client.wait_dag()
    return client
