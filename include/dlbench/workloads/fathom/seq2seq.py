"""Fathom's ``seq2seq``: the attention encoder-decoder of TensorFlow's WMT15 English->French
translation example as rdadolf/fathom's ``fathom/seq2seq/seq2seq.py`` builds it with
``tf.contrib.legacy_seq2seq.embedding_attention_seq2seq`` (Bahdanau-style attention, Vinyals et al.
2015's "grammar as a foreign language" variant), rebuilt here weight for weight in Keras:

- encoder: the source words embedded in ``width`` (256) dimensions, ``layers`` (3) LSTMs of
  ``width`` units over ``encoder_length`` (40) steps; its top layer's outputs are the attention
  states, its final states the decoder's initial states;
- decoder (its own embedding and LSTMs): per step the input is ``linear([embedded word, previous
  attention read], width)``; the LSTMs step; the attention query is all the layers' (c, h) states
  concatenated, ``y = linear(query)``, scores ``v . tanh(W_k h_enc + y)``, softmax, read-out the
  weighted encoder outputs; the step's output is ``linear([top LSTM output, read-out], width)``
  (``AttnOutputProjection``); ``decoder_length`` (50) steps;
- output projection ``proj_w`` (width x target vocabulary) and ``proj_b``, used by a sampled softmax
  of 512 classes per step in training, and in full when decoding.

Training (``feed_previous=False``): the decoder reads the reference words (teacher forcing); the
loss is legacy ``sequence_loss``: per step the sampled-softmax cross-entropy of the next word,
weighted (0 for padding), summed over steps, divided by the weights' sum, averaged over the
batch; plain SGD at 0.5 after clipping the gradients to global norm 5. Inference is Fathom's
forward-only mode (``feed_previous=True``): greedy decoding, each step's input the embedding of
the argmax of the previous output projected to the full vocabulary; it returns the decoded words.

This module imports TensorFlow: :func:`dlbench.workloads.fathom.workload.workload` imports it only
when seq2seq runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from dlbench.workloads.fathom.steps import forward_step, gradient_step
from dlbench.workloads.fathom.workload import DataMode, FathomData, FathomWorkload, InferStep, TrainStep, generated_only
from dlbench.workloads.profiles import DataKind, FathomModel
from dlbench.workloads.profiles.fathom import Seq2SeqSpec

PAD_ID, GO_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
"""The special words of the example's ``data_utils``: ids 0-3 of both vocabularies."""
BUCKETS = ((5, 10), (10, 15), (20, 25), (40, 50))
"""Fathom's buckets (source, target lengths); the spec's lengths default to the largest."""
DISTINCT_BATCHES = 4
"""Generated batches a run cycles through."""


def _dense(n_in: int, n: int, bias: bool = True) -> int:
    return n_in * n + (n if bias else 0)


def _lstm(n_in: int, n: int) -> int:
    """BasicLSTMCell: one kernel over [input, h] for the 4 gates, one bias."""
    return (n_in + n) * 4 * n + 4 * n


def parameters(spec: Seq2SeqSpec) -> int:
    """Both embeddings, both LSTM stacks (every layer's input is ``width`` wide: the embedding, or the
    layer below), the attention (``AttnW_0`` without bias, ``AttnV_0``, the query's linear map from
    the 2 x layers states), the decoder's input merge and output projection (``[x, read-out]`` ->
    width), and ``proj_w`` / ``proj_b``."""
    w, n = spec.width, spec.layers
    embeddings = (spec.source_vocabulary + spec.target_vocabulary) * w
    lstms = 2 * n * _lstm(w, w)
    attention = _dense(w, w, bias=False) + w + _dense(2 * n * w, w)
    merges = _dense(2 * w, w) + _dense(2 * w, w)
    return embeddings + lstms + attention + merges + _dense(w, spec.target_vocabulary)


