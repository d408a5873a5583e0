"""The local provider's VM tier: real QEMU guests booted from the VM image (``make vm-image``).

Skips with the reason when QEMU, genisoimage or the image is missing (fails instead under
``DLBENCH_REQUIRE_ALL=1``). Guests run under TCG where KVM is not usable, so the tier keeps to
one guest for the whole lifecycle and the cheapest real workload (the ``cpu`` suite, smoke).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dlbench.providers.qemu import DEFAULT_VM_IMAGE_DIR, QEMU, VMImage
from tests.support.prereqs import require
from tests.support.vm import wait_for_build


@pytest.fixture(scope="session")
def vm_image() -> VMImage:
    for tool in (QEMU, "qemu-img", "genisoimage"):
        require(shutil.which(tool) is not None,
                f"{tool} is not installed (apt-get install qemu-system-x86 qemu-utils genisoimage)")
    wait_for_build()
    try:
        return VMImage.load(Path(DEFAULT_VM_IMAGE_DIR))
    except FileNotFoundError as exc:
        require(False, str(exc))
        raise
