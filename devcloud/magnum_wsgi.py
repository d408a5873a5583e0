"""Serve the real magnum-api WSGI app with gunicorn on 127.0.0.1 (devcloud/magnumcloud.py).

``python magnum_wsgi.py magnum-api <magnum.conf> <port>``: like wsgirun.py, but Magnum's WSGI
module parses ``sys.argv`` with oslo.config at import, so the config file is passed there. The
name keeps ``magnum-api`` in the command line before gunicorn retitles the process (the
devcloud's pid checks look for it).
"""

from __future__ import annotations

import sys
from typing import Any

from wsgirun import App


class MagnumApp(App):
    def __init__(self, conf: str, port: int) -> None:
        self.conf = conf
        super().__init__("magnum-api", port, "magnum.wsgi.api:application", 4)

    def load(self) -> Any:
        sys.argv = ["magnum-api", "--config-file", self.conf]
        from magnum.wsgi.api import application

        return application


if __name__ == "__main__":
    MagnumApp(sys.argv[2], int(sys.argv[3])).run()
