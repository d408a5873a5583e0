"""Did a job run on a loaded machine? The calibrated flag (method and numbers: docs/statistics.md).

The workload harness (``workloads/harness.py``) writes, per job, the share of the machine's CPU
capacity (all CPUs' jiffies in /proc/stat over the job's window) used by processes *outside the
job's own process tree* (``host_other_cpu_share``: busy user + nice + system jiffies minus the
CPU time of the job's process, its waited-for children and its live descendants), the share
stolen by the hypervisor (``host_steal_share``) and the window's length (``host_window_s``).

What was measured (issue 22; a 2-CPU VM, KVM, USER_HZ 100, the smoke profile, each job started
as the executors start it, one after the other, each after a 1-s window with < 3 % CPU busy):

- No competing load, the job as a local process (what ``LocalProcessExecutor`` does): other
  share 0.22-0.74 % for tf_cnn alexnet (7 jobs), 0.09-2.17 % for cpu (HPL via mpirun, 3 jobs),
  0.00 % for disk (dd, ioping, fio: its writeback kworkers stay under 0.5 %).
- No competing load, the job in a Docker container (/proc/stat is the host's there):
  1.13-1.62 % (4 jobs; dockerd + containerd + the shim: 8-9 jiffies in a 2.5-s window). This is the
  controller's share: :data:`CONTROLLER_OTHER_SHARE`.
- One busy-loop process beside the job: 51 and 69 %; one per CPU: 77 and 82 % (process), 53
  and 60 % (container). Other sessions' test runs on the same machine gave 4-60 %: real loads.

Not measured: Airflow's own task process through a whole ``make run`` (while a job runs it waits
on the job's pidfd or on the engine's wait call, so it should add no more than the executors'
figures above). A controller that works harder on the benchmarked machine shows up as flagged
jobs; measure it the same way (``tests/workloads/test_load_flag.py``) before moving a threshold.

Why the load average no longer flags (the old rule, under which ``make run`` had all 44 jobs
flagged, also flagged a 1-minute load average above 1 per CPU before the job): jobs run back
to back, so that average is the previous jobs' (and the controller's) own work, decaying over
minutes: a tf_cnn job keeps about 1.2 of this host's 2 CPUs busy (own share 0.6), Airflow works
between jobs, and the average climbs towards the number of runnable threads, whoever they
belong to. It cannot tell the run's own series from someone else's load, so it is recorded as
context and never flags.

Thresholds:

- :data:`OTHER_CPU_THRESHOLD` 5 %: three times the controller's measured share (so that the
  controller, a container engine and tick-sampling jitter of ±1 % never reach it) and the size
  of the platform differences the report is about (the same 5 % as the noise threshold): a
  neighbour taking that much of a CPU-bound job's machine moves its result by as much. Every
  synthetic competing load above was 10 times over it.
- :data:`STEAL_THRESHOLD` 5 %: stolen time is never the controller's (measured 0.00-0.18 %
  without load); above 5 % a noisy neighbour on the hypervisor moves results by as much.
- :data:`MIN_WINDOW_CPU_SECONDS`: a share is one jiffy in ``cpus x 100 x window``; below one
  CPU-second (100 jiffies) one stray jiffy is 1 % and the controller's few jiffies could reach
  5 %, so a shorter job's shares are not judged (recorded, not flagged).

Older documents (before ``host_window_s``) are judged on their shares as written; their
``host_other_cpu_share`` also counted interrupt time and live children, so it can only be
higher, never hide a load.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

LOAD_LABELS = ("host_cpus", "host_load1_before", "host_load1_after", "host_steal_share", "host_other_cpu_share",
               "host_own_cpu_share", "host_window_s")
"""The execution labels the workload harness writes about the machine's load (strings, as all
labels); the first five are also in documents written before the calibration."""

CONTROLLER_OTHER_SHARE = 0.0162
"""The largest "other processes" share measured with no competing load: a tf_cnn smoke job in a
Docker container, the container engine being the other processes (module docstring)."""
OTHER_CPU_THRESHOLD = 0.05
"""Share of the machine's CPU capacity used outside the job's process tree above which it ran on
a loaded machine: three times :data:`CONTROLLER_OTHER_SHARE`."""
STEAL_THRESHOLD = 0.05
"""Share of the machine's CPU time stolen by the hypervisor while the job ran."""
MIN_WINDOW_CPU_SECONDS = 1.0
"""A job's shares are judged only when its window held at least this many CPU-seconds
(``host_window_s x host_cpus``): 100 jiffies, a resolution of 1 %."""


def _number(labels: Mapping[str, Any], key: str) -> float | None:
    try:
        value = float(labels[key])
    except (KeyError, TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def judged(labels: Mapping[str, Any]) -> bool:
    """Whether the job's window was long enough to judge its shares (:data:`MIN_WINDOW_CPU_SECONDS`);
    a document without ``host_window_s`` (older harness) is judged."""
    window, cpus = _number(labels, "host_window_s"), _number(labels, "host_cpus")
    return window is None or cpus is None or window * cpus >= MIN_WINDOW_CPU_SECONDS


def load_flag(labels: Mapping[str, Any] | None) -> str | None:
    """Why a job ran on a loaded machine (from its harness's load labels), or None: CPU stolen by
    the hypervisor above :data:`STEAL_THRESHOLD`, or CPU used by processes outside the job's tree
    above :data:`OTHER_CPU_THRESHOLD`, over a window long enough to tell. The load average is
    not judged (module docstring: it is the previous jobs' own work)."""
    labels = labels or {}
    if not judged(labels):
        return None
    reasons = []
    steal = _number(labels, "host_steal_share")
    if steal is not None and steal > STEAL_THRESHOLD:
        reasons.append(f"{steal * 100:.0f}% of the CPU time stolen by the hypervisor")
    other = _number(labels, "host_other_cpu_share")
    if other is not None and other > OTHER_CPU_THRESHOLD:
        reasons.append(f"other processes used {other * 100:.0f}% of the machine's CPU while it ran "
                       f"(the controller alone: about {CONTROLLER_OTHER_SHARE * 100:.0f}%)")
    return "; ".join(reasons) or None
