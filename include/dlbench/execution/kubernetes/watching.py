"""Watch instead of polling: the executor's wait for a Job is woken by the API's own change
notifications (``?watch=true`` on the Job and on its pods), so a pod that starts, ends or is
refused is seen at once rather than at the next poll; the poll stays as the fallback (a watch
can drop, and the server ends each one after ``WATCH_S``)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

WATCH_S = 10
"""Seconds the server keeps one watch open; it is then opened again (the stop is seen then at the latest)."""


def _watch(list_call: Any, wake: threading.Event, stop: threading.Event, **selectors: str) -> None:
    from kubernetes import watch  # heavy client library, only when a cluster is called

    while not stop.is_set():
        stream = watch.Watch()
        try:
            for _event in stream.stream(list_call, timeout_seconds=WATCH_S, **selectors):
                wake.set()
                if stop.is_set():
                    stream.stop()
        except Exception as exc:  # noqa: BLE001 - the poll is the fallback; a watch that fails is only logged
            log.debug("watch of %s ended: %s", selectors, exc)
            if stop.wait(1.0):
                return


@contextlib.contextmanager
def job_changes(batch: Any, core: Any, ns: str, name: str) -> Iterator[threading.Event]:
    """An event set whenever Job ``ns/name`` or one of its pods changes, for as long as the block runs."""
    wake, stop = threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=_watch, args=(batch.list_namespaced_job, wake, stop),
                         kwargs={"namespace": ns, "field_selector": f"metadata.name={name}"},
                         name=f"watch-job-{name}", daemon=True),
        threading.Thread(target=_watch, args=(core.list_namespaced_pod, wake, stop),
                         kwargs={"namespace": ns, "label_selector": f"job-name={name}"},
                         name=f"watch-pods-{name}", daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        yield wake
    finally:
        stop.set()  # the threads end when their current watch does (at most WATCH_S): daemons, never joined