class AttentionSeq2Seq(tf.keras.Model):
    """The network; every layer is built here (their shapes need no input), so ``count_params``
    works before the first call."""

    def __init__(self, spec: Seq2SeqSpec) -> None:
        super().__init__(name="seq2seq")
        layers = tf.keras.layers
        w = spec.width
        self.spec = spec
        self.encoder_embedding = layers.Embedding(spec.source_vocabulary, w, name="encoder_embedding")
        self.encoder_lstms = [layers.LSTM(w, return_sequences=True, return_state=True, name=f"encoder_lstm{i}")
                              for i in range(spec.layers)]
        self.decoder_embedding = layers.Embedding(spec.target_vocabulary, w, name="decoder_embedding")
        self.decoder_cells = [layers.LSTMCell(w, name=f"decoder_lstm{i}") for i in range(spec.layers)]
        self.attention_keys = layers.Dense(w, use_bias=False, name="AttnW_0")  # the 1x1 convolution
        self.attention_query = layers.Dense(w, name="attention_query")
        self.input_merge = layers.Dense(w, name="input_merge")
        self.output_merge = layers.Dense(w, name="AttnOutputProjection")
        self.projection = layers.Dense(spec.target_vocabulary, name="proj")
        self.encoder_embedding.build((None, spec.encoder_length))
        self.decoder_embedding.build((None, spec.decoder_length))
        for lstm in self.encoder_lstms:
            lstm.build((None, spec.encoder_length, w))
        for cell in self.decoder_cells:
            cell.build((None, w))
        self.attention_keys.build((None, spec.encoder_length, w))
        self.attention_v = self.add_weight(shape=(w,), name="AttnV_0")
        self.attention_query.build((None, 2 * spec.layers * w))
        self.input_merge.build((None, 2 * w))
        self.output_merge.build((None, 2 * w))
        self.projection.build((None, w))
        self.built = True

    def encode(self, source: Any) -> tuple[Any, list[list[Any]]]:
        x = self.encoder_embedding(source)
        states = []
        for lstm in self.encoder_lstms:
            x, h, c = lstm(x)
            states.append([h, c])
        return x, states

    def decode(self, source: Any, target: Any, *, feed_previous: bool) -> tuple[list[Any], list[Any]]:
        """The decoder's per-step outputs (batch, width) and, when ``feed_previous``, the greedy words."""
        attention_states, states = self.encode(source)
        keys = self.attention_keys(attention_states)  # W_k h_enc: (batch, encoder_length, width)
        embedded = self.decoder_embedding(target)
        read = tf.zeros_like(attention_states[:, 0, :])  # initial_state_attention=False
        outputs: list[Any] = []
        words: list[Any] = []
        x_word = embedded[:, 0, :]  # GO
        for t in range(self.spec.decoder_length):
            if t > 0:
                if feed_previous:
                    x_word = self.decoder_embedding(words[-1])
                else:
                    x_word = embedded[:, t, :]
            x = self.input_merge(tf.concat([x_word, read], axis=1))
            new_states = []
            for cell, state in zip(self.decoder_cells, states, strict=True):
                x, state = cell(x, state)
                new_states.append(state)
            states = new_states
            query = tf.concat([tensor for h, c in states for tensor in (c, h)], axis=1)  # LSTMStateTuple(c, h)
            y = self.attention_query(query)[:, None, :]
            scores = tf.reduce_sum(self.attention_v * tf.tanh(keys + y), axis=2)
            weights = tf.nn.softmax(scores)
            read = tf.reduce_sum(weights[:, :, None] * attention_states, axis=1)
            output = self.output_merge(tf.concat([x, read], axis=1))
            outputs.append(output)
            if feed_previous:
                words.append(tf.argmax(self.projection(output), axis=1, output_type=tf.int32))
        return outputs, words


