"""Per-run secrets: kept by the backend (process memory here, Airflow Variables in a task),
materialised as a 0600 file for one task only, never in what the step returns (XCom)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from dlbench import storage
from dlbench.execution.targets import SSHHost, Target
from dlbench.pipeline import steps
from dlbench.providers import run_secrets
from dlbench.providers.machines import generate_key, remove_run_state, run_key
from dlbench.workloads.result import Platform


def test_secret_file_is_private_and_gone_after_the_block(store_url):
    ref = run_secrets.put_secret("run-1", "kubeconfig", "apiVersion: v1\n")
    assert ref == "dlbench-secret:run-1/kubeconfig" and run_secrets.parse_ref(ref) == ("run-1", "kubeconfig")
    with run_secrets.secret_file("run-1", "kubeconfig") as path:
        assert path.read_text() == "apiVersion: v1\n"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not path.exists() and not path.parent.exists()
    # Only the names are in the store, never the value.
    index = storage.store().read_text(storage.run_state_key("run-1", run_secrets.INDEX))
    assert json.loads(index) == ["kubeconfig"] and "apiVersion" not in index
    assert run_secrets.delete_secrets("run-1") == ["kubeconfig"]
    with pytest.raises(KeyError, match="no secret"):
        with run_secrets.secret_file("run-1", "kubeconfig"):
            pass


def test_run_key_is_one_per_run_and_removed_with_the_run_state(store_url):
    private, public = run_key("run-2")
    assert private.startswith("-----BEGIN OPENSSH PRIVATE KEY") and public.startswith("ssh-ed25519 ")
    assert run_key("run-2") == (private, public)  # a second provider of the run gets the same key
    assert run_key("run-3")[0] != private
    storage.store().write_text(storage.run_state_key("run-2", "tags.json"), "{}")
    remove_run_state("run-2")
    assert run_secrets.get_secret("run-2", run_secrets.SSH_KEY) is None
    assert not storage.store().exists(storage.run_state_key("run-2"))


def test_run_job_gets_the_key_as_a_private_file_for_its_duration_only(store_url, monkeypatch):
    run = "keyrun"
    private, _ = generate_key()
    key_ref = run_secrets.put_secret(run, run_secrets.SSH_KEY, private)
    hosts_key = storage.run_state_key(run, run_secrets.KNOWN_HOSTS)
    # Nothing listens on 127.0.0.1:1: the job's machine claim cannot connect and leaves the
    # connection to the executor (here the recorder, which only looks at the files).
    storage.store().write_text(hosts_key, "[127.0.0.1]:1 ssh-ed25519 AAAAHOST\n")
    target = Target(name="node-0", platform=Platform.BARE_METAL, instance_id="i-0", address="127.0.0.1",
                    access=SSHHost(address="127.0.0.1", port=1, key_path=key_ref,
                                   known_hosts=run_secrets.STORE_REF + hosts_key)).to_xcom()
    request = steps.validate({"platforms": ["bare_metal"], "models": ["alexnet"], "data": ["synthetic"],
                              "repetitions": 1})
    job = steps.plan(request, run)[0]
    seen = {}

    class Recorder:
        def execute(self, the_job, the_target, archive, timeout):
            key = Path(the_target.access.key_path)
            hosts = Path(the_target.access.known_hosts)
            seen.update(key=key, mode=stat.S_IMODE(key.stat().st_mode), text=key.read_text(),
                        hosts=hosts.read_text())
            from dlbench.execution.base import failed_document
            from dlbench.workloads.result import Status

            doc = failed_document(the_job, "")
            doc.status, doc.error = Status.OK, None
            return doc

    import dlbench.execution.executors as execution

    monkeypatch.setattr(execution, "executor_for", lambda target: Recorder())
    summary = steps.run_job(job, [target], timeout=60)
    assert seen["mode"] == 0o600 and seen["text"] == private and "AAAAHOST" in seen["hosts"]
    assert not seen["key"].exists() and not seen["key"].parent.exists()  # gone once the task is over
    xcom = json.dumps([summary, target])
    assert "PRIVATE KEY" not in xcom and private not in xcom
    assert storage.store().exists(f"results/{run}/{job['job_id']}.json")  # published to the store


def test_a_clusters_kubeconfig_reference_is_materialised_for_the_task_only(store_url):
    """Magnum's per-run kubeconfig (a client key): the target carries the reference, the task gets
    a 0600 file for its duration, and nothing else is touched (SSH targets keep their fields)."""
    from dlbench.execution.targets import KubernetesAccess

    secret = run_secrets.put_secret("run-k", "kubeconfig-c1", "apiVersion: v1\nkind: Config\n")
    k8s = Target(name="node-a", platform=Platform.CONTAINER_ON_BARE_METAL,
                 access=KubernetesAccess(kubeconfig=secret, namespace="dlbench-run-k", node_name="node-a",
                                         image="dlbench-workload:latest")).to_xcom()
    with run_secrets.materialized([k8s]) as (resolved,):
        path = Path(resolved["access"]["kubeconfig"])
        assert path.read_text().startswith("apiVersion: v1") and stat.S_IMODE(path.stat().st_mode) == 0o600
        assert "key_path" not in resolved["access"] or resolved["access"].get("key_path") is None
    assert not path.exists() and k8s["access"]["kubeconfig"] == secret  # the XCom value is untouched
    run_secrets.delete_secrets("run-k")


def test_a_killed_tasks_key_is_swept_by_the_next_task(store_url):
    """A task SIGKILLed while it held the key as a file (its ``finally`` never ran): the next
    task on the worker removes that directory on its way in; a live task's is kept."""
    import signal
    import subprocess
    import sys

    code = ("import sys,time; sys.path.insert(0, sys.argv[1]);"
            "from dlbench.providers import run_secrets;"
            "run_secrets.put_secret('killed-run', 'ssh_key', 'KEY-OF-A-KILLED-TASK');"
            "c = run_secrets.secret_file('killed-run', 'ssh_key'); p = c.__enter__(); print(p, flush=True);"
            "time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(Path(__file__).resolve().parents[2] / "include")],
                            stdout=subprocess.PIPE, text=True)  # the secret lives in that process (memory)
    try:
        left = Path(proc.stdout.readline().strip())
        assert left.read_text() == "KEY-OF-A-KILLED-TASK" and left.parent.name.startswith(run_secrets.PRIVATE_PREFIX)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert left.exists()  # the kill left it behind
        with run_secrets.private_dir("next-task") as mine:
            assert not left.parent.exists()  # swept on the way in
            assert mine.exists() and mine not in run_secrets.sweep_private_dirs()  # ours: alive
    finally:
        proc.kill()
        proc.wait()
