"""``python -m dlbench.workloads``: see :mod:`dlbench.workloads.cli`."""

from __future__ import annotations

import sys

from dlbench.workloads.cli import main
from dlbench.workloads.training import frameworks

if __name__ == "__main__":
    frameworks.job_process()  # a job's own process: its framework alone (frameworks.isolate)
    sys.exit(main())
