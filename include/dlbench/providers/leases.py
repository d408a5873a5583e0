"""Leases: how the janitor knows a run is dead within minutes, whatever Airflow's metadata says.

Every resource carries ``dlbench_lease_until``. While any task of the run is alive (the setup
task while it provisions, every job task while it runs) a :class:`LeaseKeeper` thread in that
task renews the lease of all the run's resources every ``ttl / 4``. When the process driving
the run dies (a SIGKILLed ``make run`` or ``dag.test()``, a lost worker), nobody renews it, and
once it lapses the janitor releases the resources even though the DAG run may still read
``running`` (no scheduler marks a ``dag.test()`` run failed), then marks that DAG run failed
(:func:`dlbench.providers.janitor.close_runs`). An unexpired lease protects the run from the
janitor even when its expiry has passed (a paper run can outlast its expiry). Until it lapses, a
killed run's lease cannot be told from a live one's: the janitor says only that it is unexpired,
until when, and for which run.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from types import TracebackType

from dlbench.providers import run_secrets
from dlbench.providers.base import Driver

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews the lease of every resource of ``run_id`` until the block ends (a daemon thread:
    it dies with the process, which is the point)."""

    def __init__(self, driver: Driver, run_id: str, ttl: timedelta) -> None:
        self.driver = driver
        self.run_id = run_id
        self.ttl = ttl
        self.interval = max(ttl.total_seconds() / 4, 0.5)
        self.renewals = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"lease-{run_id}", daemon=True)

    def renew_once(self) -> int:
        """Renew now (the resources and the run's record); the number of resources renewed."""
        until = datetime.now(UTC) + self.ttl
        instances = self.driver.find(self.run_id).get(self.run_id, [])
        if instances:
            self.driver.renew(instances, until)
            self.renewals += 1
        run_secrets.renew_record(self.run_id, until)
        return len(instances)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.renew_once()
            except Exception as exc:  # noqa: BLE001 - a missed renewal is retried; the lease has slack
                log.warning("lease renewal for run %s failed (retrying in %.0f s): %s", self.run_id,
                            self.interval, exc)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 30)
