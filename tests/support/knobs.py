"""The devcloud's fault knobs, as every test tier turns them: ``devcloud/fault.sh <knob> [arg]``.

The knobs themselves are the devcloud's (docs/devcloud.md for Ironic's, docs/devcloud-nova.md for
Nova's, docs/magnum.md for Magnum's); this module is the one place the tests name the script.
Standard library only: tests/turns.py uses it from the root conftest.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

FAULT_SCRIPT = Path(__file__).resolve().parents[2] / "devcloud" / "fault.sh"


def fault(knob: str, *args: object, timeout: float = 120) -> None:
    """Turn one knob; raises with the script's own words when it refuses or fails."""
    done = subprocess.run([str(FAULT_SCRIPT), knob, *(str(a) for a in args)], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"devcloud fault {knob} {' '.join(map(str, args))} failed (exit {done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()}")
