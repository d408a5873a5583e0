"""Fathom's ``speech``: Deep Speech's shape (Hannun et al. 2014) on TIMIT-shaped utterances, the
network of rdadolf/fathom's ``fathom/speech/speech.py``:

- 26 MFCC coefficients per frame, ``max_frames`` (1566) frames per padded utterance;
- three dense layers of ``hidden`` (1024) units with Deep Speech's clipped ReLU ``min(relu(x), 20)``,
  applied to every frame;
- a bidirectional recurrent layer of ``hidden`` clipped-ReLU units each way (Fathom's
  ``ClippedReluRNNCell``: ``h = clip(W [x, h] + b)``), the two directions concatenated per frame
  (``static_bidirectional_rnn``'s output);
- a dense output layer over the 61 TIMIT phonemes + the CTC blank (62), with the clipped ReLU too,
  as Fathom's ``mlp_layer`` applies it to every layer;
- the CTC loss (``tf.nn.ctc_loss``, sparse labels, the blank the last class as TF1's op had it),
  summed over the batch and minimised by plain SGD at 0.01.

Where Fathom's code differs from what it says (the recurrent layer computed but not fed to the
output layer; zero initial weights) docs/fathom.md says what is run and why. Inference is the
forward pass to the per-frame logits. TIMIT is licensed and not read: inputs are generated.

This module imports TensorFlow: :func:`dlbench.workloads.fathom.workload.workload` imports it only
when speech runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf

from dlbench.workloads.fathom.steps import forward_step, gradient_step
from dlbench.workloads.fathom.workload import DataMode, FathomData, FathomWorkload, InferStep, TrainStep, generated_only
from dlbench.workloads.profiles import DataKind, FathomModel
from dlbench.workloads.profiles.fathom import SpeechSpec

DISTINCT_BATCHES = 2
"""Generated batches a run cycles through: more than one, so no step sees the previous step's
input, few, because a paper-size batch is 32 x 1566 x 26 floats."""


def _dense(n_in: int, n: int) -> int:
    return n_in * n + n


def _rnn(n_in: int, n: int) -> int:
    """A basic RNN cell: input kernel, recurrent kernel, one bias (Fathom's ``_linear([x, h], n, True)``)."""
    return n_in * n + n * n + n


def parameters(spec: SpeechSpec) -> int:
    """Three dense layers (features -> hidden -> hidden -> hidden), the recurrent layer both ways,
    the output layer from the two directions (2 x hidden) to the phonemes + blank."""
    h = spec.hidden
    return (_dense(spec.features, h) + 2 * _dense(h, h) + 2 * _rnn(h, h)
            + _dense(2 * h, spec.alphabet + 1))


def build(spec: SpeechSpec) -> Any:
    layers = tf.keras.layers
    clip = spec.relu_clip

    def clipped_relu(x: Any) -> Any:
        # min(relu(x), clip) as one clip: a Relu inside Keras' RNN loop makes TF 2.21's grappler
        # (oneDNN's fusions) fail and skip optimising the whole step function.
        return tf.keras.ops.clip(x, 0.0, clip)

    frames = tf.keras.Input((spec.max_frames, spec.features), name="mfcc")
    x = frames
    for i in range(3):
        x = layers.Dense(spec.hidden, activation=clipped_relu, name=f"fc{i + 1}")(x)
    # The two directions by hand: Keras' Bidirectional copies its layer through the layer's config,
    # which cannot carry a local activation. The backward pass reads the frames last to first and
    # its outputs are flipped back, so frame t sees [forward_t, backward_t] (what Bidirectional does).
    forward = layers.SimpleRNN(spec.hidden, activation=clipped_relu, return_sequences=True, name="rnn_fw")(x)
    backward = layers.SimpleRNN(spec.hidden, activation=clipped_relu, return_sequences=True, go_backwards=True,
                                name="rnn_bw")(x)
    x = layers.Concatenate(name="birnn")([forward, tf.keras.ops.flip(backward, axis=1)])
    logits = layers.Dense(spec.alphabet + 1, activation=clipped_relu, name="fc5")(x)
    return tf.keras.Model(frames, logits, name="speech")


def ctc_loss(logits: Any, labels: Any, label_lengths: Any, frame_lengths: Any) -> Any:
    """Per-utterance CTC loss of dense ``labels`` (batch, max_labels) of ``label_lengths``: sparse
    labels (Fathom's ``ctc_label_dense_to_sparse``), so ``tf.nn.ctc_loss`` runs TensorFlow's CTC
    kernel (cuDNN's on a GPU) rather than its dense implementation in ops; the blank is the last
    class (``blank_index=-1``), TF1's ``ctc_loss`` convention Fathom's labels follow."""
    sparse = tf.RaggedTensor.from_tensor(labels, lengths=label_lengths).to_sparse()
    return tf.nn.ctc_loss(labels=sparse, logits=logits, label_length=None, logit_length=frame_lengths,
                          logits_time_major=False, blank_index=-1)


def case_parameters(spec: SpeechSpec) -> dict[str, Any]:
    return {"features": spec.features, "hidden": spec.hidden, "frames": spec.max_frames,
            "labels": spec.max_labels, "classes": spec.alphabet + 1}


def data(spec: SpeechSpec, batch_size: int, *, mode: DataMode, data_dir: Path | None, seed: int,
         steps: int) -> FathomData:
    """Generated TIMIT-shaped utterances (docs/fathom.md)."""
    generated_only(mode, "speech trains on TIMIT, which is licensed and not read here")
    tf.random.set_seed(seed)
    frames, labels = (batch_size, spec.max_frames, spec.features), (batch_size, spec.max_labels)
    batches = [
        (tf.random.normal(frames),  # Fathom standardises each coefficient (sklearn's scale)
         tf.random.uniform(labels, 0, spec.alphabet, tf.int32),
         tf.fill((batch_size,), spec.max_labels),
         tf.fill((batch_size,), spec.max_frames))
        for _ in range(min(steps, DISTINCT_BATCHES))
    ]
    source = (f"generated: N(0, 1) MFCCs {frames}, transcripts of {spec.max_labels} uniform phonemes of "
              f"{spec.alphabet}, every utterance {spec.max_frames} frames")
    return FathomData(batches, DataKind.SYNTHETIC, source)


def train_step(net: Any, spec: SpeechSpec) -> TrainStep:
    """Plain SGD on the CTC loss summed over the batch (Fathom minimises the per-utterance vector,
    i.e. its sum); the document's loss is per utterance."""

    def loss(frames: Any, labels: Any, label_lengths: Any, frame_lengths: Any) -> Any:
        return tf.reduce_sum(ctc_loss(net(frames, training=True), labels, label_lengths, frame_lengths))

    return gradient_step(net, tf.keras.optimizers.SGD(learning_rate=spec.learning_rate), loss, per_sample=True)


def infer_step(net: Any, spec: SpeechSpec) -> InferStep:
    """The per-frame logits."""
    return forward_step(lambda frames: net(frames, training=False))


WORKLOAD = FathomWorkload(FathomModel.SPEECH, "utterances/s", "timit", build, parameters, case_parameters, data,
                          train_step, infer_step)
