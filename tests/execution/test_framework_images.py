"""One workload image per framework (issue 23, item 5): which image a job runs in, which images a
run builds and loads, and the real images on this host's Docker engine.

The pure parts (the reference mapping, the launch, the Kubernetes manifest, the per-framework
skip) need no engine; the rest runs the real images (``make image`` builds all three) and a real
PyTorch ``tf_cnn`` job in the PyTorch image through the local Docker executor.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess

import pytest

from dlbench.execution import image as image_module
from dlbench.execution.container import workload_launch
from dlbench.execution.image import (
    DEFAULT_TAG,
    REQUIREMENTS,
    context_files,
    frameworks_needed,
    workload_image,
)
from dlbench.execution.kubernetes.executor import KubernetesExecutor
from dlbench.execution.prepare import requirements_digest
from dlbench.execution.targets import KubernetesAccess, LocalDocker, Target
from dlbench.jobs import Job
from dlbench.suites import Suite, framework_of
from dlbench.workloads.profiles import TRAINING_FRAMEWORKS, Framework
from dlbench.workloads.result import Platform, ResultDocument, Status
from tests.support.prereqs import require


def tf_cnn_job(run_id: str, framework: Framework | None = None, **args: object) -> Job:
    extra = {"framework": framework.value} if framework and framework is not Framework.TENSORFLOW else {}
    return Job(job_id=f"{run_id}-{(framework or Framework.TENSORFLOW).value}", run_id=run_id,
               platform=Platform.CONTAINER_ON_BARE_METAL, suite="tf_cnn", command="tf-cnn",
               args={"model": "alexnet", "data": "synthetic", **extra, **args}, profile="smoke")


def docker_target(image: str = DEFAULT_TAG, **fields: object) -> Target:
    return Target(name="local-docker", platform=Platform.CONTAINER_ON_BARE_METAL,
                  access=LocalDocker(image=image), **fields)


# -- the one mapping ------------------------------------------------------------------------------


@pytest.mark.parametrize("image,framework,expected", [
    ("dlbench-workload:latest", Framework.PYTORCH, "dlbench-workload-pytorch:latest"),
    ("dlbench-workload:latest", Framework.JAX, "dlbench-workload-jax:latest"),
    ("dlbench-workload:latest", Framework.TENSORFLOW, "dlbench-workload:latest"),
    # a registry with a port: the port's colon is not the tag's
    ("registry.example.org:5000/team/dlbench-workload:2.21-gpu", Framework.PYTORCH,
     "registry.example.org:5000/team/dlbench-workload-pytorch:2.21-gpu"),
    ("registry.example.org:5000/team/dlbench-workload", Framework.JAX,
     "registry.example.org:5000/team/dlbench-workload-jax"),
    # a digest names TensorFlow's image exactly: kept as is for TensorFlow
    ("dlbench-workload@sha256:" + "a" * 64, Framework.TENSORFLOW, "dlbench-workload@sha256:" + "a" * 64),
])
def test_workload_image_maps_the_reference(image, framework, expected):
    assert workload_image(image, framework) == expected


def test_a_digest_reference_names_no_other_framework():
    """A digest pins one image: deriving another framework's from it would name an image that
    does not exist; refused with the reason (the providers make it a visible skip)."""
    with pytest.raises(ValueError, match="pinned by digest.*REPO-pytorch:TAG"):
        workload_image("registry:5000/team/dlbench-workload:2.21@sha256:" + "b" * 64, Framework.PYTORCH)


def test_job_framework_and_images_a_run_needs():
    assert framework_of({"model": "alexnet"}) is Framework.TENSORFLOW  # every old job
    assert framework_of({"framework": "jax"}) is Framework.JAX
    # tf_cnn alone: only the frameworks named; another suite adds TensorFlow's (its image)
    assert frameworks_needed([Framework.PYTORCH], [Suite.TF_CNN]) == [Framework.PYTORCH]
    assert frameworks_needed([Framework.JAX, Framework.PYTORCH], [Suite.TF_CNN, Suite.CPU]) == list(
        TRAINING_FRAMEWORKS)
    assert frameworks_needed([Framework.PYTORCH], [Suite.DISK]) == [Framework.TENSORFLOW]
    # serving: vLLM's image, and TensorFlow's for its shared cells' training background, whatever
    # frameworks the request names for training
    assert frameworks_needed([Framework.JAX], [Suite.SERVING]) == [Framework.TENSORFLOW, Framework.VLLM]


def test_launch_and_manifest_use_the_jobs_framework_image(tmp_path):
    """Both container paths (Docker SDK / docker over SSH share the launch; Kubernetes its
    manifest) start a job in its framework's image, from the one TensorFlow reference."""
    target = docker_target("registry:5000/dlbench-workload:7")
    for framework, expected in [(Framework.TENSORFLOW, "registry:5000/dlbench-workload:7"),
                                (Framework.PYTORCH, "registry:5000/dlbench-workload-pytorch:7"),
                                (Framework.JAX, "registry:5000/dlbench-workload-jax:7")]:
        launch = workload_launch(tf_cnn_job("fi1", framework), target, str(tmp_path), None, "1000:1000")
        assert launch.image == expected
        assert launch.cli_argv()[launch.cli_argv().index(expected) + 1:][:3] == ["python", "-m", "dlbench.workloads"]
    cpu = Job(job_id="fi1-cpu", run_id="fi1", platform=Platform.CONTAINER_ON_BARE_METAL, suite="cpu",
              command="cpu", args={}, profile="smoke")
    assert workload_launch(cpu, target, str(tmp_path), None, None).image == "registry:5000/dlbench-workload:7"

    k8s = Target(name="node-1", platform=Platform.CONTAINER_ON_BARE_METAL,
                 access=KubernetesAccess(image="dlbench-workload:latest", namespace="dlbench"))
    manifest = KubernetesExecutor().job_manifest(tf_cnn_job("fi1", Framework.PYTORCH), k8s, "fi1-job", 60)
    assert manifest["spec"]["template"]["spec"]["containers"][0]["image"] == "dlbench-workload-pytorch:latest"


