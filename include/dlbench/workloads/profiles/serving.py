"""The ``serving`` suite in a profile: an LLM inference server under load, and the request rate it
sustains at a latency target (docs/serving.md).

The model is a Llama-architecture shape with random weights (vLLM's ``--load-format dummy``): the
arithmetic and memory traffic of serving that model, without downloading it. The default shape is
Llama 3.1 8B's and the default target MLPerf Inference's for it in the server scenario (time to
first token p99 2 s, time per output token p99 100 ms); ``smoke`` scales both to a toy model. A
machine without a GPU (vLLM's CPU build) serves the profile's ``cpu_model`` when it names one:
``paper``'s is Llama 3.2 1B's shape, a size a CPU node serves at those limits.
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, PrivateAttr, model_validator

from dlbench.workloads.profiles.enums import Precision

SERVER_OVERHEAD_BYTES = 3 * 2**30
"""Memory a server needs beside the weights and the KV cache: the API process, the engine and its
worker, each an interpreter with PyTorch (about 3 GB measured with the toy model on a CPU)."""

CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
"""Attention head widths vLLM's CPU attention kernels have (vLLM 0.32, ``CPUAttentionBackend``):
any other width fails at the first request, minutes into a job; the profile refuses it at once."""


class ServingModel(BaseModel):
    """A Llama-architecture decoder's shape (Hugging Face ``LlamaConfig`` names in comments)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="llama-3.1-8b", pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$",
                      description="the shape's name in documents and reports (the served model's name)")
    hidden_size: PositiveInt = 4096
    intermediate_size: PositiveInt = 14336
    layers: PositiveInt = 32  # num_hidden_layers
    heads: PositiveInt = 32  # num_attention_heads
    kv_heads: PositiveInt = 8  # num_key_value_heads (grouped-query attention)
    vocabulary: PositiveInt = 128256
    context: PositiveInt = Field(default=8192, description="the server's max_model_len: prompt + output tokens")
    tied_embeddings: bool = Field(default=False, description="the LM head shares the token embedding's weights "
                                  "(tie_word_embeddings: Llama 3.2 1B and 3B)")

    @model_validator(mode="after")
    def _shape(self) -> Self:
        if self.hidden_size % self.heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of heads {self.heads}")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        if self.head_size not in CPU_HEAD_SIZES:
            raise ValueError(f"hidden_size / heads = {self.head_size}: vLLM's attention has no kernel for heads "
                             f"of that width (one of {', '.join(map(str, CPU_HEAD_SIZES))})")
        return self

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.heads

    @property
    def parameters(self) -> int:
        """Weights of the decoder: token embedding and LM head (one matrix when tied), per layer q and
        o projections (2 d^2), k and v (2 d x kv_heads x head_size), the gated MLP (3 d x i) and two
        RMSNorms (2 d), then the final norm (d). Llama 3.1 8B (untied): 8,030,261,248; Llama 3.2 1B
        (tied): 1,235,814,400."""
        d, kv = self.hidden_size, self.kv_heads * self.head_size
        per_layer = 2 * d * d + 2 * d * kv + 3 * d * self.intermediate_size + 2 * d
        return (1 if self.tied_embeddings else 2) * self.vocabulary * d + self.layers * per_layer + d

    def weight_bytes(self, precision: Precision) -> int:
        return self.parameters * (4 if precision is Precision.FP32 else 2)

    def hf_config(self, precision: Precision) -> dict[str, object]:
        """The model directory's ``config.json`` (a Hugging Face Llama config) for this shape."""
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": self.hidden_size,
                "intermediate_size": self.intermediate_size, "num_hidden_layers": self.layers,
                "num_attention_heads": self.heads, "num_key_value_heads": self.kv_heads,
                "vocab_size": self.vocabulary, "max_position_embeddings": self.context, "rms_norm_eps": 1e-5,
                "rope_theta": 500000.0, "bos_token_id": 0, "eos_token_id": 1,
                "tie_word_embeddings": self.tied_embeddings,
                "torch_dtype": "float32" if precision is Precision.FP32 else "bfloat16"}


