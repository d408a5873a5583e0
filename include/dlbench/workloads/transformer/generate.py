"""Generation with the decoder: a batch of prompts, prefill, then greedy decoding with a KV cache.

What a serving machine does for one batch of requests, timed as a user sees it:

* ``time_to_first_token``: from the prompts on the device to the first generated token of every
  prompt on the host (the prefill: the whole prompt through the model in one pass, filling the cache);
* ``inter_token_latency``: each following step (one token per prompt through the model, attending
  to the cache, the greedy choice read back to the host: a streaming server's per-token cost);
* ``throughput``: generated tokens per second after the first token, ``prompts x (new_tokens - 1)``
  over the decode steps' time; the decode steps are the document's ``step_time`` samples.

One generation is a warm-up (its steps are ``warmup`` samples), then ``generations`` measured ones,
or with ``loop`` windows of them until SIGTERM (the shared scenario's background: a serving
tenant beside a training one). A generation is not interrupted: SIGTERM waits for it to end.

Precision: fp32 (TF32 off), tf32, or bf16, where the weights and the cache are bfloat16 (serving
keeps no float32 master weights; autocast would re-cast every weight at every token, a cost
inference engines do not pay).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from dlbench.workloads import harness
from dlbench.workloads.profiles import Precision, TransformerSpec
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.torch_instance import check_machine, local_devices, process_device, set_precision
from dlbench.workloads.training.measure import Clock, add_training_samples, loop_windows, realtime
from dlbench.workloads.transformer import model as models
from dlbench.workloads.transformer.train import framework_labels

UNIT = "tokens/s"


@torch.no_grad()
def greedy(net: models.GPT, prompts: torch.Tensor, new_tokens: int, *, clock: Clock | None = None,
           step_times: list[float] | None = None) -> tuple[torch.Tensor, list[torch.Tensor], float]:
    """Prefill ``prompts`` (batch, length) into a fresh cache, then ``new_tokens - 1`` cached decoding
    steps: the ``new_tokens`` greedy tokens (batch, new_tokens), the logits that chose each, and the
    time to the first token (0 without ``clock``). With ``clock``, each decoding step's time is
    appended to ``step_times``; every token is read back to the host, which synchronises the device."""
    batch, length = prompts.shape
    cache = models.KVCache(len(net.h), batch, length + new_tokens)
    start = clock() if clock else 0.0
    logits = net(prompts, cache, last_only=True)[:, -1]
    token = logits.argmax(dim=-1)
    token.tolist()  # on the host: the first token is there
    first = clock() - start if clock else 0.0
    tokens, chosen_by = [token], [logits]
    for _ in range(new_tokens - 1):
        begin = clock() if clock else 0.0
        logits = net(token[:, None], cache)[:, -1]
        token = logits.argmax(dim=-1)
        token.tolist()
        if clock and step_times is not None:
            step_times.append(clock() - begin)
        tokens.append(token)
        chosen_by.append(logits)
    return torch.stack(tokens, dim=1), chosen_by, first


@torch.no_grad()
def greedy_without_cache(net: models.GPT, prompts: torch.Tensor, new_tokens: int
                         ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The same greedy decoding, recomputing the whole sequence for every token: the reference the
    cache must reproduce."""
    sequence = prompts
    tokens, chosen_by = [], []
    for _ in range(new_tokens):
        logits = net(sequence)[:, -1]
        token = logits.argmax(dim=-1)
        tokens.append(token)
        chosen_by.append(logits)
        sequence = torch.cat([sequence, token[:, None]], dim=1)
    return torch.stack(tokens, dim=1), chosen_by


@dataclass
class _Generations:
    """What the generations so far measured (the warm-up's first, flagged)."""

    first_token: list[float] = field(default_factory=list)
    steps: list[float] = field(default_factory=list)
    steps_per_generation: list[int] = field(default_factory=list)


def generate(doc: ResultDocument, *, spec: TransformerSpec, warmup: int = 1, clock: Clock = time.perf_counter,
             loop: bool = False) -> None:
    """``warmup`` generations, then ``spec.generations`` measured (or, with ``loop``, windows of
    them until SIGTERM) on this instance's first device; the samples go to ``doc``."""
    t0 = clock()
    device_type, devices = local_devices()
    framework_labels(doc, device_type)
    check_machine(doc, device_type, devices)
    set_precision(spec.precision, device_type)
    device = process_device(device_type, 0)
    dtype = torch.bfloat16 if spec.precision is Precision.BF16 else torch.float32
    net = models.build(spec).to(device=device, dtype=dtype).eval()
    parameters = models.trainable_parameters(net)
    generator = torch.Generator(device=device)
    generator.manual_seed(0)
    prompts = torch.randint(0, spec.vocabulary, (spec.prompts, spec.prompt_length), generator=generator,
                            device=device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    setup_seconds = clock() - t0
    done = _Generations()

    def one() -> None:
        steps: list[float] = []
        _, _, first = greedy(net, prompts, spec.new_tokens, clock=clock, step_times=steps)
        done.first_token.append(first)
        done.steps.extend(steps)
        done.steps_per_generation.append(len(steps))

    harness.progress(f"generation: warm-up ({warmup} of {spec.prompts} prompts x {spec.new_tokens} tokens)")
    for _ in range(warmup):
        one()
    window_start = realtime()
    if loop:
        _, windows, window_end = loop_windows(one, spec.generations, clock,
                                              on_window=lambda n: harness.progress(f"loop {n} done"))
        if len(done.first_token) == warmup:
            raise harness.Stopped()  # stopped before a measured generation: nothing was measured
        harness.ended_by_stop(doc)
        doc.add("loops", windows, "count")
    else:
        for _ in range(spec.generations):
            one()
        window_end = realtime()
    warmup_steps = sum(done.steps_per_generation[:warmup])
    labels: dict[str, Any] = {"task": "generate", "batch_size": spec.prompts}
    add_training_samples(doc, step_times=done.steps, warmup_steps=warmup_steps, images_per_step=spec.prompts,
                         setup_seconds=setup_seconds, window=(window_start, window_end), labels=labels, unit=UNIT)
    measured_first = done.first_token[warmup:]
    measured_steps = done.steps[warmup_steps:]
    doc.add("time_to_first_token", statistics.fmean(measured_first), "s", **labels)
    doc.add("time_to_first_token_max", max(measured_first), "s", **labels)
    doc.add("inter_token_latency", statistics.fmean(measured_steps), "s", **labels)
    doc.add("generations", len(measured_first), "count", **labels)
    if device.type == "cuda":
        doc.add("peak_memory", torch.cuda.max_memory_allocated(device), "bytes", device=str(device), scope="device")
    doc.labels.update({"model_parameters": str(parameters), "placement": device_type.replace("cuda", "gpu"),
                       "replicas": "1"})
