"""``serving-server``: the serving suite's server alone, until stopped, for a load generator on
another machine (the client instance of a cloud run: ``serving --server-url``).

The same server a ``serving`` job starts (:class:`~dlbench.workloads.serving.server.Server`: the
profile's shape for this machine's vLLM build, random weights, the memory check first), listening
on ``--bind``. Once ready it prints the machine's environment as a job records it
(:data:`~dlbench.workloads.serving.command.SERVER_ENVIRONMENT`, the document the client writes
describes the server's machine, not its own), then one line,
:data:`~dlbench.workloads.serving.command.SERVER_READY` with the start-up time and the model, which
whoever started it waits for (:mod:`dlbench.execution.peer`). It then watches the server and exits
1 with the server's log tail the moment the server dies; on SIGTERM it stops the server's whole
process group and exits 0.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

from dlbench.workloads.environment import collect
from dlbench.workloads.serving.command import SERVER_ENVIRONMENT, SERVER_READY
from dlbench.workloads.serving.main import local_shape
from dlbench.workloads.serving.model import write_model_dir
from dlbench.workloads.serving.server import Server, ServerFailed


class _Stop(Exception):
    """SIGTERM (or SIGINT) arrived: stop the server and exit."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def main(args: argparse.Namespace) -> int:
    spec, device = local_shape(args.profile)
    environment = collect()  # what the client's document will describe; its memory is the job's check's
    problem = spec.memory_problem(args.profile, environment.memory_bytes)
    if problem is not None:
        print(f"serving-server: {problem}", flush=True)
        return 1
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    workdir = Path(tempfile.mkdtemp(prefix="dlbench-serving-server-"))
    server = Server(spec, write_model_dir(spec, workdir / "model"), log=workdir / "server.log", host=args.bind,
                    port=args.port)
    try:
        seconds = server.start()
        print(f"{SERVER_ENVIRONMENT}{environment.model_dump_json()}", flush=True)
        print(f"{SERVER_READY} on {args.bind}:{server.port} startup_time={seconds:.3f} model={spec.model.name} "
              f"device={device}", flush=True)
        while True:
            server.check()
            time.sleep(1.0)
    except _Stop:
        return 0
    except ServerFailed as exc:
        print(f"serving-server: {exc}", flush=True)
        return 1
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        sys.stdout.flush()
