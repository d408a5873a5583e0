"""The transformer suite: the real decoder in PyTorch, its arithmetic, the real CLI, real DDP processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import jsonschema
import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own convention
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from dlbench.workloads.profiles import ProfileError, TransformerSpec, get_profile, load_profiles, resolve_profiles
from dlbench.workloads.result import ResultDocument, Status, json_schema
from dlbench.workloads.transformer import generate, model
from tests.support import cli
from tests.workloads.test_distributed import Role, free_ports, overlap_share, run_workers, steps, window

SMOKE = get_profile("smoke").transformer
COMMON = ("transformer", "--profile", "smoke", "--platform", "bare_metal", "--run-id", "t")


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """The workload CLI with the common arguments of this module's jobs first."""
    return cli.run_cli(*COMMON, *args, timeout=timeout)


def layer_norm(d: int) -> int:
    return 2 * d  # gain and bias


def linear(n_in: int, n_out: int) -> int:
    return n_in * n_out + n_out  # weights and bias (GPT-2's linear layers all have one)


def gpt_parameters(layers: int, d: int, context: int, vocabulary: int) -> int:
    """GPT-2 written out: token table (also the tied LM head), position table, per block LayerNorm,
    q/k/v projection, output projection, LayerNorm, MLP up (4d) and down; the final LayerNorm."""
    block = layer_norm(d) + linear(d, 3 * d) + linear(d, d) + layer_norm(d) + linear(d, 4 * d) + linear(4 * d, d)
    return vocabulary * d + context * d + layers * block + layer_norm(d)


# --- the architecture's arithmetic -------------------------------------------------------------------------------


def test_gpt2_small_has_gpt2_smalls_parameter_count():
    spec = TransformerSpec()  # the paper profile's: GPT-2 small
    assert (spec.layers, spec.heads, spec.width, spec.context, spec.vocabulary) == (12, 12, 768, 1024, 50257)
    assert gpt_parameters(12, 768, 1024, 50257) == spec.parameters == 124_439_808
    assert model.trainable_parameters(model.build(spec)) == 124_439_808


def test_the_smoke_models_count_is_the_arithmetic_and_the_head_is_tied():
    net = model.build(SMOKE)
    expected = gpt_parameters(SMOKE.layers, SMOKE.width, SMOKE.context, SMOKE.vocabulary)
    assert model.trainable_parameters(net) == SMOKE.parameters == expected
    assert net.lm_head.weight is net.wte.weight


def test_training_flops_per_token_is_palms_formula():
    # PaLM appendix B: 6N + 12 L H Q T, N without the position table (a lookup); H Q = width.
    n = 124_439_808 - 1024 * 768
    assert TransformerSpec().training_flops_per_token == 6 * n + 12 * 12 * 768 * 1024 == 855_166_464


def test_the_formula_counts_what_the_model_multiplies():
    """PyTorch's FLOP counter over one real training step of the smoke model (attention by its
    matrix products): the formula's 6N for every matrix and 12 L d T for attention, exactly; the
    formula's rest is 6 x the biases and LayerNorms, which it counts as PaLM's N does."""
    net = model.build(SMOKE)
    tokens = 2 * SMOKE.context
    ids = torch.randint(0, SMOKE.vocabulary, (2, SMOKE.context))
    counter = FlopCounterMode(display=False)
    with counter, sdpa_kernel(SDPBackend.MATH):
        logits = net(ids)
        F.cross_entropy(logits.view(-1, SMOKE.vocabulary), ids.view(-1)).backward()
    matrices = sum(p.numel() for p in net.parameters() if p.dim() == 2) - SMOKE.context * SMOKE.width
    vectors = sum(p.numel() for p in net.parameters() if p.dim() == 1)
    attention = 12 * SMOKE.layers * SMOKE.width * SMOKE.context
    assert counter.get_total_flops() == (6 * matrices + attention) * tokens
    assert SMOKE.training_flops_per_token * tokens == counter.get_total_flops() + 6 * vectors * tokens


def test_sizes_the_decoder_cannot_have_are_refused_with_the_field():
    with pytest.raises(ValueError, match="not a multiple of heads"):
        TransformerSpec(width=100, heads=12)
    with pytest.raises(ValueError, match="exceed the context"):
        TransformerSpec(context=64, prompt_length=60, new_tokens=8)
    with pytest.raises(ProfileError, match="profiles.bad.transformer: .*not a multiple of heads"):
        resolve_profiles({"bad": {"extends": "smoke", "transformer": {"width": 65}}}, load_profiles(), "test")


# --- the KV cache ----------------------------------------------------------------------------------------------


