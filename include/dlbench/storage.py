"""The store every worker shares: result archive, reports and per-run state (docs/storage.md).

One setting, resolved by :func:`dlbench.settings.storage_location` (docs/settings.md):

1. environment variable ``DLBENCH_STORAGE_URL``;
2. Airflow Variable ``dlbench_storage_url`` (only where Airflow is loaded: the workloads never
   import it);
3. default ``file://$DLBENCH_HOME`` (``data/`` in a checkout): the embedded ``make run`` and a
   single-host deployment keep their files exactly where they were.

Any fsspec URL works (``s3://bucket/dlbench``, ``gs://...``, ``memory://dlbench`` in tests). A URL
naming an Airflow connection (``s3://aws_default@bucket/prefix``) is opened through
``airflow.sdk.ObjectStoragePath``, which takes the credentials from that connection.

Layout under the root (keys are ``/``-separated, relative to it)::

    results/<run_id>/<job_id>.json      the raw result archive (dlbench.warehouse.archive)
    results/<run_id>/run.info.json      what describes the run
    reports/<run_id>/report.html ...    the run's report and its files
    runs/<run_id>/tags.json             per-run state for the janitor (no secret)
    runs/<run_id>/known_hosts           the run's pinned SSH host keys (no secret)
    runs/<run_id>/secrets.json          the *names* of the run's secrets (never their values)

Writes are atomic: on ``file://`` a hidden temporary name in the same directory, then
``os.replace``; on object stores one ``put`` of the whole object (S3, GCS and Azure make a
single PUT visible all at once, never partially), on ``memory://`` one dict assignment.
Listings skip hidden names (``.x.tmp``), so a reader never sees a document being written.
"""

from __future__ import annotations

import os
import posixpath
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dlbench import settings

ENV = settings.STORAGE_URL.env
VARIABLE = settings.STORAGE_URL.variable

_lock = threading.Lock()


def reset() -> None:
    """Forget the cached Airflow Variable (tests; a long-lived process after changing it)."""
    settings.reset()


def storage_url() -> str:
    """The store's root URL by the documented precedence: env > Airflow Variable > ``file://`` home."""
    return settings.storage_url()