def sequence_loss(net: AttentionSeq2Seq, outputs: list[Any], targets: Any, weights: Any) -> Any:
    """legacy_seq2seq ``sequence_loss`` of a sampled softmax (the example's ``sampled_loss``): each
    step draws its own ``sampled_classes`` classes."""
    spec = net.spec
    proj_w_t = tf.transpose(net.projection.kernel)
    proj_b = net.projection.bias
    per_step = []
    for t, output in enumerate(outputs):
        crossent = tf.nn.sampled_softmax_loss(
            weights=proj_w_t, biases=proj_b, labels=targets[:, t:t + 1], inputs=output,
            num_sampled=spec.sampled_classes, num_classes=spec.target_vocabulary)
        per_step.append(crossent * weights[:, t])
    per_sentence = tf.add_n(per_step) / (tf.reduce_sum(weights, axis=1) + 1e-12)
    return tf.reduce_sum(per_sentence) / tf.cast(tf.shape(targets)[0], per_sentence.dtype)


def case_parameters(spec: Seq2SeqSpec) -> dict[str, Any]:
    return {"source_vocabulary": spec.source_vocabulary, "target_vocabulary": spec.target_vocabulary,
            "width": spec.width, "layers": spec.layers, "sampled_classes": spec.sampled_classes,
            "encoder_length": spec.encoder_length, "decoder_length": spec.decoder_length}


def data(spec: Seq2SeqSpec, batch_size: int, *, mode: DataMode, data_dir: Path | None, seed: int,
         steps: int) -> FathomData:
    """Generated sentence pairs of the bucket's lengths (docs/fathom.md)."""
    generated_only(mode, "seq2seq trains on WMT15 English-French, which this suite does not read")
    rng = np.random.default_rng(seed)
    n_enc, n_dec = spec.encoder_length, spec.decoder_length
    batches = []
    for _ in range(min(steps, DISTINCT_BATCHES)):
        # Every sentence fills the bucket: a source of n_enc words, a target of n_dec - 2 words
        # and EOS after GO; the targets are the decoder inputs shifted by one, the last weighted 0.
        source = rng.integers(UNK_ID + 1, spec.source_vocabulary, size=(batch_size, n_enc), dtype=np.int32)
        words = rng.integers(UNK_ID + 1, spec.target_vocabulary, size=(batch_size, n_dec - 2), dtype=np.int32)
        decoder = np.concatenate([np.full((batch_size, 1), GO_ID, np.int32), words,
                                  np.full((batch_size, 1), EOS_ID, np.int32)], axis=1)
        targets = np.concatenate([decoder[:, 1:], np.full((batch_size, 1), PAD_ID, np.int32)], axis=1)
        weights = np.ones((batch_size, n_dec), np.float32)
        weights[:, -1] = 0.0
        batches.append(tuple(tf.constant(a) for a in (source, decoder, targets, weights)))
    source_text = (f"generated: {n_enc}-word sources of {spec.source_vocabulary} words, {n_dec - 2}-word "
                   f"targets + EOS of {spec.target_vocabulary}")
    return FathomData(batches, DataKind.SYNTHETIC, source_text)


def train_step(net: Any, spec: Seq2SeqSpec) -> TrainStep:
    """Teacher forcing, the sampled-softmax sequence loss, plain SGD after a clip to global norm."""

    def loss(source: Any, decoder: Any, targets: Any, weights: Any) -> Any:
        outputs, _ = net.decode(source, decoder, feed_previous=False)
        return sequence_loss(net, outputs, targets, weights)

    def clip(grads: list[Any]) -> list[Any]:
        return list(tf.clip_by_global_norm(grads, spec.max_gradient_norm)[0])

    return gradient_step(net, tf.keras.optimizers.SGD(learning_rate=spec.learning_rate), loss, treat=clip)


def infer_step(net: Any, spec: Seq2SeqSpec) -> InferStep:
    """Fathom's forward-only decoding: the greedy words, (batch, decoder_length)."""

    def translate(source: Any, decoder: Any) -> Any:
        _, words = net.decode(source, decoder, feed_previous=True)
        return tf.stack(words, axis=1)

    return forward_step(translate, inputs=2)


WORKLOAD = FathomWorkload(FathomModel.SEQ2SEQ, "sentences/s", "wmt15", AttentionSeq2Seq, parameters, case_parameters,
                          data, train_step, infer_step)
