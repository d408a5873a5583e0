"""Cgroup counters come from the process's own cgroup, and the labels say exactly which (issue 11, item 4).

Fake hierarchies on disk, with the /proc/self/cgroup and /proc/self/mountinfo a host or a
container would show, for cgroup v1 and v2: where the counters are read and what the labels say.
"""

from __future__ import annotations

from pathlib import Path

from dlbench.workloads import counters, environment
from dlbench.workloads.environment import UNIFIED


def mountinfo(*mounts: tuple[str, str, str, str]) -> str:
    """Lines of /proc/self/mountinfo for cgroup mounts: (fstype, root in the hierarchy, mount point, options)."""
    return "\n".join(f"{30 + i} 23 0:{40 + i} {root} {point} rw,relatime - {fstype} {fstype} {options}"
                     for i, (fstype, root, point, options) in enumerate(mounts)) + "\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def v1_hierarchy(base: Path, cgroup: str, usage_ns: int, pgfault: int, *, root_usage_ns: int = 10**15) -> Path:
    """A v1 cpuacct+cpu+memory tree: the root (machine-wide numbers) and ``cgroup`` (its own)."""
    for controller in ("cpuacct", "cpu", "memory"):
        write(base / controller / "cgroup.sane_behavior", "0\n")  # only a v1 hierarchy's root has it
        write(base / controller / "cpuacct.usage", f"{root_usage_ns}\n")
        write(base / controller / "memory.stat", "pgfault 999999\n")
        own = base / controller / cgroup.lstrip("/")
        write(own / "cpuacct.usage", f"{usage_ns}\n")
        write(own / "cpuacct.stat", "user 150\nsystem 50\n")
        write(own / "cpu.stat", "nr_periods 10\nnr_throttled 4\nthrottled_time 300000000\n")
        write(own / "cpu.cfs_quota_us", "50000\n")
        write(own / "cpu.cfs_period_us", "100000\n")
        write(own / "memory.stat", f"pgfault 5\npgmajfault 1\ntotal_pgfault {pgfault}\ntotal_pgmajfault 2\n")
        write(own / "memory.limit_in_bytes", f"{256 << 20}\n")
    return base


V1_PROC = "4:memory:{mem}\n3:cpuacct:{cpu}\n2:cpu:{cpu}\n0::/\n"


def test_v1_host_reads_the_jobs_own_cgroup_not_the_root(tmp_path):
    base = v1_hierarchy(tmp_path, "/system.slice/airflow-worker.service", usage_ns=2_000_000_000, pgfault=70)
    dirs = environment.cgroup_dirs(
        V1_PROC.format(mem="/system.slice/airflow-worker.service", cpu="/system.slice/airflow-worker.service"),
        mountinfo(*[("cgroup", "/", str(base / c), f"rw,{c}") for c in ("cpuacct", "cpu", "memory")]))
    assert {d.kind for d in dirs.values()} == {"own"}
    snap = counters.cgroup_snapshot(dirs)
    assert snap["cgroup_cpu_time"] == (2.0, "s")  # not the root's 10**6 s
    assert snap["cgroup_page_faults"] == (70.0, "count")  # total_pgfault of the own cgroup
    assert snap["cgroup_cpu_throttled_periods"] == (4.0, "count")
    labels = environment.cgroup_labels(dirs)
    assert labels["cgroup"] == "/system.slice/airflow-worker.service (own cgroup)"
    assert labels["cgroup_source"] == ("v1: " + ", ".join(
        f"{c}={base / c / 'system.slice/airflow-worker.service'}" for c in ("cpuacct", "cpu", "memory")))
    info = environment.container_info(dirs)
    assert (info.cgroup_version, info.cpu_limit_cores, info.memory_limit_bytes) == (1, 0.5, 256 << 20)


def test_v1_mixed_hierarchies_are_labelled_per_controller(tmp_path):
    """This project's own CI host: the memory hierarchy has a cgroup per process group, the cpu ones
    do not (the process is in their root). The root's counters are read, and labelled as the machine's."""
    base = v1_hierarchy(tmp_path, "/process_api/abc", usage_ns=1, pgfault=3, root_usage_ns=7 * 10**9)
    dirs = environment.cgroup_dirs(
        V1_PROC.format(mem="/process_api/abc", cpu="/"),
        mountinfo(*[("cgroup", "/", str(base / c), f"rw,{c}") for c in ("cpuacct", "cpu", "memory")]))
    assert (dirs["cpuacct"].kind, dirs["memory"].kind) == ("machine root", "own")
    assert counters.cgroup_snapshot(dirs)["cgroup_cpu_time"] == (7.0, "s")
    assert counters.cgroup_snapshot(dirs)["cgroup_page_faults"] == (3.0, "count")
    assert environment.cgroup_labels(dirs)["cgroup"] == (
        "cpuacct=/ (root: counters include the whole machine); cpu=/ (root: counters include the whole machine); "
        "memory=/process_api/abc (own cgroup)")


