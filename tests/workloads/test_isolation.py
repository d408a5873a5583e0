"""A job imports its own framework only, in an environment that carries all three (this host's, the
node and VM images'): what its framework would import only because another is installed is hidden
(``frameworks.isolate``), so a job costs what it costs in its framework's own image. Real jobs in
processes of their own, on this interpreter (TensorFlow, PyTorch and JAX beside each other)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dlbench.workloads.profiles import Framework
from dlbench.workloads.result import ResultDocument, Status
from dlbench.workloads.training import frameworks

# Runs the job as `python -m dlbench.workloads ARGV` does, then writes which frameworks the process
# had imported, hidden (None) or not at all, when it exits.
WRAPPER = """
import atexit, json, runpy, sys
where = sys.argv[1]
def seen():
    state = {p: ("hidden" if sys.modules[p] is None else "imported") if p in sys.modules else "absent"
             for p in ("tensorflow", "torch", "jax")}
    open(where, "w").write(json.dumps(state))
atexit.register(seen)
sys.argv = ["dlbench.workloads", *sys.argv[2:]]
runpy.run_module("dlbench.workloads", run_name="__main__", alter_sys=True)
"""

JOBS = {
    "tf-cnn": (["--model", "alexnet", "--measured-steps", "1", "--warmup-steps", "1"],
               {"tensorflow": "imported", "torch": "hidden", "jax": "hidden"}),
    "dltools": (["--model", "fcn5", "--epochs", "2", "--batches-per-epoch", "1"],
                {"tensorflow": "imported", "torch": "hidden", "jax": "hidden"}),
    "fathom": (["--model", "autoenc", "--task", "infer", "--measured-steps", "2"],
               {"tensorflow": "imported", "torch": "hidden", "jax": "hidden"}),
    "tf-cnn-jax": (["--model", "alexnet", "--framework", "jax", "--measured-steps", "1", "--warmup-steps", "1"],
                   {"tensorflow": "hidden", "torch": "hidden", "jax": "imported"}),
}


@pytest.mark.parametrize("job", sorted(JOBS))
def test_a_job_imports_its_framework_and_no_other(tmp_path, job):
    argv, expected = JOBS[job]
    command = job.removesuffix("-jax")
    out, seen = tmp_path / "doc.json", tmp_path / "seen.json"
    done = subprocess.run([sys.executable, "-c", WRAPPER, str(seen), command, "--out", str(out),
                           "--profile", "smoke", *argv], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = ResultDocument.read(out)
    assert doc.status is Status.OK and doc.sample("throughput").value > 0
    # TensorFlow's Lite converter imports JAX whenever it is installed: hidden, it did not
    assert json.loads(seen.read_text()) == expected
    # ... and the document still says what the machine has installed: hidden is not absent
    if "frameworks_installed" in doc.labels:
        assert doc.labels["frameworks_installed"] == "tensorflow,pytorch,jax"


def test_a_caller_in_its_own_process_keeps_every_framework():
    """``cli.main`` called in a process that is not a job's (a test's, this one) hides nothing: the
    process's other code may need any framework."""
    before = {p: sys.modules.get(p, "absent") for p in frameworks.PACKAGES.values()}
    frameworks.isolate(Framework.TENSORFLOW)
    assert {p: sys.modules.get(p, "absent") for p in frameworks.PACKAGES.values()} == before
    assert not frameworks._HIDDEN
    # the environment has all three: a framework found installed is not a framework imported
    assert set(frameworks.installed()) == set(Framework) - {Framework.VLLM}


def test_a_framework_that_is_not_installed_is_not_reported_installed_after_isolation():
    """PyTorch's image has no TensorFlow or JAX: hiding them must not make them "installed" (run JJ:
    the transformer's documents in PyTorch's image said tensorflow,pytorch,jax). A framework whose
    package cannot be found stands for the absent one here, in a job's own process."""
    script = """
import json, sys
from dlbench.workloads.profiles import Framework
from dlbench.workloads.training import frameworks
frameworks.PACKAGES[Framework.JAX] = "no_such_framework_package"
frameworks.job_process()
frameworks.isolate(Framework.TENSORFLOW)
print(json.dumps({"installed": [f.value for f in frameworks.installed()],
                  "hidden": sorted(f.value for f in frameworks._HIDDEN),
                  "marked": "no_such_framework_package" in sys.modules}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"installed": ["tensorflow", "pytorch"], "hidden": ["pytorch"],
                                       "marked": False}
