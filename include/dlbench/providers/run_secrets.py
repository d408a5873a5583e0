"""Per-run secrets (the run's SSH key, a cluster's kubeconfig): never a file left on a worker's
disk between tasks, never in XCom (docs/storage.md).

Where a secret lives depends on where the code runs (:func:`backend`):

* **inside an Airflow task** (real workers, ``dag.test()`` / ``make run``): an Airflow Variable
  ``dlbench_secret__<run_id>__<name>``. Its name contains ``secret``, so Airflow masks the value
  in task logs; it is Fernet-encrypted in the metadata DB and reachable from every worker through
  the Task SDK's API (or any secrets backend that serves Variables). The task that makes it
  (setup) sets it; release deletes it; the janitor deletes those of runs that are over.
* **outside Airflow** (the CLI, unit tests): this process's memory; it dies with the process.

``DLBENCH_SECRETS=airflow|memory`` forces one. A task that needs a secret as a file (paramiko's
``key_filename``, ``KUBECONFIG``) materialises it with :func:`secret_file`: a 0600 file in a
0700 directory (``/dev/shm`` when there is one: memory, not disk) for the ``with`` block only.

The *names* of a run's secrets (not their values) are listed in the store at
``runs/<run_id>/secrets.json`` so :func:`delete_secrets` finds them on any worker. Beside them is
the run's record, ``runs/<run_id>/tags.json`` (:func:`record_run`: its DAG run, expiry and lease,
written before its first secret), whose lease every live task of the run renews with its
resources' (:class:`~dlbench.providers.leases.LeaseKeeper`): the janitor judges a run's secrets by
that record alone, so a run killed at any moment (provisioning, jobs, or its release, after its
machines were untagged) leaves no key past one lease (issue 38).

Targets refer to the run's key by :func:`ref` (``dlbench-secret:<run_id>/<name>``) instead of a
path; :func:`materialized` turns such references into the temporary files for one task.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from dlbench import settings, storage
from dlbench.execution.targets import secret_field_of
from dlbench.providers.base import LEASE_KEY, Tags

log = logging.getLogger(__name__)

ENV = settings.SECRETS.env
PREFIX = "dlbench_secret__"
REF = "dlbench-secret:"
STORE_REF = "dlbench-store:"
"""Prefix of a target's ``known_hosts`` that names a key in the shared store (not a local path)."""
INDEX = "secrets.json"
RUN_RECORD = "tags.json"
"""The run's record beside its secrets: its tags with the lease (:func:`record_run`)."""
SSH_KEY = "ssh_key"
"""The name of the run's generated SSH private key (OpenSSH PEM)."""
KNOWN_HOSTS = "known_hosts"
"""Not a secret: the run's pinned host keys, kept in the store beside the run's state."""

_memory: dict[str, str] = {}
_lock = threading.Lock()
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def variable_key(run_id: str, name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"secret name {name!r}: letters, digits, '_', '.', '-' only")
    return f"{PREFIX}{run_id}__{name}"


def _in_airflow_task() -> bool:
    if "airflow.sdk" not in sys.modules:  # a task has it loaded; never initialise Airflow here
        return False
    try:
        from airflow.sdk import get_current_context  # optional: absent in the CLI (secrets live in memory there)

        get_current_context()
        return True
    except Exception:  # noqa: BLE001 - no Airflow, or not inside a task
        return False


def backend() -> str:
    """``airflow`` or ``memory`` (see the module's docstring)."""
    forced = settings.secrets_backend()
    if forced:
        return forced
    return "airflow" if _in_airflow_task() else "memory"


def _mask(value: str) -> None:
    """Redact the value in this task's logs: whole, and each long line of it (a PEM key logged
    a line at a time, e.g. in a traceback, is redacted too)."""
    try:
        from airflow.sdk.log import mask_secret  # optional: absent in the CLI (secrets live in memory there)
    except Exception:  # noqa: BLE001 - outside Airflow there is no task log to mask
        return
    try:
        mask_secret(value)
        for line in value.splitlines():
            if len(line.strip()) >= 20 and not line.startswith("-----"):
                mask_secret(line.strip())
    except Exception:  # noqa: BLE001 - masking is best effort; the value is never logged by us
        pass