def test_kv_cache_decodes_what_recomputing_the_whole_sequence_decodes():
    torch.manual_seed(1)
    net = model.build(SMOKE).eval()
    prompts = torch.randint(0, SMOKE.vocabulary, (3, 10))
    cached, cached_logits, _ = generate.greedy(net, prompts, 12)
    full, full_logits = generate.greedy_without_cache(net, prompts, 12)
    assert cached.shape == (3, 12)
    assert torch.equal(cached, full)
    for a, b in zip(cached_logits, full_logits, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_several_tokens_after_a_cached_prefix_see_the_prefix_and_not_their_future():
    torch.manual_seed(2)
    net = model.build(SMOKE).eval()
    ids = torch.randint(0, SMOKE.vocabulary, (2, 9))
    with torch.no_grad():
        whole = net(ids)
        cache = model.KVCache(SMOKE.layers, 2, 9)
        parts = torch.cat([net(ids[:, :5], cache), net(ids[:, 5:], cache)], dim=1)
    torch.testing.assert_close(parts, whole, rtol=1e-4, atol=1e-5)
    assert cache.filled == 9


# --- the CLI and its documents ----------------------------------------------------------------------------------


def assert_contract(doc: ResultDocument, task: str) -> None:
    assert doc.status is Status.OK, doc.error
    assert (doc.benchmark.suite, doc.benchmark.name) == ("transformer", "gpt")
    params = doc.benchmark.parameters
    assert (params["task"], params["data"], params["precision"]) == (task, "synthetic", "fp32")
    assert (params["layers"], params["width"], params["context"]) == (SMOKE.layers, SMOKE.width, SMOKE.context)
    labels = doc.labels
    assert labels["model_parameters"] == str(SMOKE.parameters)
    assert (labels["task"], labels["data"], labels["data_source"]) == (task, "synthetic", "generated")
    assert (labels["device"], labels["framework"], labels["precision"]) == ("cpu", "pytorch", "fp32")
    assert labels["framework_version"] == doc.environment.versions["torch"]
    for metric in ("step_time_mean", "step_time_std", "step_time_p95", "measured_time", "setup_time"):
        assert doc.sample(metric).unit == "s"
    start, end = window(doc)
    assert end >= start > 1e9
    assert doc.sample("throughput").unit == "tokens/s" and doc.sample("throughput").value > 0


def test_training_through_the_cli(tmp_path):
    out = tmp_path / "train.json"
    proc = run_cli("--task", "train", "--measured-steps", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    jsonschema.validate(json.loads(out.read_text()), json_schema())
    doc = ResultDocument.read(out)
    assert_contract(doc, "train")
    assert doc.benchmark.parameters["batch_size"] == SMOKE.batch_size
    step_samples = [s for s in doc.samples if s.metric == "step_time"]
    assert [s.labels["warmup"] for s in step_samples] == [True] * SMOKE.warmup_steps + [False] * 3
    measured = sum(s.value for s in step_samples if not s.labels["warmup"])
    tokens = SMOKE.batch_size * SMOKE.context
    throughput = doc.sample("throughput").value
    assert throughput == pytest.approx(3 * tokens / measured)
    achieved = doc.sample("model_tflops").value
    assert achieved == pytest.approx(throughput * SMOKE.training_flops_per_token / 1e12)
    peak = doc.sample("peak_gemm")
    assert peak.unit == "TFLOPS" and peak.value > 0 and peak.labels["source"].startswith("torch.matmul fp32 float32")
    assert doc.sample("mfu").value == pytest.approx(achieved / peak.value)
    assert doc.labels["diverged"] == "false" and doc.sample("loss", step=0).value > 0
    assert doc.labels["placement"] == "cpu" and "weights_checksum" not in doc.labels


def test_generation_through_the_cli(tmp_path):
    out = tmp_path / "generate.json"
    proc = run_cli("--task", "generate", "--batch-size", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    jsonschema.validate(json.loads(out.read_text()), json_schema())
    doc = ResultDocument.read(out)
    assert_contract(doc, "generate")
    params = doc.benchmark.parameters
    assert (params["batch_size"], params["prompt_length"], params["new_tokens"]) == (3, SMOKE.prompt_length,
                                                                                     SMOKE.new_tokens)
    decode = SMOKE.new_tokens - 1  # the first token comes from the prefill
    step_samples = [s for s in doc.samples if s.metric == "step_time"]
    assert [s.labels["warmup"] for s in step_samples] == [True] * decode + [False] * decode * SMOKE.generations
    measured = [s.value for s in step_samples if not s.labels["warmup"]]
    assert doc.sample("throughput").value == pytest.approx(len(measured) * 3 / sum(measured))
    assert doc.sample("inter_token_latency").value == pytest.approx(sum(measured) / len(measured))
    assert 0 < doc.sample("time_to_first_token").value <= doc.sample("time_to_first_token_max").value
    assert doc.sample("generations").value == SMOKE.generations


@pytest.mark.parametrize("args", [
    ("--task", "generate", "--scenario", "distributed", "--mode", "ddp", "--role", "worker", "--task-index", "0",
     "--cluster", '{"worker": ["127.0.0.1:1"]}'),
    ("--task", "train", "--scenario", "distributed", "--mode", "multi_worker_mirrored", "--role", "worker",
     "--task-index", "0", "--cluster", '{"worker": ["127.0.0.1:1"]}'),
    ("--task", "train", "--scenario", "distributed", "--mode", "ddp", "--role", "worker", "--task-index", "2",
     "--cluster", '{"worker": ["127.0.0.1:1"]}'),
    ("--task", "train", "--condition", "alone"),
    ("--task", "train", "--batch-size", "0"),
    ("--task", "sing"),
    (),
])
def test_bad_arguments_exit_2_without_a_document(args, tmp_path):
    out = tmp_path / "r.json"
    proc = run_cli(*args, "--out", str(out), timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "error" in proc.stderr and not out.exists()


def test_tf32_on_the_cpu_fails_saying_why(tmp_path):
    out = tmp_path / "r.json"
    proc = run_cli("--task", "train", "--precision", "tf32", "--out", str(out))
    assert proc.returncode == 1
    doc = ResultDocument.read(out)
    assert doc.status is Status.FAILED and "tf32 needs an NVIDIA GPU" in doc.error
    assert doc.benchmark.parameters["precision"] == "tf32"


# --- scenarios --------------------------------------------------------------------------------------------------


def test_ddp_across_two_instances_over_gloo(tmp_path):
    cluster = json.dumps({"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]})
    args = (*COMMON, "--task", "train", "--warmup-steps", "1", "--measured-steps", "3", "--scenario", "distributed",
            "--mode", "ddp", "--role", "worker", "--cluster", cluster)
    docs = run_workers(tmp_path, 2, *args)
    for index, doc in enumerate(docs):
        assert_contract(doc, "train")
        params = doc.benchmark.parameters
        assert (params["scenario"], params["mode"], params["workers"]) == ("distributed", "ddp", 2)
        assert doc.labels["placement"] == "ddp" and doc.labels["task_index"] == str(index)
        assert doc.labels["global_batch_size"] == str(2 * SMOKE.batch_size)
        assert doc.sample("throughput").labels["batch_size"] == SMOKE.batch_size  # this worker's
    assert docs[0].benchmark.parameters == docs[1].benchmark.parameters  # the role is a label
    # All-reduced gradients kept both replicas' weights equal through every step, on different data.
    assert docs[0].labels["weights_checksum"] == docs[1].labels["weights_checksum"]
    assert docs[0].sample("loss", step=0).value != docs[1].sample("loss", step=0).value
    assert len(steps(docs[0])) == len(steps(docs[1])) == 4
    assert overlap_share(window(docs[0]), window(docs[1])) > 0.5


def test_one_process_per_device_on_one_instance(tmp_path):
    """The multi-GPU path (rank 0 records, a helper spawned per further device), two CPU processes over Gloo."""
    out = tmp_path / "result.json"
    script = textwrap.dedent(f"""
        from dlbench.workloads import harness
        from dlbench.workloads.profiles import get_profile
        from dlbench.workloads.result import Benchmark
        from dlbench.workloads.transformer import train

        spec = get_profile("smoke").transformer.model_copy(update={{"measured_steps": 2}})
        with harness.workload(Benchmark(suite="transformer", name="gpt", parameters={{}}), out={str(out)!r}) as doc:
            train.train(doc, spec=spec, processes=2)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = ResultDocument.read(out)
    assert doc.status is Status.OK, doc.error
    assert doc.labels["placement"] == "ddp_cpu" and doc.labels["replicas"] == "2"
    assert doc.labels["tokens_per_step"] == str(2 * SMOKE.batch_size * SMOKE.context)
    assert doc.sample("peak_gemm").labels["devices"] == 2
    assert doc.sample("mfu").value == pytest.approx(doc.sample("model_tflops").value / 2
                                                    / doc.sample("peak_gemm").value)


def test_looped_generation_is_a_background_until_sigterm(tmp_path):
    background = Role(tmp_path, "background", *COMMON, "--task", "generate", "--measured-steps", "2",
                      "--scenario", "shared", "--condition", "background", "--loop")
    try:
        background.wait_for("loop 2 done")
        code, seconds = background.stop()
    finally:
        background.kill()
    assert code == 0 and seconds < 10, background.stderr()
    doc = background.doc()
    assert doc.status is Status.OK and doc.labels["ended_by"] == "sigterm"
    params = doc.benchmark.parameters
    assert (params["scenario"], params["condition"], params["tenants"], params["loop"]) == (
        "shared", "background", 1, True)
    loops = doc.sample("loops").value
    generations = doc.sample("generations").value
    assert loops >= 2 and 2 * loops <= generations < 2 * (loops + 1)  # every completed generation counts
    measured = [s.value for s in doc.samples if s.metric == "step_time" and not s.labels["warmup"]]
    assert len(measured) == generations * (SMOKE.new_tokens - 1)
