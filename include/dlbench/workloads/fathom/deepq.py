"""Fathom's ``deepq``: deep Q-learning (Mnih et al., Nature 2015) as ``fathom/deepq/deepq.py``
runs it, without the Atari emulator.

Fathom's step, with the emulator's part left out: write one frame into the replay buffer, sample a
minibatch of transitions (a state of 4 stacked 84x84 grey frames, the action, the reward, whether
it ended the episode, and the next state), compute the targets r + (1 - terminal) * 0.99 *
max_a Q_target(next state) with the target network, and take one RMSProp step (learning rate
0.00025, decay 0.95, momentum 0, epsilon 0.01) on the summed Huber loss (delta 1) of
Q(state, action) against them. Every ``target_update_interval`` (10000) updates the Q-network is
copied into the target network. Inference is Fathom's action selection: the Q-network on states,
greedy actions returned.

The buffer holds generated frames (uniform uint8 noise of Atari's preprocessed shape), actions,
rewards in {-1, 0, 1} and rare terminals. A "frame" of the throughput (``frames/s``) is one
sampled state: 4 stacked 84x84 frames (with its successor when training).

This module imports TensorFlow: :func:`dlbench.workloads.fathom.workload.workload` imports it only
when ``deepq`` runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from dlbench.workloads.fathom.steps import forward_step, gradient_step
from dlbench.workloads.fathom.workload import (
    Batch,
    DataMode,
    DataUnavailable,
    FathomData,
    FathomWorkload,
    InferStep,
    TrainStep,
    generated_only,
)
from dlbench.workloads.profiles import DataKind, FathomModel
from dlbench.workloads.profiles.fathom import DeepQSpec

CONVOLUTIONS = ((8, 4), (4, 2), (3, 1))
"""The Nature network's convolutions (kernel, stride), VALID padding; widths from the spec."""
TERMINAL_PROBABILITY = 0.01
"""Generated transitions that end an episode (Breakout's episodes last hundreds of frames)."""
IMG_SCALE = 255.0
"""Fathom's ``img_scale``: frames are stored as uint8 and divided by 255 when sampled."""


@dataclass
class ReplayBuffer:
    """Fathom's ``database``: a ring of frames with per-frame action, reward and terminal flag. A
    state is ``stack`` consecutive frames; sampling follows ``database.get_batches`` (index in
    [stack - 1, size - 1), not within the frames around the write position), vectorised."""

    frames: Any  # (size, side, side) uint8
    actions: Any  # (size,) int32
    rewards: Any  # (size,) float32
    terminals: Any  # (size,) float32
    stack: int
    rng: Any
    counter: int = 0
    new_frame: Any = field(default=None)

    @property
    def size(self) -> int:
        return int(self.frames.shape[0])

    def insert(self) -> None:
        """Write one frame at the write position (the emulator's next screen in Fathom)."""
        self.frames[self.counter] = self.new_frame
        self.counter = (self.counter + 1) % self.size

    def indices(self, count: int) -> Any:
        idx = self.rng.integers(self.stack - 1, self.size - 1, size=count)
        near = (idx > self.counter - 2) & (idx < self.counter + self.stack - 1)
        while near.any():
            idx[near] = self.rng.integers(self.stack - 1, self.size - 1, size=int(near.sum()))
            near = (idx > self.counter - 2) & (idx < self.counter + self.stack - 1)
        return idx

    def states(self, idx: Any, shift: int = 0) -> Any:
        """The states ending at ``idx + shift``: (count, side, side, stack) float32 in [0, 1]."""
        window = idx[:, None] + np.arange(-(self.stack - 1), 1) + shift
        return np.transpose(self.frames[window], (0, 2, 3, 1)).astype(np.float32) / IMG_SCALE

    def minibatch(self, count: int) -> tuple[Any, Any, Any, Any, Any]:
        idx = self.indices(count)
        return self.states(idx), self.actions[idx], self.rewards[idx], self.terminals[idx], self.states(idx, 1)


def conv_sides(spec: DeepQSpec) -> list[int]:
    sides, side = [], spec.frame_size
    for kernel, stride in CONVOLUTIONS:
        side = (side - kernel) // stride + 1
        sides.append(side)
    return sides


def dqn_parameters(spec: DeepQSpec) -> int:
    """Three biased convolutions (8x8 from the 4 stacked frames, 4x4, 3x3), a biased dense layer
    from the last feature map, a biased dense layer to one Q-value per action."""
    total, channels = 0, spec.frame_stack
    for (kernel, _), filters in zip(CONVOLUTIONS, spec.filters, strict=True):
        total += kernel * kernel * channels * filters + filters
        channels = filters
    side = conv_sides(spec)[-1]
    return total + side * side * channels * spec.hidden + spec.hidden + spec.hidden * spec.actions + spec.actions