def _index(run_id: str) -> list[str]:
    try:
        return list(json.loads(storage.store().read_text(storage.run_state_key(run_id, INDEX))))
    except (FileNotFoundError, ValueError):
        return []


def _write_index(run_id: str, names: list[str]) -> None:
    storage.store().write_text(storage.run_state_key(run_id, INDEX), json.dumps(sorted(set(names))))


def record_run(tags: Tags) -> None:
    """Write the run's record (its tags: DAG run, expiry, lease), before any secret of the run
    exists, so the janitor can always tell when a secret's run is over (no secret, only tags)."""
    storage.store().write_text(storage.run_state_key(tags.run_id, RUN_RECORD), json.dumps(tags.as_dict()))


def run_record(run_id: str) -> Tags | None:
    """The run's record (:func:`record_run`), or None where there is none or it is unreadable."""
    try:
        return Tags.from_dict(json.loads(storage.store().read_text(storage.run_state_key(run_id, RUN_RECORD))))
    except (OSError, ValueError):
        return None


def renew_record(run_id: str, until: datetime) -> bool:
    """Move the lease of the run's record to ``until`` (a live task's renewal); False where the run
    has no record (nothing of it to keep: the janitor or its release removed it)."""
    key = storage.run_state_key(run_id, RUN_RECORD)
    store = storage.store()
    try:
        data = json.loads(store.read_text(key))
    except (OSError, ValueError):
        return False
    data[LEASE_KEY] = until.astimezone(UTC).isoformat()
    store.write_text(key, json.dumps(data))
    return True


def secret_names(run_id: str) -> list[str]:
    """The names of the run's secrets (the index in the store: names only, never values)."""
    return sorted(set(_index(run_id)))


def put_secret(run_id: str, name: str, data: str, tags: Tags | None = None) -> str:
    """Keep ``data`` as the run's secret ``name``; returns its reference (:func:`ref`). With
    ``tags``, the run's record is written first where it has none (:func:`record_run`)."""
    key = variable_key(run_id, name)
    if tags is not None and run_record(run_id) is None:
        record_run(tags)
    _write_index(run_id, [*_index(run_id), name])  # the name first: a killed task leaves it findable
    _mask(data)
    if backend() == "airflow":
        from airflow.sdk import Variable  # optional: absent in the CLI (secrets live in memory there)

        Variable.set(key, data, description=f"dlbench: secret {name} of run {run_id}; deleted at release, or by "
                                            "the janitor once the run's lease lapsed (runs/<run>/tags.json)")
    else:
        with _lock:
            _memory[key] = data
    return ref(run_id, name)


def get_secret(run_id: str, name: str) -> str | None:
    key = variable_key(run_id, name)
    if backend() == "airflow":
        value = settings.run_secret(key)
    else:
        with _lock:
            value = _memory.get(key)
    if value is not None:
        _mask(value)
    return value


def delete_secret(run_id: str, name: str) -> None:
    key = variable_key(run_id, name)
    if backend() == "airflow":
        from airflow.sdk import Variable  # optional: absent in the CLI (secrets live in memory there)

        try:
            Variable.delete(key)
        except Exception as exc:  # noqa: BLE001 - already gone; anything else: the janitor retries
            log.debug("delete of secret %s: %s", key, exc)
    with _lock:
        _memory.pop(key, None)


def delete_secrets(run_id: str) -> list[str]:
    """Delete every secret of the run (release, rollback, janitor); returns the names deleted."""
    names = _index(run_id)
    with _lock:
        names += [k[len(PREFIX) + len(run_id) + 2:] for k in _memory if k.startswith(f"{PREFIX}{run_id}__")]
    names = sorted(set(names))
    for name in names:
        delete_secret(run_id, name)
    return names


def ref(run_id: str, name: str) -> str:
    """What targets carry instead of a path: ``dlbench-secret:<run_id>/<name>``."""
    return f"{REF}{run_id}/{name}"