def _open(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, root path in it) for ``url``."""
    import fsspec  # heavy: fsspec and its filesystems load when a store is first opened, not at DAG parse time

    scheme, _, rest = url.partition("://")
    if rest and "@" in rest.split("/", 1)[0] and scheme not in ("file", "memory"):
        from airflow.sdk import ObjectStoragePath  # a connection id in the URL: Airflow's credentials

        opath = ObjectStoragePath(url)
        return opath.fs, opath.path.rstrip("/")
    fs, root = fsspec.core.url_to_fs(url)
    return fs, root.rstrip("/") or "/"


def _component(value: str) -> str:
    if not value or value in (".", "..") or "\\" in value or "\0" in value:
        raise ValueError(f"{value!r} cannot be a store key component")
    return value


class Store:
    """One store root: keys are ``a/b/c`` relative to it."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/") if not url.endswith(":///") else url
        self.fs, self.root = _open(self.url)
        self.local = _is_local(self.fs)

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def path(self, key: str = "") -> str:
        """The filesystem path of ``key`` (for ``file://``, a local path)."""
        parts = [_component(p) for p in key.split("/") if p]
        return posixpath.join(self.root, *parts) if parts else self.root

    def url_of(self, key: str) -> str:
        """A URL a person can use for ``key`` (a local path for ``file://``)."""
        if self.local:
            return self.path(key)
        return f"{self.url}/{key.strip('/')}"

    def local_path(self, key: str) -> Path | None:
        """The local file behind ``key`` on ``file://``, else None."""
        return Path(self.path(key)) if self.local else None

    def holds_in_place(self, key: str, staged: str | os.PathLike[str]) -> bool:
        """Whether ``key`` is the staged file or directory itself (a ``file://`` store rooted where
        this worker stages): its staged copy is then the stored one and stays; otherwise a worker
        drops its staged copy once it is in the store (nothing stays on a worker's disk)."""
        local = self.local_path(key)
        return local is not None and local.resolve() == Path(staged).resolve()

    # -- writes -----------------------------------------------------------------------------
    def write_bytes(self, key: str, data: bytes) -> str:
        """Write ``key`` atomically (readers see the old object or the new one, never a part)."""
        target = self.path(key)
        if self.local:
            directory = os.path.dirname(target)
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(tmp, target)
            except BaseException:
                with _suppress():
                    os.unlink(tmp)
                raise
        else:
            self.fs.pipe_file(target, data)  # one PUT: atomic per object on object stores
        return target

    def write_text(self, key: str, text: str) -> str:
        return self.write_bytes(key, text.encode())

    def upload(self, local: str | os.PathLike[str], key: str) -> str:
        """Copy a local file to ``key`` (atomically); a no-op when it already is that file."""
        source = Path(local)
        if self.local and Path(self.path(key)).resolve() == source.resolve():
            return self.path(key)
        return self.write_bytes(key, source.read_bytes())

    def upload_dir(self, local: str | os.PathLike[str], prefix: str) -> list[str]:
        """Every (non-hidden) file under a local directory to ``prefix/...``."""
        root = Path(local)
        written = []
        for file in sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")):
            written.append(self.upload(file, f"{prefix.rstrip('/')}/{file.relative_to(root).as_posix()}"))
        return written

    # -- reads ------------------------------------------------------------------------------
    def read_bytes(self, key: str) -> bytes:
        try:
            return self.fs.cat_file(self.path(key))
        except FileNotFoundError:
            raise FileNotFoundError(f"no {key} in the store {self.url}") from None

    def read_text(self, key: str) -> str:
        return self.read_bytes(key).decode()

    def exists(self, key: str) -> bool:
        return bool(self.fs.exists(self.path(key)))

    def isdir(self, key: str) -> bool:
        return bool(self.fs.isdir(self.path(key)))

    def children(self, prefix: str) -> list[str]:
        """Names of the directories directly under ``prefix`` (e.g. the run ids under ``runs``)."""
        try:
            entries = self.fs.ls(self.path(prefix), detail=True)
        except FileNotFoundError:
            return []
        return sorted(posixpath.basename(_strip(e["name"])) for e in entries
                      if e.get("type") == "directory" and not posixpath.basename(_strip(e["name"])).startswith("."))

    def modified(self, key: str) -> float | None:
        """The object's modification time (epoch seconds) when the store knows it."""
        try:
            info = self.fs.info(self.path(key))
        except FileNotFoundError:
            return None
        for field in ("mtime", "LastModified", "updated", "created", "last_modified"):
            value = info.get(field)
            if value is None:
                continue
            if hasattr(value, "timestamp"):
                return float(value.timestamp())
            try:
                return float(value)
            except (TypeError, ValueError):
                continue
        return None

    # Defined after every other method that returns ``list[str]``: in the class body the name
    # ``list`` is this method from here on, not the builtin the annotations mean.
    def list(self, prefix: str, *, suffix: str = "", recursive: bool = False) -> list[str]:
        """Keys under ``prefix`` (files; hidden names skipped), sorted; [] when there is none."""
        base = self.path(prefix)
        try:
            found = self.fs.find(base) if recursive else [
                e["name"] for e in self.fs.ls(base, detail=True) if e.get("type") == "file"]
        except FileNotFoundError:
            return []
        keys = []
        for name in found:
            rel = posixpath.relpath(_strip(name), _strip(self.root))
            if any(part.startswith(".") for part in rel.split("/")) or not rel.endswith(suffix):
                continue
            keys.append(rel)
        return sorted(keys)

    def remove(self, key: str) -> None:
        """Delete ``key`` (a file or a whole prefix); absent is fine."""
        target = self.path(key)
        with _suppress():
            if self.fs.exists(target):
                self.fs.rm(target, recursive=True)


def _strip(name: str) -> str:
    return name.rstrip("/") if name != "/" else name


def _is_local(fs: Any) -> bool:
    from fsspec.implementations.local import LocalFileSystem  # heavy: fsspec (see _open)

    return isinstance(fs, LocalFileSystem)


@contextmanager
def _suppress() -> Iterator[None]:
    try:
        yield
    except (FileNotFoundError, OSError):
        pass


_stores: dict[str, Store] = {}


def store(url: str | None = None) -> Store:
    """The store at ``url`` (default: :func:`storage_url`), one instance per URL per process."""
    url = url or storage_url()
    with _lock:
        if url not in _stores:
            _stores[url] = Store(url)
        return _stores[url]


def describe() -> str:
    """Where the store is and why (for logs and ``make doctor``-style output)."""
    url, source = settings.storage_location()
    return f"{url} ({source})"


def run_state_key(run_id: str, name: str = "") -> str:
    """``runs/<run_id>[/name]``: per-run state in the store (never a secret's value)."""
    return f"runs/{_component(run_id)}" + (f"/{name}" if name else "")