class LatencyTarget(BaseModel):
    """The service level a request rate must meet: both 99th percentiles at or under their limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ttft_p99_ms: PositiveFloat = Field(default=2000.0, description="time to first token, 99th percentile (ms)")
    tpot_p99_ms: PositiveFloat = Field(default=100.0, description="time per output token, 99th percentile (ms)")


class ServingSpec(BaseModel):
    """What a serving job starts, the load it drives and the target it reads the load against."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repetitions: PositiveInt = 3
    model: ServingModel = Field(default_factory=ServingModel)
    cpu_model: ServingModel | None = Field(default=None, description="the shape a machine without a GPU serves "
                                           "(vLLM's CPU build); None: model everywhere")
    precision: Precision = Precision.BF16
    input_tokens: PositiveInt = Field(default=1024, description="tokens per prompt (random token ids)")
    output_tokens: int = Field(default=128, ge=2, description="tokens generated per request (end of sequence ignored)")
    concurrency: list[PositiveInt] = Field(default=[1, 4, 16, 64], min_length=1,
                                           description="closed-loop sweep: requests in flight")
    rates: list[PositiveFloat] = Field(default=[1.0, 2.0, 4.0, 8.0, 16.0], min_length=1,
                                       description="open-loop sweep: Poisson arrivals, requests/s")
    requests: PositiveInt = Field(default=200, description="requests per load point (at least 4 per rate second)")
    bisection_steps: int = Field(default=3, ge=0, description="halvings between the last rate that met the "
                                 "target and the first that did not")
    target: LatencyTarget = Field(default_factory=LatencyTarget)
    kv_cache_gib: PositiveInt = Field(default=4, description="memory the server keeps for the KV cache (GiB)")
    startup_timeout_s: PositiveFloat = Field(default=900.0, description="process start to ready, model load included")

    _model_field: str = PrivateAttr(default="model")

    @model_validator(mode="after")
    def _fits(self) -> Self:
        for field, model in (("model", self.model), ("cpu_model", self.cpu_model)):
            if model is not None and self.input_tokens + self.output_tokens > model.context:
                raise ValueError(f"input_tokens {self.input_tokens} + output_tokens {self.output_tokens} exceed the "
                                 f"{'model' if field == 'model' else field}'s context {model.context}")
        if self.precision is Precision.TF32:
            raise ValueError("precision tf32 is a training setting: a server runs fp32 or bf16")
        if sorted(set(self.rates)) != self.rates or sorted(set(self.concurrency)) != self.concurrency:
            raise ValueError("rates and concurrency are sweeps: distinct values in ascending order")
        return self

    def on_cpu(self) -> ServingSpec:
        """This spec as a machine without a GPU runs it: ``cpu_model`` in ``model``'s place when the
        profile names one (messages then name ``cpu_model``), else itself."""
        if self.cpu_model is None:
            return self
        spec = self.model_copy(update={"model": self.cpu_model, "cpu_model": None})
        spec._model_field = "cpu_model"
        return spec

    def memory_bytes(self) -> int:
        """What a server needs: the weights, the KV cache and its processes (:data:`SERVER_OVERHEAD_BYTES`)."""
        return self.model.weight_bytes(self.precision) + self.kv_cache_gib * 2**30 + SERVER_OVERHEAD_BYTES

    def memory_problem(self, profile: str, have_bytes: int | None, where: str = "this machine",
                       servers: int = 1) -> str | None:
        """Why a machine of ``have_bytes`` cannot hold this server (``servers`` of them: tenants
        sharing it) (None: it can, or its memory is unknown), naming the profile's field: the
        workload's check and the controller's say the same."""
        need = self.memory_bytes() * servers
        if have_bytes is None or need <= have_bytes:
            return None
        count = self.model.parameters
        size = f"{count / 1e9:.2f} B" if count >= 1e9 else f"{count / 1e6:.1f} M"
        weights = f"{size} weights, {self.precision.value}"
        many, verb = (f"{servers} servers of ", "need") if servers > 1 else ("", "needs")
        return (f"profiles.{profile}.serving.{self._model_field}: {many}{self.model.name} ({weights}) with a "
                f"{self.kv_cache_gib} GiB KV cache {verb} about {need / 2**30:.1f} GiB, {where} has "
                f"{have_bytes / 2**30:.1f} GiB: a smaller shape or kv_cache_gib, or a larger machine")

    @property
    def load_points(self) -> int:
        """Load points a job runs before its bisection (the planned work of its timeout)."""
        return len(self.concurrency) + len(self.rates) + self.bisection_steps