def build_dqn(spec: DeepQSpec, name: str = "deepq") -> Any:
    """Fathom's ``DeepQNetNature``: weights ~ N(0, 0.01), biases 0.1, ReLU after every layer but
    the last."""
    layers = tf.keras.layers
    weights = tf.keras.initializers.RandomNormal(stddev=0.01)
    biases = tf.keras.initializers.Constant(0.1)
    states = tf.keras.Input((spec.frame_size, spec.frame_size, spec.frame_stack), name="states")
    x = states
    for i, ((kernel, stride), filters) in enumerate(zip(CONVOLUTIONS, spec.filters, strict=True), start=1):
        x = layers.Conv2D(filters, kernel, strides=stride, padding="valid", activation="relu",
                          kernel_initializer=weights, bias_initializer=biases, name=f"conv{i}")(x)
    x = layers.Flatten()(x)
    x = layers.Dense(spec.hidden, activation="relu", kernel_initializer=weights, bias_initializer=biases,
                     name="fc4")(x)
    q = layers.Dense(spec.actions, kernel_initializer=weights, bias_initializer=biases, name="fc5")(x)
    return tf.keras.Model(states, q, name=name)


def huber(diff: Any, delta: float) -> Any:
    """Fathom's clipped error: quadratic up to ``delta``, linear beyond (squared error at 0)."""
    if delta <= 0:
        return 0.5 * tf.square(diff)
    quadratic = tf.minimum(tf.abs(diff), delta)
    return 0.5 * tf.square(quadratic) + delta * (tf.abs(diff) - quadratic)


def case_parameters(spec: DeepQSpec) -> dict[str, Any]:
    return {"frame_size": spec.frame_size, "frame_stack": spec.frame_stack, "actions": spec.actions,
            "filters": "-".join(map(str, spec.filters)), "hidden": spec.hidden,
            "replay_frames": spec.replay_frames, "target_update_interval": spec.target_update_interval,
            "discount": spec.discount}


def data(spec: DeepQSpec, batch_size: int, *, mode: DataMode, data_dir: Path | None, seed: int,
         steps: int) -> FathomData:
    generated_only(mode, "deepq's frames come from an Atari emulator, which this suite does not run")
    if spec.replay_frames < batch_size + 2 * spec.frame_stack:
        raise DataUnavailable(f"replay_frames {spec.replay_frames} is too few to sample {batch_size} states")
    rng = np.random.default_rng(seed)
    n, side = spec.replay_frames, spec.frame_size
    buffer = ReplayBuffer(
        frames=rng.integers(0, 256, size=(n, side, side), dtype=np.uint8),
        actions=rng.integers(0, spec.actions, size=n, dtype=np.int32),
        rewards=rng.integers(-1, 2, size=n).astype(np.float32),
        terminals=(rng.random(n) < TERMINAL_PROBABILITY).astype(np.float32),
        stack=spec.frame_stack,
        rng=rng,
        new_frame=rng.integers(0, 256, size=(side, side), dtype=np.uint8),
    )
    source = f"generated: replay buffer of {n} uniform uint8 {side}x{side} frames, {spec.actions} actions"
    return FathomData([(buffer,)], DataKind.SYNTHETIC, source)


def train_step(net: Any, spec: DeepQSpec) -> TrainStep:
    """Per step: a frame into the buffer, a sampled minibatch, one RMSProp update on the summed
    Huber loss against the target network's targets; every ``target_update_interval`` updates the
    target network takes the Q-network's weights."""
    target = build_dqn(spec, name="deepq_target")

    @tf.function
    def copy_to_target() -> None:
        for source, destination in zip(net.trainable_variables, target.trainable_variables, strict=True):
            destination.assign(source)

    def loss(states: Any, actions: Any, rewards: Any, terminals: Any, next_states: Any) -> Any:
        # The targets carry no gradient (stop_gradient): the backward pass never enters the target network.
        q_next = tf.reduce_max(target(next_states, training=False), axis=1)
        targets = tf.stop_gradient(rewards + (1.0 - terminals) * spec.discount * q_next)
        chosen = tf.reduce_sum(net(states, training=True) * tf.one_hot(actions, spec.actions), axis=1)
        return tf.reduce_sum(huber(targets - chosen, spec.clip_delta))  # batch_accumulator "sum"

    update = gradient_step(net, tf.keras.optimizers.RMSprop(learning_rate=spec.learning_rate, rho=spec.rms_decay,
                                                            momentum=0.0, epsilon=spec.rms_epsilon), loss)
    copy_to_target()  # Fathom runs cp_ops in setup: both networks start equal
    updates = [0]

    def run(batch: Batch) -> Any:
        buffer: ReplayBuffer = batch[0]
        buffer.insert()
        value = update(tuple(tf.constant(a) for a in buffer.minibatch(spec.batch_size)))
        updates[0] += 1
        if updates[0] % spec.target_update_interval == 0:
            copy_to_target()
        return value

    return run


def infer_step(net: Any, spec: DeepQSpec) -> InferStep:
    """Fathom's action selection: the greedy actions of sampled states."""
    act = forward_step(lambda states: tf.argmax(net(states, training=False), axis=1, output_type=tf.int32))

    def run(batch: Batch) -> Any:
        buffer: ReplayBuffer = batch[0]
        return act((tf.constant(buffer.states(buffer.indices(spec.batch_size))),))

    return run


WORKLOAD = FathomWorkload(FathomModel.DEEPQ, "frames/s", "atari", build_dqn, dqn_parameters, case_parameters, data,
                          train_step, infer_step)
