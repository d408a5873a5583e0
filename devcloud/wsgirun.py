"""Serve one OpenStack WSGI app with gunicorn, on 127.0.0.1 only (devcloud/novacloud.py).

``python wsgirun.py <name> <port> <module:attr> [threads]``: a gunicorn application object made
here rather than gunicorn's command line, because the services' WSGI entry points parse
``sys.argv`` with oslo.config (Keystone's would reject gunicorn's options). Each runs one worker
process with a few threads (gthread) and no control socket.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from gunicorn.app.base import BaseApplication


class App(BaseApplication):  # type: ignore[misc]
    def __init__(self, name: str, port: int, target: str, threads: int) -> None:
        self.name, self.port, self.target, self.threads = name, port, target, threads
        super().__init__()

    def load_config(self) -> None:
        for key, value in {"bind": f"127.0.0.1:{self.port}", "workers": 1, "threads": self.threads,
                           "worker_class": "gthread", "timeout": 300, "graceful_timeout": 5,
                           "proc_name": f"wsgirun.py {self.name} ", "control_socket_disable": True,
                           "accesslog": None}.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        sys.argv = [f"devcloud-{self.name}"]
        module, _, attr = self.target.partition(":")
        obj = importlib.import_module(module)
        if attr.endswith("()"):
            return getattr(obj, attr[:-2])()
        return getattr(obj, attr)


if __name__ == "__main__":
    name, port, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    App(name, port, target, int(sys.argv[4]) if len(sys.argv) > 4 else 4).run()
