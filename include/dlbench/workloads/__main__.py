"""``python -m dlbench.workloads``: see :mod:`dlbench.workloads.cli`."""

from __future__ import annotations

import sys

from dlbench.workloads.cli import main

if __name__ == "__main__":
    sys.exit(main())