def test_a_serving_job_runs_in_the_vllm_image_with_a_larger_shared_memory(tmp_path):
    """vLLM's engine and worker exchange tensors through /dev/shm, which both runtimes size at 64 MiB
    by default: the Docker launch asks for the suite's size, the Kubernetes pod mounts a
    memory-backed volume of that size there; a training job gets neither."""
    serving = Job(job_id="fi2-serving", run_id="fi2", platform=Platform.CONTAINER_ON_BARE_METAL, suite="serving",
                  command="serving", args={"framework": "vllm"}, profile="smoke")
    launch = workload_launch(serving, docker_target("dlbench-workload:7"), str(tmp_path), None, None)
    assert launch.image == "dlbench-workload-vllm:7" and launch.shm_size == 2 * 2**30
    assert launch.cli_argv()[launch.cli_argv().index("--shm-size") + 1] == str(2 * 2**30)
    assert launch.sdk_kwargs()["shm_size"] == 2 * 2**30
    training = workload_launch(tf_cnn_job("fi2"), docker_target(), str(tmp_path), None, None)
    assert training.shm_size is None and "--shm-size" not in training.cli_argv()

    k8s = Target(name="node-1", platform=Platform.CONTAINER_ON_BARE_METAL,
                 access=KubernetesAccess(image="dlbench-workload:latest", namespace="dlbench"))
    pod = KubernetesExecutor().job_manifest(serving, k8s, "fi2-job", 60)["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "dlbench-workload-vllm:latest"
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": str(2 * 2**30)}} in pod["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in pod["containers"][0]["volumeMounts"]
    plain = KubernetesExecutor().job_manifest(tf_cnn_job("fi2"), k8s, "fi2-tf", 60)["spec"]["template"]["spec"]
    assert "volumes" not in plain


def test_a_framework_skip_skips_only_its_jobs():
    target = docker_target(framework_skips={"jax": "image dlbench-workload-jax:latest missing: `make image`"})
    assert target.skip_reason_for(tf_cnn_job("fi2", Framework.JAX).args) == \
        "image dlbench-workload-jax:latest missing: `make image`"
    assert target.skip_reason_for(tf_cnn_job("fi2", Framework.PYTORCH).args) is None
    assert target.skip_reason_for({}) is None  # TensorFlow and every other suite
    assert Target.from_xcom(target.to_xcom()).framework_skips == target.framework_skips
    dead = docker_target(skip_reason="no engine", framework_skips={"jax": "x"})
    assert dead.skip_reason_for({"framework": "jax"}) == "no engine"  # the platform's reason first


# -- what the images are built from ---------------------------------------------------------------


def test_context_and_requirements_cover_every_framework():
    """One context digest over every image's inputs: each requirement file is one of them; the
    TensorFlow-only requirements digest is what prepared nodes recorded before frameworks."""
    files = context_files()
    assert all(path in files for path in REQUIREMENTS.values()) and image_module.DOCKERFILE in files
    tf_only = hashlib.sha256(REQUIREMENTS[Framework.TENSORFLOW].read_bytes()).hexdigest()[:16]
    assert requirements_digest() == tf_only
    assert requirements_digest(list(Framework)) != tf_only
    # The shared pins are the same in every training framework's file (one venv holds all three on
    # the node image; vLLM's set is its own venv and image: docs/serving.md).
    pins = [{line.split("==")[0].lower(): line for line in REQUIREMENTS[f].read_text().splitlines()
             if "==" in line and not line.startswith("#")} for f in TRAINING_FRAMEWORKS]
    for name in ("pydantic", "pyyaml"):
        assert len({p[name] for p in pins}) == 1, name
    dockerfile = image_module.DOCKERFILE.read_text()
    assert all(path.name in dockerfile for path in REQUIREMENTS.values())
    ignore = (image_module.ROOT / ".dockerignore").read_text()
    assert "!requirements-workload*.txt" in ignore  # the build context carries every file


def test_build_record_keeps_each_image(tmp_path, monkeypatch):
    """build/image-build.json: TensorFlow's build at the top (as before), every image by tag."""
    record = tmp_path / "image-build.json"
    monkeypatch.setattr(image_module, "BUILD_RECORD", record)
    image_module._record_build({"tag": DEFAULT_TAG, "framework": "tensorflow", "build_seconds": 80.0})
    image_module._record_build({"tag": "dlbench-workload-jax:latest", "framework": "jax", "build_seconds": 60.0})
    data = json.loads(record.read_text())
    assert data["tag"] == DEFAULT_TAG and data["build_seconds"] == 80.0
    assert set(data["images"]) == {DEFAULT_TAG, "dlbench-workload-jax:latest"}


# -- the real images -----------------------------------------------------------------------------


def _framework_image(docker_client, framework: Framework) -> str:
    """The framework's image, current (built when missing or stale: minutes the first time)."""
    return image_module.ensure_image(workload_image(DEFAULT_TAG, framework), framework=framework)


IMPORTS = {Framework.TENSORFLOW: "tensorflow", Framework.PYTORCH: "torch", Framework.JAX: "jax",
           Framework.VLLM: "vllm"}
CARRIES = {**{f: {IMPORTS[f]} for f in TRAINING_FRAMEWORKS}, Framework.VLLM: {"vllm", "torch"}}
"""What each image holds of the packages above: its framework; vLLM's also PyTorch, which it runs on."""


@pytest.mark.parametrize("framework", list(Framework))
def test_each_image_carries_its_framework_only(docker_client, framework):
    """Each image has its framework (a CPU build), the workload CLI and the tools, and not the
    other frameworks (that is what makes one image per framework smaller to move)."""
    tag = _framework_image(docker_client, framework)
    script = ("import importlib.util, json, sys\n"
              "print(json.dumps({m: importlib.util.find_spec(m) is not None for m in sys.argv[1:]}))")
    check = ('python -m dlbench.workloads --help >/dev/null && command -v fio iperf3 hpcc >/dev/null '
             '&& exec python -c "$@"')
    proc = subprocess.run(["docker", "run", "--rm", tag, "sh", "-c", check, "sh", script, *IMPORTS.values()],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-1500:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found == {m: m in CARRIES[framework] for m in IMPORTS.values()}, found
    labels = docker_client.images.get(tag).labels
    assert labels["dlbench.framework"] == framework.value
    assert labels[image_module.CONTEXT_LABEL] == image_module.context_digest()


def test_a_framework_missing_in_an_image_is_a_skip_naming_its_image(docker_client, tmp_path):
    """A pytorch job where only TensorFlow is installed (the TensorFlow image, run by hand):
    a skipped document naming the image to use, not a failure and not another framework."""
    tag = _framework_image(docker_client, Framework.TENSORFLOW)
    job = tf_cnn_job("fi3", Framework.PYTORCH, measured_steps=2, warmup_steps=1)
    tmp_path.chmod(0o777)
    argv = job.workload_argv("/results/result.json", None)
    proc = subprocess.run(["docker", "run", "--rm", "-v", f"{tmp_path}:/results", tag,
                           "python", "-m", "dlbench.workloads", *argv],
                          capture_output=True, text=True, timeout=300, check=False)
    doc = ResultDocument.read(tmp_path / "result.json")
    assert doc.status is Status.SKIPPED, (doc.status, doc.error, proc.stderr[-800:])
    assert "pytorch" in doc.error and "dlbench-workload-pytorch" in doc.error


def test_pytorch_job_runs_in_the_pytorch_image(docker_client, tmp_path):
    """The container platform end to end for PyTorch: the local Docker executor starts the job in
    dlbench-workload-pytorch (from the TensorFlow reference the target carries)."""
    from dlbench.execution.docker import DockerExecutor

    require(importlib.util.find_spec("dlbench.workloads.cnn.torch_trainer") is not None,
            "dlbench/workloads/cnn/torch_trainer.py (the PyTorch trainer) is not there")
    pytorch = _framework_image(docker_client, Framework.PYTORCH)
    job = tf_cnn_job("fi4", Framework.PYTORCH, measured_steps=3, warmup_steps=1)
    doc = DockerExecutor(DEFAULT_TAG).execute(job, docker_target(DEFAULT_TAG), tmp_path / "r.json", timeout=900)
    assert doc.status is Status.OK, doc.error
    assert doc.environment.container.inside and doc.environment.platform is Platform.CONTAINER_ON_BARE_METAL
    assert doc.benchmark.parameters.get("framework") == "pytorch"
    assert "torch" in json.dumps(doc.environment.versions).lower()
    assert doc.sample("throughput").value > 0
    assert pytorch == "dlbench-workload-pytorch:latest"


def test_local_provider_builds_the_images_the_request_names(docker_client):
    """The local provider makes every named framework's image current before the run, and only
    those (plus TensorFlow's for another suite): nothing is skipped when they build."""
    from dlbench.pipeline import steps

    request = steps.validate({"platforms": ["container_on_bare_metal"], "suites": ["tf_cnn"],
                              "frameworks": ["pytorch", "jax"], "models": ["alexnet"], "data": ["synthetic"],
                              "repetitions": 1})
    tags = steps.tags_for("fi5")
    targets = steps.provision(request, tags)
    try:
        target = Target.from_xcom(targets[0])
        assert target.skip_reason is None and target.framework_skips == {}, target
        for framework in (Framework.PYTORCH, Framework.JAX):
            labels = docker_client.images.get(workload_image(DEFAULT_TAG, framework)).labels
            assert labels[image_module.CONTEXT_LABEL] == image_module.context_digest()
    finally:
        steps.release(request, tags, targets)
