"""A GPT-2-style decoder in PyTorch, sized by the profile (:class:`TransformerSpec`).

GPT-2's architecture (Radford et al. 2019; the layout of OpenAI's and nanoGPT's code): learned
token and position embeddings; ``layers`` pre-LayerNorm blocks, each causal multi-head
self-attention (one fused q/k/v projection, PyTorch's ``scaled_dot_product_attention``, an output
projection) and a 4x MLP with GELU (GPT-2's tanh approximation), each added to the residual
stream; a final LayerNorm; the LM head is the token embedding's matrix (tied), so the vocabulary's
weights are stored and trained once. Every linear layer has a bias, as GPT-2's: the parameter count
is then :attr:`TransformerSpec.parameters` exactly (GPT-2 small: 124,439,808).

Random initialisation as GPT-2's: weights N(0, 0.02), biases 0, LayerNorms 1 and 0, and the two
projections that write into the residual stream scaled by 1/sqrt(2 x layers) (so the stream's
variance does not grow with depth). No weights are downloaded: the benchmark measures speed.

Generation uses a key/value cache (:class:`KVCache`): preallocated per layer for the whole
sequence, written in place, so a decoding step attends to the cached keys without re-running the
prompt and without growing tensors (no ``torch.cat`` per token).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own convention
from torch import nn

from dlbench.workloads.profiles import TransformerSpec

INIT_STD = 0.02
"""GPT-2's initialiser: normal with this standard deviation (its ``initializer_range``)."""


class KVCache:
    """Keys and values of every layer for ``batch`` sequences of up to ``length`` tokens.

    Allocated on the first write, in the dtype the layers compute in (bfloat16 for a bf16 model),
    and filled in place; :attr:`filled` is how many positions hold keys (the next token's position)."""

    def __init__(self, layers: int, batch: int, length: int) -> None:
        self.keys: list[torch.Tensor | None] = [None] * layers
        self.values: list[torch.Tensor | None] = [None] * layers
        self.batch = batch
        self.length = length
        self.filled = 0

    def extend(self, layer: int, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``key``/``value`` (batch, heads, new, head_width) after the filled positions; the
        keys and values of every position so far. :attr:`filled` moves on once the last layer wrote."""
        new = key.shape[2]
        start = self.filled
        if start + new > self.length:
            raise ValueError(f"the cache holds {self.length} positions; {start} + {new} do not fit")
        keys, values = self.keys[layer], self.values[layer]
        if keys is None or values is None:
            shape = (self.batch, key.shape[1], self.length, key.shape[3])
            keys = self.keys[layer] = key.new_empty(shape)
            values = self.values[layer] = value.new_empty(shape)
        keys[:, :, start:start + new] = key
        values[:, :, start:start + new] = value
        if layer == len(self.keys) - 1:
            self.filled = start + new
        return keys[:, :, :start + new], values[:, :, :start + new]


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)  # q, k, v in one GEMM
        self.c_proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, layer: int, cache: KVCache | None) -> torch.Tensor:
        batch, tokens, width = x.shape
        q, k, v = self.c_attn(x).split(width, dim=2)
        q, k, v = (t.view(batch, tokens, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        past = 0
        if cache is not None:
            past = cache.filled
            k, v = cache.extend(layer, k, v)
        if past == 0:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif tokens == 1:  # one new token attends to every cached one: no mask
            y = F.scaled_dot_product_attention(q, k, v)
        else:  # several new tokens after a cached prefix: causal among themselves, all of the prefix
            mask = torch.ones(tokens, past + tokens, dtype=torch.bool, device=x.device).tril(diagonal=past)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.c_proj(y.transpose(1, 2).reshape(batch, tokens, width))


class MLP(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.gelu = nn.GELU(approximate="tanh")  # GPT-2's "gelu_new"
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = MLP(width)

    def forward(self, x: torch.Tensor, layer: int, cache: KVCache | None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), layer, cache)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """The decoder: ``forward(ids)`` gives next-token logits for every position (training), or with
    ``last_only`` for the last position alone (generation: the head's GEMM for one position, not the
    whole prompt's)."""

    def __init__(self, spec: TransformerSpec) -> None:
        super().__init__()
        self.spec = spec
        self.wte = nn.Embedding(spec.vocabulary, spec.width)
        self.wpe = nn.Embedding(spec.context, spec.width)
        self.h = nn.ModuleList(Block(spec.width, spec.heads) for _ in range(spec.layers))
        self.ln_f = nn.LayerNorm(spec.width)
        self.lm_head = nn.Linear(spec.width, spec.vocabulary, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one matrix, stored and trained once
        self.apply(self._init)
        residual_std = INIT_STD / math.sqrt(2 * spec.layers)
        for block in self.h:
            assert isinstance(block, Block)
            nn.init.normal_(block.attn.c_proj.weight, mean=0.0, std=residual_std)
            nn.init.normal_(block.mlp.c_proj.weight, mean=0.0, std=residual_std)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(self, ids: torch.Tensor, cache: KVCache | None = None, last_only: bool = False) -> torch.Tensor:
        tokens = ids.shape[1]
        start = cache.filled if cache is not None else 0
        if start + tokens > self.spec.context:
            raise ValueError(f"{start + tokens} positions exceed the context of {self.spec.context}")
        positions = torch.arange(start, start + tokens, device=ids.device)
        x = self.wte(ids) + self.wpe(positions)
        for layer, block in enumerate(self.h):
            x = block(x, layer, cache)
        x = self.ln_f(x[:, -1:] if last_only else x)
        return self.lm_head(x)


def build(spec: TransformerSpec) -> GPT:
    return GPT(spec)


def trainable_parameters(model: nn.Module) -> int:
    """Trainable parameters, each once (``parameters()`` yields the tied matrix once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