def test_v1_container_sees_its_cgroup_at_the_mount_point(tmp_path):
    """Docker on a v1 host (the host's cgroup namespace): /proc/self/cgroup says /docker/<id>, and
    the mounts start at that cgroup, so its files are at the mount point itself."""
    base = tmp_path / "ct"
    for controller in ("cpuacct", "cpu", "memory"):
        write(base / controller / "cpuacct.usage", "3000000000\n")
        write(base / controller / "cpu.cfs_quota_us", "50000\n")
        write(base / controller / "cpu.cfs_period_us", "100000\n")
        write(base / controller / "memory.limit_in_bytes", f"{256 << 20}\n")
    own = "/docker/0123abcd"
    dirs = environment.cgroup_dirs(V1_PROC.format(mem=own, cpu=own),
                                   mountinfo(*[("cgroup", own, str(base / c), f"ro,{c}")
                                               for c in ("cpuacct", "cpu", "memory")]))
    assert {(d.kind, d.path) for d in dirs.values()} == {("own", own)}
    assert dirs["cpuacct"].directory == base / "cpuacct"
    assert counters.cgroup_snapshot(dirs)["cgroup_cpu_time"] == (3.0, "s")
    assert environment.cgroup_labels(dirs)["cgroup"] == "/docker/0123abcd (own cgroup)"
    assert environment.container_info(dirs).cpu_limit_cores == 0.5


def v2_cgroup(directory: Path, usage_usec: int, *, root: bool = False) -> None:
    write(directory / "cgroup.controllers", "cpu memory io\n")
    if not root:
        write(directory / "cgroup.type", "domain\n")
        write(directory / "cpu.max", "50000 100000\n")
        write(directory / "memory.max", f"{256 << 20}\n")
    write(directory / "cpu.stat", f"usage_usec {usage_usec}\nuser_usec 1\nsystem_usec 2\nnr_throttled 3\n"
                                  "throttled_usec 4\n")
    write(directory / "memory.stat", "pgfault 11\npgmajfault 0\n")
    write(directory / "io.stat", "8:0 rbytes=100 wbytes=200 rios=1 wios=2\n")


def test_v2_host_joins_the_own_path_under_the_mount(tmp_path):
    v2_cgroup(tmp_path, 10**12, root=True)
    v2_cgroup(tmp_path / "user.slice" / "session-1.scope", 4_000_000)
    dirs = environment.cgroup_dirs("0::/user.slice/session-1.scope\n",
                                   mountinfo(("cgroup2", "/", str(tmp_path), "rw,nsdelegate")))
    assert dirs[UNIFIED].kind == "own"
    snap = counters.cgroup_snapshot(dirs)
    assert snap["cgroup_cpu_time"] == (4.0, "s")
    assert snap["cgroup_block_written"] == (200.0, "bytes")
    assert environment.cgroup_labels(dirs) == {
        "cgroup": "/user.slice/session-1.scope (own cgroup)",
        "cgroup_source": f"v2: {tmp_path / 'user.slice' / 'session-1.scope'}"}


def test_v2_private_namespace_root_is_the_containers_own(tmp_path):
    v2_cgroup(tmp_path, 5_000_000)  # a non-root cgroup (it has cgroup.type) mounted as the namespace's /
    dirs = environment.cgroup_dirs("0::/\n", mountinfo(("cgroup2", "/", str(tmp_path), "rw")))
    assert dirs[UNIFIED].kind == "namespace root"
    assert environment.cgroup_labels(dirs)["cgroup"] == "/ (cgroup namespace root: the container's own cgroup)"
    info = environment.container_info(dirs)
    assert (info.cgroup_version, info.cpu_limit_cores, info.memory_limit_bytes) == (2, 0.5, 256 << 20)


def test_v2_real_root_is_labelled_as_the_whole_machine(tmp_path):
    v2_cgroup(tmp_path, 10**12, root=True)
    dirs = environment.cgroup_dirs("0::/\n", mountinfo(("cgroup2", "/", str(tmp_path), "rw")))
    assert dirs[UNIFIED].kind == "machine root"
    assert environment.cgroup_labels(dirs)["cgroup"] == "/ (root: counters include the whole machine)"


def test_v2_own_cgroup_not_visible_says_what_was_read(tmp_path):
    v2_cgroup(tmp_path, 6_000_000)
    dirs = environment.cgroup_dirs("0::/kubepods/pod1/ctr\n", mountinfo(("cgroup2", "/other", str(tmp_path), "rw")))
    assert dirs[UNIFIED].kind == "not visible"
    assert dirs[UNIFIED].directory == tmp_path
    assert environment.cgroup_labels(dirs)["cgroup"] == (
        "/other (the mounted cgroup; own cgroup /kubepods/pod1/ctr not visible here)")
    assert counters.cgroup_snapshot(dirs)["cgroup_cpu_time"] == (6.0, "s")


def test_no_hierarchy_is_said_not_guessed():
    assert environment.cgroup_dirs("0::/\n", "") == {}
    assert environment.cgroup_labels({})["cgroup"].startswith("unknown")
    assert counters.cgroup_snapshot({}) == {}


def test_this_machine_labels_match_the_directories_read():
    """On whatever machine runs the tests: every directory in cgroup_source exists, and a cgroup
    labelled as the own one is the one /proc/self/cgroup names."""
    dirs = environment.cgroup_dirs()
    labels = environment.cgroup_labels(dirs)
    for d in dirs.values():
        assert d.directory.is_dir()
        assert str(d.directory) in labels["cgroup_source"]
        if d.kind == "own":
            assert d.path == d.own and f"{d.path} (own cgroup)" in labels["cgroup"]
