"""Scale on the devcloud: one real dlbench_benchmark run that provisions, benchmarks (smoke cpu)
and releases N Ironic bare-metal nodes, every node benchmarked (``every_machine``), vs the same run
with one node.

Each run is one ``dag.test()`` of the real DAG in a fresh child process (provider ironic, platform
bare_metal, suite cpu, profile smoke, 1 repetition, the project's node image: nothing to prepare).
``dag.test()`` runs the mapped jobs one after another, so the jobs' part of the wall time is the
serial figure; provisioning and release are parallel inside their tasks either way. Printed per N:

- wall time of the run (``dag.test()`` call) and its ratio to the 1-node run (goal <= 2x), with
  the time of provision / jobs / release / load and the run's other tasks;
- Ironic API requests per node: the request lines (``ironic.api ... METHOD /v1/...``) that
  Ironic's own API log (``.devcloud/logs/ironic.log``) gained during the run; the node agent reads
  Ironic's database, not the API, so while the devcloud lock is held these are the run's;
- peak controller memory: the summed RSS of the child's process tree (the process that ran the
  DAG and everything it started), sampled every 0.2 s; with the host's used memory (MemTotal -
  MemAvailable) above its level before the run (controller + the N machines + Ironic);
- host CPU: the share of the 2 cores busy during the run, and how much of that the controller's
  process tree used (the rest: the N machines' benchmarks, sshd, Ironic, PostgreSQL);
- the warehouse load rate: samples of the run in the warehouse / duration of the ``load`` task.

Sizes run in the given order, the 1-node run interleaved before each larger one (these machines
are noisy); the 1-node figure is the median of those. Use the devcloud only under its lock:

    flock /tmp/dlbench-devcloud.lock .venv/bin/python bench/scale_run.py --sizes 10,25,50
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IRONIC_LOG = ROOT / ".devcloud" / "logs" / "ironic.log"
API_LINE = re.compile(r" INFO ironic\.api .* - (GET|POST|PATCH|PUT|DELETE|HEAD) (/\S*) - (\d{3}) ")


# -- the child: one dag.test() of the real DAG -------------------------------------------------------------------

def child(nodes: int, args: argparse.Namespace) -> dict[str, Any]:
    """Run the DAG once for ``nodes`` nodes; return what the parent prints (JSON-able)."""
    sys.path.insert(0, str(ROOT / "include"))
    from airflow.dag_processing.dagbag import DagBag
    from sqlalchemy import text

    from dlbench.pipeline.steps import safe_run_id
    from dlbench.warehouse import db

    bag = DagBag(dag_folder=str(ROOT / "dags" / "dlbench_benchmark.py"))
    if bag.import_errors:
        raise RuntimeError(f"DAG import errors: {bag.import_errors}")
    dag = bag.dags["dlbench_benchmark"]
    conf = request_conf(nodes, args)
    started = time.monotonic()
    run = dag.test(run_conf=conf)
    wall = time.monotonic() - started
    tis = run.get_task_instances()
    per_task: dict[str, dict[str, Any]] = {}
    for ti in tis:
        entry = per_task.setdefault(ti.task_id, {"count": 0, "seconds": 0.0, "states": {}})
        entry["count"] += 1
        if ti.start_date and ti.end_date:
            entry["seconds"] += (ti.end_date - ti.start_date).total_seconds()
        entry["states"][str(ti.state)] = entry["states"].get(str(ti.state), 0) + 1
    safe = safe_run_id(run.run_id)
    with db.engine_for(os.environ["DLBENCH_WAREHOUSE_URL"]).connect() as conn:
        samples = conn.execute(text(
            "SELECT count(*) FROM samples s JOIN executions e ON e.id = s.execution_id JOIN runs r "
            "ON r.id = e.run_pk WHERE r.run_id = :run"), {"run": safe}).scalar_one()
        machines = conn.execute(text(
            "SELECT e.labels FROM executions e JOIN runs r ON r.id = e.run_pk JOIN benchmarks b "
            "ON b.id = e.benchmark_id WHERE r.run_id = :run AND b.suite = 'cpu' AND e.status = 'ok'"),
            {"run": safe}).scalars().all()
    labels = [m if isinstance(m, dict) else json.loads(m) for m in machines]
    return {"nodes": nodes, "state": str(run.state), "wall_s": wall, "tasks": per_task, "samples": int(samples),
            "cpu_ok_machines": len({lab.get("machine") for lab in labels}),
            "cpu_ok_targets": len({lab.get("target") for lab in labels})}


# -- the parent: environment, sampling, counting --------------------------------------------------------------------

def _meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, value = line.split(":", 1)
        out[key] = int(value.split()[0]) * 1024
    return out


def _cpu_busy_total() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _pss(pid: int) -> int:
    """Proportional set size in bytes (shared pages divided among their users): unlike RSS, a
    deployment of forked workers is not counted once per fork."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Sampler(threading.Thread):
    """Peak RSS and CPU time of a process tree, peak host memory in use, every ``interval`` s."""

    def __init__(self, pids: list[int], interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        import psutil

        self.roots = [psutil.Process(pid) for pid in pids]
        self.interval = interval
        self.peak_rss = 0
        self.peak_pss = 0
        self.peak_used = 0
        self.cpu: dict[int, float] = {}  # pid -> last seen user+system seconds (children that ended keep theirs)
        self.baseline: dict[int, float] = {}  # CPU the processes alive at the start had used before the run
        for root in self.roots:
            try:
                for proc in [root, *root.children(recursive=True)]:
                    times = proc.cpu_times()
                    self.baseline[proc.pid] = times.user + times.system
            except psutil.NoSuchProcess:
                continue
        self.done = threading.Event()

    @property
    def cpu_seconds(self) -> float:
        """CPU time the process tree used while sampled (a long-lived deployment's earlier CPU left out)."""
        return sum(seconds - self.baseline.get(pid, 0.0) for pid, seconds in self.cpu.items())

    def run(self) -> None:
        import psutil

        while not self.done.is_set():
            procs = []
            for root in self.roots:
                try:
                    procs += [root, *root.children(recursive=True)]
                except psutil.NoSuchProcess:
                    continue
            if not procs:
                break
            rss = pss = 0
            for proc in procs:
                try:
                    rss += proc.memory_info().rss
                    pss += _pss(proc.pid)
                    times = proc.cpu_times()
                    self.cpu[proc.pid] = times.user + times.system
                except psutil.NoSuchProcess:
                    continue
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_pss = max(self.peak_pss, pss)
            mem = _meminfo()
            self.peak_used = max(self.peak_used, mem["MemTotal"] - mem["MemAvailable"])
            self.done.wait(self.interval)


def count_api(offset: int) -> tuple[int, dict[str, int]]:
    """Ironic API request lines written to its log after byte ``offset``: total, by method."""
    by_method: dict[str, int] = {}
    with IRONIC_LOG.open("rb") as log:
        log.seek(offset)
        for raw in log:
            match = API_LINE.search(raw.decode(errors="replace"))
            if match:
                by_method[match.group(1)] = by_method.get(match.group(1), 0) + 1
    return sum(by_method.values()), by_method


def prepare_home(base: Path) -> dict[str, str]:
    """A private Airflow metadata DB (migrated, airflow_settings.yaml loaded) and DLBENCH_HOME,
    as the tests make theirs: the bench never touches the user's."""
    env = {**os.environ, "AIRFLOW_HOME": str(base / "airflow"), "DLBENCH_HOME": str(base / "dlbench"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"), "TF_CPP_MIN_LOG_LEVEL": "2",
           "DLBENCH_WAREHOUSE_URL": f"sqlite:///{base / 'warehouse.db'}",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "include"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    airflow = str(Path(sys.executable).with_name("airflow"))
    subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True, text=True, env=env)
    subprocess.run([sys.executable, "-m", "dlbench.airflow_settings", "--overwrite"], check=True, capture_output=True,
                   text=True, env=env)
    return env


def measure(nodes: int, env: dict[str, str], args: argparse.Namespace, base: Path) -> dict[str, Any]:
    out = base / f"result-{nodes}-{time.monotonic_ns()}.json"
    log = base / f"run-{nodes}-{time.monotonic_ns()}.log"
    mem_before = _meminfo()
    used_before = mem_before["MemTotal"] - mem_before["MemAvailable"]
    offset = IRONIC_LOG.stat().st_size
    busy0, total0 = _cpu_busy_total()
    started = time.monotonic()
    with log.open("w") as sink:
        proc = subprocess.Popen([sys.executable, __file__, "--child", str(nodes), "--out", str(out),
                                 *_passthrough(args)], env=env, stdout=sink, stderr=subprocess.STDOUT)
        sampler = Sampler([proc.pid])
        sampler.start()
        proc.wait()
        sampler.done.set()
        sampler.join()
    elapsed = time.monotonic() - started
    busy1, total1 = _cpu_busy_total()
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"run with {nodes} node(s) failed (exit {proc.returncode}); log: {log}")
    result = json.loads(out.read_text())
    calls, by_method = count_api(offset)
    cores = os.cpu_count() or 1
    ticks = os.sysconf("SC_CLK_TCK")
    result.update(
        api_calls=calls, api_by_method=by_method, peak_rss=sampler.peak_rss, peak_pss=sampler.peak_pss,
        host_used_peak_delta=sampler.peak_used - used_before, process_s=elapsed, log=str(log),
        host_busy_share=(busy1 - busy0) / (total1 - total0) if total1 > total0 else 0.0,
        host_busy_core_s=(busy1 - busy0) / ticks, controller_cpu_s=sampler.cpu_seconds, cores=cores)
    return result



# -- the parallel figure: the same run on the multi-worker deployment (scheduler + Celery workers) ----------------

def request_conf(nodes: int, args: argparse.Namespace) -> dict[str, Any]:
    return {"provider": "ironic", "platforms": ["bare_metal"], "suites": ["cpu"], "data": ["synthetic"],
            "profile": "smoke", "repetitions": 1, "every_machine": True,
            "ironic": {"cloud": args.cloud, "clouds_file": args.clouds_file, "resource_class": args.resource_class,
                       "nodes": {"bare_metal": nodes}, "image_source": args.image, "poll_interval": args.poll,
                       "expiry_hours": 1}}


class Api:
    """The deployment's REST API v2 as a user calls it (JWT from /auth/token)."""

    def __init__(self, url: str, user: str, password: str) -> None:
        import httpx

        token = httpx.post(f"{url}/auth/token", json={"username": user, "password": password}, timeout=30)
        token.raise_for_status()
        self.client = httpx.Client(base_url=url, timeout=60,
                                   headers={"Authorization": f"Bearer {token.json()['access_token']}"})

    def call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        resp = self.client.request(method, path, **kwargs)
        if resp.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {resp.status_code} {resp.text[:1000]}")
        return resp.json()


def measure_cluster(nodes: int, cluster: Any, api: Api, args: argparse.Namespace) -> dict[str, Any]:
    """One run triggered through the REST API, its task instances run by the Celery workers."""
    from datetime import datetime

    from sqlalchemy import create_engine, text

    dag = "/api/v2/dags/dlbench_benchmark"
    mem_before = _meminfo()
    used_before = mem_before["MemTotal"] - mem_before["MemAvailable"]
    offset = IRONIC_LOG.stat().st_size
    busy0, total0 = _cpu_busy_total()
    sampler = Sampler([proc.pid for proc in cluster.procs.values() if proc.poll() is None])
    sampler.start()
    started = time.monotonic()
    run_id = api.call("POST", f"{dag}/dagRuns", json={"logical_date": None, "conf": request_conf(nodes, args)})[
        "dag_run_id"]
    while True:
        run = api.call("GET", f"{dag}/dagRuns/{run_id}")
        if run["state"] in ("success", "failed"):
            break
        cluster.check_alive()
        time.sleep(1)
    elapsed = time.monotonic() - started
    sampler.done.set()
    sampler.join()
    busy1, total1 = _cpu_busy_total()
    tis = api.call("GET", f"{dag}/dagRuns/{run_id}/taskInstances", params={"limit": 1000})["task_instances"]

    def when(value: str | None) -> datetime | None:
        return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None

    per_task: dict[str, dict[str, Any]] = {}
    for ti in tis:
        entry = per_task.setdefault(ti["task_id"], {"count": 0, "seconds": 0.0, "states": {}, "span": [None, None]})
        entry["count"] += 1
        start, end = when(ti.get("start_date")), when(ti.get("end_date"))
        if start and end:
            entry["seconds"] += (end - start).total_seconds()
            first, last = entry["span"]
            entry["span"] = [min(first, start) if first else start, max(last, end) if last else end]
        entry["states"][str(ti["state"])] = entry["states"].get(str(ti["state"]), 0) + 1
    for entry in per_task.values():
        first, last = entry.pop("span")
        entry["span_s"] = (last - first).total_seconds() if first and last else 0.0
    if "run_job" in per_task:  # jobs overlap here: their part of the wall time is the span, not the sum
        per_task["run_job"]["sum_s"] = per_task["run_job"]["seconds"]
        per_task["run_job"]["seconds"] = per_task["run_job"]["span_s"]
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", run_id).strip("-")[:80]
    engine = create_engine(cluster.warehouse_url)
    with engine.connect() as conn:
        samples = conn.execute(text(
            "SELECT count(*) FROM samples s JOIN executions e ON e.id = s.execution_id JOIN runs r "
            "ON r.id = e.run_pk WHERE r.run_id = :run"), {"run": safe}).scalar_one()
        labels = conn.execute(text(
            "SELECT e.labels FROM executions e JOIN runs r ON r.id = e.run_pk JOIN benchmarks b "
            "ON b.id = e.benchmark_id WHERE r.run_id = :run AND b.suite = 'cpu' AND e.status = 'ok'"),
            {"run": safe}).scalars().all()
    engine.dispose()
    labels = [lab if isinstance(lab, dict) else json.loads(lab) for lab in labels]
    calls, by_method = count_api(offset)
    hosts = sorted({ti.get("hostname") or "" for ti in tis if ti["task_id"] == "run_job"})
    return {"nodes": nodes, "state": str(run["state"]), "wall_s": elapsed, "tasks": per_task, "samples": int(samples),
            "cpu_ok_machines": len({lab.get("machine") for lab in labels}),
            "cpu_ok_targets": len({lab.get("target") for lab in labels}), "job_hosts": hosts,
            "api_calls": calls, "api_by_method": by_method, "peak_rss": sampler.peak_rss, "peak_pss": sampler.peak_pss,
            "host_used_peak_delta": sampler.peak_used - used_before, "process_s": elapsed, "run_id": run_id,
            "host_busy_share": (busy1 - busy0) / (total1 - total0) if total1 > total0 else 0.0,
            "host_busy_core_s": (busy1 - busy0) / os.sysconf("SC_CLK_TCK"),
            "controller_cpu_s": sampler.cpu_seconds, "cores": os.cpu_count() or 1}


def save(args: argparse.Namespace, ones: list[dict[str, Any]], many: list[dict[str, Any]]) -> None:
    """Every run's figures so far to ``--json`` (after each run: a long series cut short keeps them)."""
    if args.json:
        Path(args.json).write_text(json.dumps({"mode": args.mode, "ones": ones, "many": many}, indent=2))


def run_cluster(sizes: list[int], args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Start the deployment (docs/airflow-cluster.md), raise the job pool to ``--slots`` through its
    REST API (this deployment only; airflow_settings.yaml keeps 1), then 1, N, 1, N' ... runs."""
    sys.path.insert(0, str(ROOT / "include"))
    from tools.cluster import Cluster

    extra = {"AIRFLOW__CORE__PARALLELISM": str(max(64, args.slots)),
             "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": str(max(64, args.slots)),
             "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
             "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5", "TF_CPP_MIN_LOG_LEVEL": "2"}
    ones: list[dict[str, Any]] = []
    many: list[dict[str, Any]] = []
    with Cluster(workers=args.workers, concurrency=args.concurrency, extra_env=extra) as cluster:
        api = Api(cluster.api_url, cluster.user, cluster.password)
        deadline = time.monotonic() + 180
        while api.client.get("/api/v2/dags/dlbench_benchmark").status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("dlbench_benchmark not parsed by the deployment within 180 s")
            cluster.check_alive()
            time.sleep(1)
        api.call("PATCH", "/api/v2/dags/dlbench_benchmark", json={"is_paused": False})
        pool = api.call("PATCH", "/api/v2/pools/dlbench_benchmark", params={"update_mask": "slots"},
                        json={"pool": "dlbench_benchmark", "slots": args.slots, "include_deferred": False})
        print(f"deployment {cluster.base}: {args.workers} Celery workers x concurrency {args.concurrency}; pool "
              f"dlbench_benchmark raised to {pool['slots']} slots through the REST API", flush=True)
        for n in sizes:
            ones.append(measure_cluster(1, cluster, api, args))
            save(args, ones, many)
            print(f"1 node: {ones[-1]['wall_s']:.1f} s ({ones[-1]['state']})", flush=True)
            many.append(measure_cluster(n, cluster, api, args))
            save(args, ones, many)
            print(f"{n} nodes: {many[-1]['wall_s']:.1f} s ({many[-1]['state']}), jobs on {many[-1]['job_hosts']}",
                  flush=True)
    return ones, many


def _passthrough(args: argparse.Namespace) -> list[str]:
    return ["--cloud", args.cloud, "--clouds-file", args.clouds_file, "--resource-class", args.resource_class,
            "--image", args.image, "--poll", str(args.poll)]


def row(r: dict[str, Any], one_wall: float) -> str:
    tasks = r["tasks"]
    jobs = tasks.get("run_job", {})
    load_s = tasks.get("load", {}).get("seconds", 0.0)
    rate = r["samples"] / load_s if load_s else float("nan")
    mib = 1024 * 1024
    ctl = r["controller_cpu_s"] / max(r["host_busy_core_s"], 1e-9)
    return (f"{r['nodes']:>5} {r['wall_s']:>8.1f} {r['wall_s'] / one_wall:>6.2f} "
            f"{tasks.get('provision', {}).get('seconds', 0):>7.1f} {jobs.get('seconds', 0):>7.1f} "
            f"{tasks.get('release', {}).get('seconds', 0):>7.1f} {load_s:>6.1f} "
            f"{r['api_calls'] / r['nodes']:>8.1f} {r['peak_rss'] / mib:>8.0f} {r['peak_pss'] / mib:>8.0f} "
            f"{r['host_used_peak_delta'] / mib:>8.0f} "
            f"{r['host_busy_share'] * 100:>5.0f}% {ctl * 100:>5.0f}% "
            f"{r['samples']:>7} {rate:>8.0f}  {r['cpu_ok_machines']}/{jobs.get('count', 0)}")


HEADER = (f"{'nodes':>5} {'wall_s':>8} {'x1':>6} {'prov_s':>7} {'jobs_s':>7} {'rel_s':>7} {'load_s':>6} "
          f"{'api/node':>8} {'rss_MiB':>8} {'pss_MiB':>8} {'host+MiB':>8} {'cpu':>6} {'ctl':>6} {'samples':>7} "
          f"{'smp/s':>8}  "
          "machines ok/jobs")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,25", help="N, comma-separated (the devcloud has DEVCLOUD_NODES)")
    parser.add_argument("--cloud", default="devcloud")
    parser.add_argument("--clouds-file", default=str(ROOT / ".devcloud" / "clouds.yaml"))
    parser.add_argument("--resource-class", default="dlbench-bm")
    parser.add_argument("--image", default=f"file://{ROOT}/build/node-image/dlbench-node.tar.zst",
                        help="image_source: the node image (nothing to prepare; every node shares it)")
    parser.add_argument("--poll", type=float, default=1.0, help="ironic.poll_interval (the product's default)")
    parser.add_argument("--json", help="also write every run's figures here")
    parser.add_argument("--mode", choices=("dagtest", "cluster"), default="dagtest",
                        help="dagtest: dag.test() (jobs serial); cluster: scheduler + Celery workers (parallel)")
    parser.add_argument("--workers", type=int, default=2, help="cluster: Celery workers")
    parser.add_argument("--concurrency", type=int, default=8, help="cluster: task slots per worker")
    parser.add_argument("--slots", type=int, default=64, help="cluster: dlbench_benchmark pool slots for the bench")
    parser.add_argument("--show", help="print the table of a series saved with --json, run nothing")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        Path(args.out).write_text(json.dumps(child(args.child, args)))
        return 0

    if args.show:  # the table of a saved series (--json of an earlier run)
        saved = json.loads(Path(args.show).read_text())
        args.mode = saved.get("mode", args.mode)
        return table(args, saved["ones"], saved["many"])
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    print(f"host: {os.cpu_count()} CPUs, {_meminfo()['MemTotal'] / 2**30:.1f} GiB; mode {args.mode}", flush=True)
    if args.mode == "cluster":
        ones, many = run_cluster(sizes, args)
    else:
        base = Path(tempfile.mkdtemp(prefix="dlbench-scale-"))
        env = prepare_home(base)
        print(f"work dir {base}", flush=True)
        ones, many = [], []
        for n in sizes:  # 1, N, 1, N', ...: the one-node lifecycle interleaved with the large runs
            ones.append(measure(1, env, args, base))
            save(args, ones, many)
            print(f"1 node: {ones[-1]['wall_s']:.1f} s ({ones[-1]['state']})", flush=True)
            many.append(measure(n, env, args, base))
            save(args, ones, many)
            print(f"{n} nodes: {many[-1]['wall_s']:.1f} s ({many[-1]['state']})", flush=True)
    return table(args, ones, many)


def table(args: argparse.Namespace, ones: list[dict[str, Any]], many: list[dict[str, Any]]) -> int:
    """Print the series; exit status 1 when a run did not succeed."""
    how = (f"scheduler + {args.workers} Celery workers x {args.concurrency}, pool {args.slots} slots: jobs in "
           "parallel; jobs_s = first job start to last job end" if args.mode == "cluster"
           else "dag.test(): jobs one after another; jobs_s = sum of the job tasks")
    one_wall = statistics.median(r["wall_s"] for r in ones)
    print(f"\none DAG run per row ({how}); x1 = wall / median 1-node wall ({one_wall:.1f} s, {len(ones)} runs); "
          "api/node = Ironic API requests per node (its API log); rss / pss = peak RSS / PSS (shared pages split "
          "among their users) summed over the controller's process tree; host+ = peak host memory in use above the "
          "level before the run; cpu = host CPU busy over the run; ctl = the controller's share of that; "
          "smp/s = samples / load task seconds\n")
    print(HEADER)
    for r in [*ones, *many]:
        print(row(r, one_wall))
    failed = [r for r in [*ones, *many] if not r["state"].endswith("success")]
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
