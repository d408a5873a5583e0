"""The served model's directory, written from the profile's shape: a Hugging Face Llama
``config.json`` (vLLM fills the weights with random values: ``--load-format dummy``) and a
tokenizer of exactly the model's vocabulary.

Why a generated tokenizer: nothing is downloaded (no registry, no hub), and a word-level
vocabulary of the shape's size (token ``i`` is the word ``t<i>``, split on whitespace) maps every
id the random weights may generate to text and back unchanged, so the load generator's prompts
have exactly the profile's input length and every generated id decodes. A trained tokenizer would
change nothing a benchmark measures (it runs on the client, before and after the model) and would
need a corpus and a vocabulary per shape.
"""

from __future__ import annotations

import json
from pathlib import Path

from dlbench.workloads.profiles import ServingSpec

BOS, EOS = "<s>", "</s>"


def word(i: int) -> str:
    """Token ``i``'s text (ids 0 and 1 are the sequence markers)."""
    return BOS if i == 0 else EOS if i == 1 else f"t{i}"


def tokenizer_json(vocabulary: int) -> dict[str, object]:
    """A ``tokenizers`` word-level tokenizer of ``vocabulary`` tokens, as its JSON file."""
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": word(i), "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i in (0, 1)],
        "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {word(i): i for i in range(vocabulary)}, "unk_token": EOS},
    }


def write_model_dir(spec: ServingSpec, directory: Path) -> Path:
    """``directory`` holding the model's config and tokenizer; returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    shape = spec.model
    (directory / "config.json").write_text(json.dumps(shape.hf_config(spec.precision), indent=1))
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer_json(shape.vocabulary)))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS, "eos_token": EOS,
        "model_max_length": shape.context, "clean_up_tokenization_spaces": False}))
    (directory / "generation_config.json").write_text(json.dumps({"bos_token_id": 0, "eos_token_id": 1}))
    return directory
