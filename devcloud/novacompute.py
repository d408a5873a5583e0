"""nova-compute with the devcloud's fake hypervisor (devcloud/devcloud_virt.py).

Nova loads ``compute_driver`` only from the ``nova.virt`` package, so this launcher makes
``nova.virt.devcloud_virt`` resolve to the file next to it (a meta-path finder: nothing is
imported before Nova's own start-up, which must patch first), then runs Nova's own
``nova-compute`` main with the same arguments.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

DRIVER = Path(__file__).resolve().parent / "devcloud_virt.py"


class DriverFinder:
    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
        if name == "nova.virt.devcloud_virt":
            return importlib.util.spec_from_file_location(name, DRIVER)
        return None


if __name__ == "__main__":
    sys.meta_path.insert(0, DriverFinder())
    sys.argv[0] = "nova-compute"
    from nova.cmd.compute import main

    sys.exit(main())
