"""The devcloud's fake hypervisor for nova-compute (docs/devcloud-nova.md).

``compute_driver = devcloud_virt.DevcloudFakeDriver`` (devcloud/ on nova-compute's PYTHONPATH).
Nova's own ``fake.FakeDriver`` (every instance "runs" in memory; the devcloud's VM agent boots a
machine for each ACTIVE server) plus:

- the ``server-error`` fault knob: while ``<state>/run/nova-server-error`` exists, spawn fails
  with ``InvalidInput`` (Nova aborts the build without rescheduling: the server goes ERROR with
  the knob's message in its fault). The file holds how many builds are left to fail (``all``:
  until the knob is undone);
- fake GPUs: with ``[devcloud] fake_gpus = N`` (set for devcloud-hv-1 only) the hypervisor reports
  N PCI devices ``10de:1eb8`` (type-PCI) that ``[pci] device_spec`` exposes and the alias
  ``fake-gpu`` requests (flavor ``dlbench.gpu``).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from nova import exception
from nova.virt import fake
from oslo_config import cfg

CONF = cfg.CONF
CONF.register_opts([cfg.IntOpt("fake_gpus", default=0, help="fake PCI GPUs this hypervisor reports")],
                   group="devcloud")
STATE = Path(os.environ.get("DEVCLOUD_STATE", Path(__file__).resolve().parents[1] / ".devcloud"))
FAULT_FILE = STATE / "run" / "nova-server-error"
GPU_VENDOR, GPU_PRODUCT = "10de", "1eb8"


def take_fault() -> str | None:
    """The knob's message if this build must fail (consuming one of a counted knob)."""
    if not FAULT_FILE.exists():
        return None
    with open(FAULT_FILE.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            left = FAULT_FILE.read_text().strip()
        except FileNotFoundError:
            return None
        if left != "all":
            count = int(left or "0")
            if count <= 1:
                FAULT_FILE.unlink(missing_ok=True)
            else:
                FAULT_FILE.write_text(f"{count - 1}\n")
            if count <= 0:
                return None
    return "devcloud fault server-error: the hypervisor failed to spawn the server"


class DevcloudFakeDriver(fake.FakeDriver):
    def spawn(self, context: Any, instance: Any, image_meta: Any, *args: Any, **kwargs: Any) -> None:
        message = take_fault()
        if message:
            raise exception.InvalidInput(reason=message)
        super().spawn(context, instance, image_meta, *args, **kwargs)

    def get_available_resource(self, nodename: str) -> dict[str, Any]:
        status = super().get_available_resource(nodename)
        gpus = CONF.devcloud.fake_gpus
        if gpus:
            status["pci_passthrough_devices"] = json.dumps([
                {"address": f"0000:{0x81 + k:02x}:00.0", "vendor_id": GPU_VENDOR, "product_id": GPU_PRODUCT,
                 "status": "available", "dev_type": "type-PCI", "parent_addr": None, "numa_node": None,
                 "label": "label_10de_1eb8"} for k in range(gpus)])
        return status