def parse_ref(value: str | None) -> tuple[str, str] | None:
    if not value or not value.startswith(REF):
        return None
    run_id, _, name = value[len(REF):].rpartition("/")
    return (run_id, name) if run_id and name else None


def _tmp_root() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


PRIVATE_PREFIX = "dlbench-secret-p"


def sweep_private_dirs(root: str | None = None) -> list[Path]:
    """Remove private directories whose process is gone: a task killed with SIGKILL (a worker
    lost, the OOM killer) never reaches its ``finally``, and its key would stay in /dev/shm. The
    owner's pid is in the name (``dlbench-secret-p<pid>-...``); every task sweeps on its way in,
    so a worker carries such a leftover only until its next job. Returns what was removed."""
    base = Path(root or _tmp_root() or tempfile.gettempdir())
    removed = []
    for entry in base.glob(f"{PRIVATE_PREFIX}*"):
        pid = entry.name[len(PRIVATE_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or not entry.is_dir() or entry.stat().st_uid != os.getuid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # its process lives
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # another user's live process
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


@contextmanager
def private_dir(run_id: str) -> Iterator[Path]:
    """A 0700 directory for this task's private files, removed on every exit path (and, if this
    process is killed first, by the next task's :func:`sweep_private_dirs`)."""
    for gone in sweep_private_dirs():
        log.warning("removed %s: private files of a task that was killed", gone)
    directory = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-{run_id[:40]}-", dir=_tmp_root()))
    try:
        os.chmod(directory, 0o700)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def write_private(path: Path, data: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(data)
    os.chmod(path, 0o600)
    return path


@contextmanager
def secret_file(run_id: str, name: str) -> Iterator[Path]:
    """The secret as a 0600 file for the ``with`` block only (KeyError when the run has none)."""
    value = get_secret(run_id, name)
    if value is None:
        raise KeyError(f"run {run_id} has no secret {name!r} (released, or made by a setup that did not finish)")
    with private_dir(run_id) as directory:
        yield write_private(directory / name, value)


@contextmanager
def materialized(targets: list[dict]) -> Iterator[list[dict]]:
    """XCom targets with ``access.key_path`` (a Kubernetes access: ``access.kubeconfig``) given as a
    secret reference turned into a 0600
    temporary file, and ``access.known_hosts`` given as a store reference (``dlbench-store:<key>``)
    into a private copy of the run's pinned host keys, both for the ``with`` block only. Targets
    without references pass through unchanged."""
    def refs_in(target: dict) -> tuple[tuple[str, str] | None, str | None]:
        access = target.get("access") or {}
        hosts = access.get("known_hosts") or ""
        secret = parse_ref(access.get(secret_field_of(access)))
        return secret, hosts[len(STORE_REF):] if hosts.startswith(STORE_REF) else None

    wanted = [refs_in(t) for t in targets]
    if not any(k or h for k, h in wanted):
        yield targets
        return
    run_ids = sorted({k[0] for k, _ in wanted if k})
    with private_dir("-".join(run_ids)[:40] or "run") as directory:
        files: dict[tuple[str, str], str] = {}
        hosts: dict[str, str] = {}
        out = []
        for target, (key, hosts_key) in zip(targets, wanted, strict=True):
            access = dict(target.get("access") or {})
            if key is not None:
                if key not in files:
                    value = get_secret(*key)
                    if value is None:
                        raise KeyError(f"run {key[0]} has no secret {key[1]!r} (released, or made by a setup that "
                                       "did not finish)")
                    files[key] = str(write_private(directory / f"{len(files)}.{key[1]}", value))
                access[secret_field_of(access)] = files[key]
            if hosts_key is not None:
                if hosts_key not in hosts:
                    try:
                        text = storage.store().read_text(hosts_key)
                    except FileNotFoundError:
                        text = ""
                    hosts[hosts_key] = str(write_private(directory / f"{len(hosts)}.{KNOWN_HOSTS}", text))
                access["known_hosts"] = hosts[hosts_key]
            out.append({**target, "access": access} if key is not None or hosts_key is not None else target)
        yield out
