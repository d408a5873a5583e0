"""The PyTorch networks are tf_cnn_benchmarks' networks: the same parameters, shapes and outputs.

:mod:`dlbench.workloads.cnn.torch_nets` traces the one definition of each architecture
(nets.ARCHITECTURES). Checked here against the reference counts (tests/workloads/
test_models_reference.py derives them from the harness's code), against the Keras model the
TensorFlow runner trains (weight shapes, layout aside), and numerically against the graph-mode
TensorFlow ops of distributed_replicated (the same weights give the same logits: padding, pooling,
batch norm and flatten order are TensorFlow's).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dlbench.workloads.cnn import keras_nets, tf_nets, torch_nets
from dlbench.workloads.profiles import ModelName, get_profile

PAPER = {  # model: (the harness's image size, trainable parameters at 1001 classes)
    "resnet50": (224, 25_559_081),
    "inception3": (299, 23_819_401),
    "alexnet": (227, 61_842_345),
}
MODELS = list(PAPER)


@pytest.mark.parametrize("model", MODELS)
def test_trainable_parameters_at_1001_classes_equal_tensorflows(model):
    size, expected = PAPER[model]
    net = torch_nets.trace(model, size, 1001)
    assert torch_nets.trainable_parameters(net) == expected


def batch_norm_channels(net: torch.nn.Module) -> int:
    return sum(m.running_mean.numel() for m in net.modules() if torch_nets.is_batch_norm(m))


@pytest.mark.parametrize("model", MODELS)
def test_weight_shapes_equal_the_keras_models_at_smoke_size(model):
    spec = get_profile("smoke").training(model)
    keras_model = tf_nets.build(model, spec)
    net = torch_nets.build(model, spec)
    torch_shapes = sorted(torch_nets.tensorflow_shape(p) for p in net.parameters() if p.requires_grad)
    assert torch_shapes == sorted(tuple(w.shape) for w in keras_model.trainable_weights)
    # Moving averages: mean and variance per batch-norm channel, as Keras' non-trainable weights.
    assert 2 * batch_norm_channels(net) == sum(math.prod(w.shape) for w in keras_model.non_trainable_weights)
    # Weight decay applies to what keras_nets.l2_variables picks (all but batch norm's).
    assert sorted(torch_nets.tensorflow_shape(p) for p in torch_nets.l2_parameters(net)) == sorted(
        tuple(w.shape) for w in keras_nets.l2_variables(keras_model))


def _tensorflow_values(net: torch_nets.GraphModule) -> list[np.ndarray]:
    """The network's weights and moving averages in GraphBuilder's creation order and TF layout."""
    values = []
    for layer in net.layers:
        if isinstance(layer, torch_nets.Conv):
            values.append(layer.conv.weight.detach().permute(2, 3, 1, 0).numpy())
            if layer.conv.bias is not None:
                values.append(layer.conv.bias.detach().numpy())
            if layer.bn is not None:
                if layer.bn.weight is not None:
                    values.append(layer.bn.weight.detach().numpy())
                values += [layer.bn.bias.detach().numpy(), layer.bn.running_mean.numpy(),
                           layer.bn.running_var.numpy()]
        elif isinstance(layer, torch_nets.Dense):
            values += [layer.linear.weight.detach().T.numpy(), layer.linear.bias.detach().numpy()]
    return values


def _tensorflow_logits(model: str, net: torch_nets.GraphModule, images: np.ndarray, training: bool) -> np.ndarray:
    import tensorflow as tf

    values = _tensorflow_values(net)
    created: list[tuple[int, ...]] = []

    def variable(name, shape, initializer, trainable):
        value = values[len(created)]
        created.append(tuple(shape))
        assert tuple(shape) == value.shape, name
        return tf.compat.v1.Variable(value, name=name, trainable=trainable, use_resource=True)

    with tf.Graph().as_default() as graph:
        builder = tf_nets.GraphBuilder(variable, training=training)
        logits = tf_nets.GRAPH_MODELS[ModelName(model)](builder, tf.constant(images), 10)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            out = session.run(logits)
    assert len(created) == len(values)  # every weight and moving average used, in the same order
    return out


@pytest.mark.parametrize("model, training", [("alexnet", False), ("resnet50", False), ("resnet50", True),
                                             ("inception3", False), ("inception3", True)])
def test_same_weights_give_tensorflows_logits(model, training):
    """Inference (moving averages, no dropout) and, for the batch-norm networks, training mode (batch
    statistics; 8 images at 64 px for ResNet-50, so the last stage's statistics are not of 2 values,
    where rounding differences blow up): the logits of the same weights agree to float32 rounding."""
    spec = get_profile("smoke").training(model)
    size, batch = (64, 8) if training and model == "resnet50" else (spec.image_size, 8 if training else 2)
    torch.manual_seed(0)
    net = torch_nets.trace(model, size, 10)
    with torch.no_grad():  # moving averages away from 0/1, so inference mode really uses them
        for m in net.modules():
            if torch_nets.is_batch_norm(m):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
                if m.weight is not None:
                    m.weight.uniform_(0.5, 1.5)
    images = np.random.default_rng(0).random((batch, size, size, 3), dtype=np.float32)
    expected = _tensorflow_logits(model, net, images, training)
    net = net.to(memory_format=torch.channels_last).train(training)
    with torch.no_grad():
        got = net(torch.from_numpy(images).permute(0, 3, 1, 2)).numpy()
    assert got.shape == (batch, 10)
    scale = float(np.abs(expected).max())
    # Deep stacks of batch statistics over few values amplify rounding (InceptionV3: 94 of them);
    # a wrong padding, pool or layout is off by the logits' own size.
    np.testing.assert_allclose(got, expected, rtol=0, atol=(1e-3 if training else 2e-4) * max(1.0, scale))


@pytest.mark.parametrize("size, kernel, stride", [(8, 3, 2), (7, 2, 2), (6, 3, 1), (9, 4, 3)])
def test_same_pooling_matches_tensorflow_also_where_padding_is_asymmetric(size, kernel, stride):
    import tensorflow as tf

    x = np.random.default_rng(1).standard_normal((2, size, size, 5), dtype=np.float32)
    for kind, tf_pool in (("max", tf.nn.max_pool2d), ("avg", tf.nn.avg_pool2d)):
        net = torch_nets.TorchNet(size, 5)
        pooled = getattr(net, f"{kind}_pool")(net.input, kernel, stride, "SAME")
        graph = torch_nets.GraphModule(net.layers, net.inputs, pooled.node)
        got = graph(torch.from_numpy(x).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).numpy()
        expected = tf_pool(x, kernel, stride, "SAME").numpy()
        assert got.shape == expected.shape == (2, *pooled.shape)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6, err_msg=kind)


def test_same_padding_puts_the_odd_pixel_after():
    assert torch_nets.same_pads(112, 3, 2) == (0, 1)  # ResNet-50's stem max pool
    assert torch_nets.same_pads(35, 3, 1) == (1, 1)
    assert torch_nets.same_pads(17, 7, 1) == (3, 3)
    assert torch_nets.same_pads(8, 1, 2) == (0, 0)


def test_initialisers_are_the_harnesss():
    torch.manual_seed(0)
    net = torch_nets.trace("alexnet", 227, 1001)
    convs = [(m.conv.weight.detach(), m.conv.bias.detach()) for m in net.layers if isinstance(m, torch_nets.Conv)]
    denses = [(m.linear.weight.detach(), m.linear.bias.detach()) for m in net.layers
              if isinstance(m, torch_nets.Dense)]
    for weight, bias in convs:  # variance scaling, fan in, truncated normal: unit variance scaled by 1/fan_in
        fan_in = math.prod(weight.shape[1:])
        assert float(weight.std()) == pytest.approx(math.sqrt(1 / fan_in), rel=0.1)
        assert float(weight.abs().max()) <= 2 * math.sqrt(1 / fan_in) / 0.87962566103423978 + 1e-7
        assert float(bias.abs().max()) == 0
    relu_stddev = math.sqrt(2 / 9216)
    first = denses[0][0]
    assert float(first.abs().max()) <= 2 * relu_stddev + 1e-7  # truncated at two standard deviations
    assert float(first.std()) == pytest.approx(relu_stddev * 0.8796, rel=0.02)
    assert float(denses[-1][0].abs().max()) <= 2 * math.sqrt(1 / 4096) + 1e-7  # the linear layer: LeCun
    assert all(float(bias.abs().max()) == 0 for _, bias in denses)
