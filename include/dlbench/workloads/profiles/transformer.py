"""The ``transformer`` suite in a profile: a GPT-style decoder (GPT-2 small's shape by default),
its training and its generation (docs/transformer.md)."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from dlbench.workloads.profiles.enums import Precision, TransformerTask


class TransformerSpec(BaseModel):
    """GPT-2 small's shape (12 layers, 12 heads, 768 wide, context 1024, vocabulary 50257) unless the
    profile says otherwise; random initialisation, synthetic token ids."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repetitions: PositiveInt = 3
    tasks: list[TransformerTask] = Field(default=[TransformerTask.TRAIN, TransformerTask.GENERATE], min_length=1)
    layers: PositiveInt = 12
    heads: PositiveInt = 12
    width: PositiveInt = 768
    context: PositiveInt = 1024
    vocabulary: PositiveInt = 50257
    precision: Precision = Precision.FP32
    batch_size: PositiveInt = 8
    warmup_steps: int = Field(default=10, ge=1)
    measured_steps: int = Field(default=50, ge=2)
    learning_rate: float = Field(default=6e-4, gt=0)
    prompts: PositiveInt = Field(default=8, description="generation: prompts decoded together (one batch)")
    prompt_length: PositiveInt = Field(default=128, description="generation: tokens per prompt (the prefill)")
    new_tokens: int = Field(default=128, ge=2,
                            description="generation: tokens generated per prompt (the first, then timed steps)")
    generations: PositiveInt = Field(default=5, description="generation: measured batches (after one warm-up)")

    @model_validator(mode="after")
    def _fits(self) -> Self:
        """Sizes the decoder cannot have are refused when the profile is read, not minutes into a job."""
        if self.width % self.heads:
            raise ValueError(f"width {self.width} is not a multiple of heads {self.heads} (each head is width/heads)")
        if self.prompt_length + self.new_tokens > self.context:
            raise ValueError(f"prompt_length {self.prompt_length} + new_tokens {self.new_tokens} exceed the context "
                             f"{self.context} (the learned positions end there)")
        return self

    @property
    def head_width(self) -> int:
        return self.width // self.heads

    @property
    def generation_tokens(self) -> int:
        """Tokens a generate job processes, warm-up included: the planned work of its timeout."""
        return (self.generations + 1) * self.prompts * (self.prompt_length + self.new_tokens)

    # -- the architecture's arithmetic: one place, read by the workload, its tests and the timeouts --

    @property
    def parameters(self) -> int:
        """Trainable parameters of the decoder: token embedding (tied with the LM head) V*d, learned
        positions C*d, per block two LayerNorms (4d), attention qkv + projection (4d^2 + 4d) and the 4x
        MLP (8d^2 + 5d), then the final LayerNorm (2d). GPT-2 small: 124,439,808."""
        d = self.width
        return self.vocabulary * d + self.context * d + self.layers * (12 * d * d + 13 * d) + 2 * d

    @property
    def training_flops_per_token(self) -> int:
        """Model FLOPs of one trained token (PaLM, Chowdhery et al. 2022, appendix B): 6N for the
        weight matrices forward and backward, N without the position table (a lookup, no
        multiply; the token table counts: it is the LM head's matrix), plus 12*L*d*T for the
        attention scores and their weighted sum over a context of T."""
        n = self.parameters - self.context * self.width
        return 6 * n + 12 * self.layers * self.width * self.context
