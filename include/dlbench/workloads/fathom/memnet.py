"""Fathom's ``memnet``: an end-to-end memory network (Sukhbaatar et al. 2015) answering bAbI
questions, the network of rdadolf/fathom's ``fathom/memnet/memnet.py`` (Dominique Luna's MemN2N)
weight for weight:

- ``A`` (vocabulary x embedding) embeds each story sentence's words, ``B`` the question's, both with
  a nil word 0 whose row starts at zero and never trains; words are summed with the position
  encoding of section 4.1 of the paper; memories add the temporal encoding ``TA`` (memories x
  embedding).
- ``hops`` hops: attention ``softmax(m . u)`` over the memories, read-out ``o = sum p m`` (the same
  ``m`` addresses and is read: Fathom has no separate output embedding ``C``), ``u <- u H + o``
  with ``H`` (embedding x embedding) shared by the hops, no non-linearity.
- answer logits ``u W`` over the vocabulary (``W``: embedding x vocabulary).

Training is Fathom's: the summed softmax cross-entropy of the batch's one-hot answers; Adam at
0.01; each gradient clipped to norm 40, Gaussian noise of stddev 0.001 added (Neelakantan et al.),
the nil rows of ``A`` and ``B`` zeroed. Inference is the forward pass to the answer logits.

This module imports TensorFlow: :func:`dlbench.workloads.fathom.workload.workload` imports it only
when memnet runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from dlbench.workloads.fathom import babi
from dlbench.workloads.fathom.steps import forward_step, gradient_step
from dlbench.workloads.fathom.workload import DataMode, FathomData, FathomWorkload, InferStep, TrainStep, find_real
from dlbench.workloads.profiles import DataKind, FathomModel
from dlbench.workloads.profiles.fathom import MemNetSpec

DISTINCT_BATCHES = 4
"""Generated batches a run cycles through (real data: every full batch of the training questions,
in file order, as Fathom's loop reads them)."""
INIT_STDDEV = 0.1
"""Fathom's ``tf.random_normal_initializer(stddev=0.1)`` for every weight."""
ADAM_EPSILON = 1e-8
"""TF1 ``AdamOptimizer``'s default (Keras' is 1e-7)."""


def parameters(spec: MemNetSpec) -> int:
    """``A`` and ``B`` (vocabulary x embedding, the nil row counted: it is part of the variable),
    ``TA`` (memories x embedding), ``H`` (embedding x embedding), ``W`` (embedding x vocabulary)."""
    v, e = spec.vocabulary, spec.embedding_size
    return 2 * v * e + spec.memories * e + e * e + e * v


def position_encoding(sentence_size: int, embedding_size: int) -> Any:
    """Fathom's ``position_encoding`` (section 4.1 of the paper), (sentence_size, embedding_size):
    ``l_kj = 1 + 4 (k - (d+1)/2)(j - (J+1)/2) / (d J)`` (written as Fathom computes it)."""
    encoding = np.ones((embedding_size, sentence_size), dtype=np.float32)
    ls, le = sentence_size + 1, embedding_size + 1
    for i in range(1, le):
        for j in range(1, ls):
            encoding[i - 1, j - 1] = (i - (le - 1) / 2) * (j - (ls - 1) / 2)
    return np.transpose(1 + 4 * encoding / embedding_size / sentence_size).astype(np.float32)


def _nil_initializer(shape: Any, dtype: Any = None) -> Any:
    """A zero nil row on top of N(0, 0.1) rows: Fathom's ``concat([nil_word_slot, initializer(...)])``."""
    rows = tf.random.normal((shape[0] - 1, shape[1]), stddev=INIT_STDDEV, dtype=dtype or tf.float32)
    return tf.concat([tf.zeros((1, shape[1]), dtype=rows.dtype), rows], axis=0)


class MemN2N(tf.keras.Model):
    """The network; its weights are created here (their shapes need no input), so
    ``count_params`` works before the first call."""

    def __init__(self, spec: MemNetSpec) -> None:
        super().__init__(name="memnet")
        v, e, m = spec.vocabulary, spec.embedding_size, spec.memories
        normal = tf.keras.initializers.RandomNormal(stddev=INIT_STDDEV)
        self.hops = spec.hops
        self.A = self.add_weight(shape=(v, e), initializer=_nil_initializer, name="A")
        self.B = self.add_weight(shape=(v, e), initializer=_nil_initializer, name="B")
        self.TA = self.add_weight(shape=(m, e), initializer=normal, name="TA")
        self.H = self.add_weight(shape=(e, e), initializer=normal, name="H")
        self.W = self.add_weight(shape=(e, v), initializer=normal, name="W")
        self.encoding = tf.constant(position_encoding(spec.sentence_size, e))
        self.built = True

    def call(self, stories: Any, questions: Any) -> Any:
        u = tf.reduce_sum(tf.gather(self.B, questions) * self.encoding, axis=1)  # (batch, e)
        m = tf.reduce_sum(tf.gather(self.A, stories) * self.encoding, axis=2) + self.TA  # (batch, memories, e)
        for _ in range(self.hops):
            probs = tf.nn.softmax(tf.reduce_sum(m * u[:, None, :], axis=2))  # (batch, memories)
            o = tf.reduce_sum(m * probs[:, :, None], axis=1)
            u = tf.matmul(u, self.H) + o
        return tf.matmul(u, self.W)


def _zero_nil_row(gradient: Any) -> Any:
    return tf.concat([tf.zeros_like(gradient[:1]), gradient[1:]], axis=0)


def case_parameters(spec: MemNetSpec) -> dict[str, Any]:
    return {"task_id": spec.task, "embedding_size": spec.embedding_size, "hops": spec.hops,
            "memories": spec.memories, "vocabulary": spec.vocabulary, "sentence_size": spec.sentence_size}


def data(spec: MemNetSpec, batch_size: int, *, mode: DataMode, data_dir: Path | None, seed: int,
         steps: int) -> FathomData:
    """bAbI: the real task files when ``data_dir`` has them, else generated (docs/fathom.md)."""
    found = find_real(mode, data_dir, lambda where: babi.find_task(where, spec.task),
                      f"no bAbI qa{spec.task}_*train*.txt in ", lambda where: f"{where}/{{{','.join(babi.TASK_DIRS)}}}")
    if found is not None:
        task = babi.fit(babi.load_task(*found, memory_size=spec.memory_size), vocabulary=spec.vocabulary,
                        sentence_size=spec.sentence_size, memories=spec.memories)
        questions = task.stories.shape[0]
        if questions < batch_size:
            raise ValueError(f"bAbI task {spec.task} has {questions} training questions, fewer than a batch "
                             f"of {batch_size}")
        count = min(steps, questions // batch_size)
        arrays = (task.stories, task.questions, task.answers)
        kind = DataKind.REAL
        source = (f"{', '.join(str(f) for f in task.files)}: {questions} questions; the files' sizes: vocabulary "
                  f"{task.vocabulary}, sentence {task.sentence_size}, story {task.story_length}")
    else:
        count = min(steps, DISTINCT_BATCHES)
        arrays = babi.generate(count * batch_size, vocabulary=spec.vocabulary, sentence_size=spec.sentence_size,
                               memories=spec.memories, seed=seed)
        kind = DataKind.SYNTHETIC
        source = (f"generated: stories of {spec.memories} sentences of {spec.sentence_size} random words of "
                  f"{spec.vocabulary}, one-hot answers")
    batches = [tuple(tf.constant(a[i * batch_size:(i + 1) * batch_size]) for a in arrays) for i in range(count)]
    return FathomData(batches, kind, source)


def train_step(net: Any, spec: MemNetSpec) -> TrainStep:
    """Adam on the batch's summed cross-entropy; each gradient clipped, noised, its nil row zeroed.
    Fathom minimises the batch's sum; the document's loss is per question (comparable across
    batch sizes)."""
    nil = {id(net.A), id(net.B)}
    zero_nil = [id(v) in nil for v in net.trainable_variables]

    def loss(stories: Any, questions: Any, answers: Any) -> Any:
        logits = net(stories, questions)
        return tf.reduce_sum(tf.nn.softmax_cross_entropy_with_logits(labels=answers, logits=logits))

    def clip_and_noise(gradients: list[Any]) -> list[Any]:
        grads = []
        for gradient, nil_rows in zip(gradients, zero_nil, strict=True):
            g = tf.clip_by_norm(tf.convert_to_tensor(gradient), spec.max_gradient_norm)
            g = g + tf.random.normal(tf.shape(g), stddev=spec.gradient_noise)
            grads.append(_zero_nil_row(g) if nil_rows else g)
        return grads

    optimizer = tf.keras.optimizers.Adam(learning_rate=spec.learning_rate, epsilon=ADAM_EPSILON)
    return gradient_step(net, optimizer, loss, treat=clip_and_noise, per_sample=True)


def infer_step(net: Any, spec: MemNetSpec) -> InferStep:
    """The answer logits."""
    return forward_step(lambda stories, questions: net(stories, questions), inputs=2)


WORKLOAD = FathomWorkload(FathomModel.MEMNET, "questions/s", "babi", MemN2N, parameters, case_parameters, data,
                          train_step, infer_step)
