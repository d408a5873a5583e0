"""Study 001's DL-tool set (Table VII): real TensorFlow models, real file formats, the real CLI."""

from __future__ import annotations

import gzip
import json
import pickle
import struct

import numpy as np
import pytest

from dlbench.workloads import cli
from dlbench.workloads.dltools import data as datasets
from dlbench.workloads.dltools import models
from dlbench.workloads.profiles import (
    DLToolModel,
    ProfileError,
    get_profile,
    job_timeout,
    load_profiles,
    profile_to_argument,
    resolve_profiles,
)
from dlbench.workloads.result import ResultDocument, Status


def dense(n_in: int, n_out: int) -> int:
    return n_in * n_out + n_out  # weights + biases


def conv(k: int, c_in: int, c_out: int, bias: bool = True) -> int:
    return k * k * c_in * c_out + (c_out if bias else 0)


def batch_norm(c: int) -> int:
    return 2 * c  # gamma, beta (trainable); the moving mean/variance are not


def lstm_layer(n_in: int, units: int) -> int:
    return 4 * (n_in * units + units * units + units)  # 4 gates: input and recurrent kernels, one bias


# --- the networks -------------------------------------------------------------------------------

# Table VI: 784 -> 2048 -> 4096 -> 1024 -> 10.
FCN5_PARAMS = dense(784, 2048) + dense(2048, 4096) + dense(4096, 1024) + dense(1024, 10)
# Three 5x5 convolutions (3->32, 32->32, 32->64) with biases; the maps shrink 32 -> 15 -> 7 -> 3 by
# the 3x3/2 poolings, so the classifier sees 3 x 3 x 64 = 576 features.
ALEXNET_PARAMS = conv(5, 3, 32) + conv(5, 32, 32) + conv(5, 32, 64) + dense(3 * 3 * 64, 10)
# He et al.'s CIFAR ResNet, 6n + 2 = 50 layers (n = 8): 3x3 stem of 16 filters; three stages of 8 basic
# blocks (two 3x3 convs, each with batch norm, no bias) of 16, 32, 64 filters; parameter-free shortcuts.
RESNET50_PARAMS = (
    conv(3, 3, 16, bias=False)
    + batch_norm(16)
    + 8 * 2 * (conv(3, 16, 16, bias=False) + batch_norm(16))
    + (conv(3, 16, 32, bias=False) + conv(3, 32, 32, bias=False) + 2 * batch_norm(32))
    + 7 * 2 * (conv(3, 32, 32, bias=False) + batch_norm(32))
    + (conv(3, 32, 64, bias=False) + conv(3, 64, 64, bias=False) + 2 * batch_norm(64))
    + 7 * 2 * (conv(3, 64, 64, bias=False) + batch_norm(64))
    + dense(64, 10)
)
# 10000-word vocabulary embedded in 256, two LSTM layers of 256 states, a 10000-way softmax.
LSTM_PARAMS = 10000 * 256 + lstm_layer(256, 256) + lstm_layer(256, 256) + dense(256, 10000)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("fcn5", FCN5_PARAMS),
        ("alexnet", ALEXNET_PARAMS),
        ("resnet50", RESNET50_PARAMS),
        ("lstm", LSTM_PARAMS),
    ],
)
def test_parameter_count_is_the_papers_layer_sizes(model, expected):
    net = models.build(model)
    assert models.trainable_parameters(net) == expected
    literal = {"fcn5": 14_205_962, "alexnet": 85_098, "resnet50": 755_802, "lstm": 6_180_624}[model]
    assert expected == literal


def test_resnet50_has_50_weight_layers_at_cifar_sizes():
    import tensorflow as tf

    net = models.build("resnet50")
    weighted = [layer for layer in net.layers if isinstance(layer, (tf.keras.layers.Conv2D, tf.keras.layers.Dense))]
    assert len(weighted) == 50
    assert net.input_shape == (None, 32, 32, 3) and net.output_shape == (None, 10)
    assert net.get_layer("stage3_block8_add").output.shape[1:] == (8, 8, 64)


# --- profiles ---------------------------------------------------------------------------------


def test_paper_profile_is_table_vii_exactly():
    dltools = get_profile("paper").dltools
    table_vii = {
        "fcn5": [512, 1024, 2048],
        "alexnet": [256, 512, 1024],
        "resnet50": [16, 32, 64],
        "lstm": [128, 256, 512],
    }
    assert {m.value: dltools.model(m).batch_sizes for m in DLToolModel} == table_vii
    assert (dltools.epochs, dltools.batches_per_epoch, dltools.repetitions) == (2, None, 20)
    # Full passes: MNIST 60000 and CIFAR-10 50000 images, PTB's 929589 words in 32-word windows.
    assert [dltools.batches("fcn5", b) for b in table_vii["fcn5"]] == [118, 59, 30]
    assert [dltools.batches("resnet50", b) for b in table_vii["resnet50"]] == [3125, 1563, 782]
    assert [dltools.batches("lstm", b) for b in table_vii["lstm"]] == [226, 113, 56]


@pytest.mark.parametrize(
    ("override", "field", "message"),
    [
        ({"lstm": {"batch_sizes": [128, 0]}}, "profiles.bad.dltools.lstm.batch_sizes.1", "greater than 0"),
        ({"epochs": 1}, "profiles.bad.dltools.epochs", "greater than or equal to 2"),
        ({"fcn5": {"batch_size": 512}}, "profiles.bad.dltools.fcn5.batch_size", "Extra inputs are not permitted"),
        ({"resnet50": {"learning_rate": -1}}, "profiles.bad.dltools.resnet50.learning_rate", "greater than 0"),
    ],
)
def test_a_bad_dltools_value_names_the_field(override, field, message):
    with pytest.raises(ProfileError, match=rf"{field}: .*{message}"):
        resolve_profiles({"bad": {"extends": "smoke", "dltools": override}}, load_profiles(), "test")


def test_a_bad_profile_spec_on_the_command_line_exits_2_naming_the_field(tmp_path, capsys, fresh_registry):
    broken = get_profile("smoke").model_dump(mode="json")
    broken["name"] = "mine"
    broken["dltools"]["alexnet"]["batch_sizes"] = []
    with pytest.raises(SystemExit) as exit_info:
        cli.main(
            [
                "dltools",
                "--model",
                "alexnet",
                "--out",
                str(tmp_path / "r.json"),
                "--profile",
                "mine",
                "--profile-spec",
                json.dumps(broken),
            ]
        )
    assert exit_info.value.code == 2
    assert "profiles.mine.dltools.alexnet.batch_sizes" in capsys.readouterr().err


def test_planner_runs_every_batch_size_with_a_timeout_from_the_planned_work():
    from dlbench.request import parse_request, plan_jobs

    paper = parse_request(
        {
            "profile": "paper",
            "platforms": ["bare_metal"],
            "suites": ["dltools"],
            "data": ["synthetic"],
            "repetitions": 1,
        }
    )
    jobs = plan_jobs(paper, "run")
    assert sorted((j.args["model"], j.args["batch_size"]) for j in jobs) == sorted(
        (m.value, b) for m in DLToolModel for b in get_profile("paper").dltools.model(m).batch_sizes
    )
    resnet16 = next(j for j in jobs if j.args == {"model": "resnet50", "batch_size": 16, "data": "synthetic"})
    assert resnet16.timeout_s == job_timeout(get_profile("paper"), "dltools", resnet16.args)[0] > 3600
    assert "--data-dir" not in resnet16.workload_argv("/tmp/r.json", "/data")
    smoke = plan_jobs(parse_request({"profile": "smoke", "platforms": ["bare_metal"], "suites": ["dltools"]}), "r")
    assert len(smoke) == 4 * 2 and all(j.args["data"] == "auto" for j in smoke)
    assert smoke[0].workload_argv("/tmp/r.json", "/data")[-2:] == ["--data-dir", "/data"]


def test_seconds_per_batch_is_lower_is_better_in_the_reports():
    from dlbench.reports.analysis import metrics

    assert metrics.direction("seconds_per_batch", "s") is metrics.Direction.LOWER
    assert metrics.is_headline("dltools", "seconds_per_batch")
    assert "first_epoch_excess" in metrics.RELATIVE


# --- a smoke run through the CLI -------------------------------------------------------------------


@pytest.mark.parametrize("model", [m.value for m in DLToolModel])
def test_smoke_run_writes_seconds_per_batch_for_epochs_1_and_2(tmp_path, model):
    out = tmp_path / f"{model}.json"
    assert cli.main(["dltools", "--model", model, "--out", str(out), "--profile", "smoke", "--run-id", "t"]) == 0
    doc = ResultDocument.read(out)
    assert doc.status is Status.OK and doc.benchmark.suite == "dltools" and doc.benchmark.name == model
    batch = get_profile("smoke").dltools.model(model).batch_sizes[0]
    assert doc.benchmark.parameters["batch_size"] == batch
    for epoch in (1, 2):
        sample = doc.sample("seconds_per_batch", epoch=epoch, model=model, batch_size=batch)
        assert sample.unit == "s" and sample.value > 0
        assert doc.sample("throughput", epoch=epoch).value > 0
    assert doc.sample("first_epoch_excess").unit == "%"
    assert doc.sample("elapsed_time").value > 0
    assert doc.labels["data"] == "synthetic" and doc.labels["data_source"] == "generated"
    assert doc.labels["profile"] == "smoke" and doc.labels["batches_per_epoch"] == "3"
    assert int(doc.labels["model_parameters"]) == models.trainable_parameters(models.build(model))


# --- the real data sets' formats ----------------------------------------------------------------------


def write_idx(path, array: np.ndarray) -> None:
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())


def cifar_images(n: int) -> tuple[np.ndarray, list[int]]:
    """Channel planes as CIFAR-10 stores them: image i is red 10 + i, green 20, blue 30."""
    planes = np.zeros((n, 3, 32, 32), dtype=np.uint8)
    planes[:, 0] = (10 + np.arange(n))[:, None, None]
    planes[:, 1], planes[:, 2] = 20, 30
    return planes.reshape(n, 3072), [i % 10 for i in range(n)]


@pytest.fixture
def real_data_dir(tmp_path):
    root = tmp_path / "data"
    (root / "mnist").mkdir(parents=True)
    rng = np.random.default_rng(1)
    write_idx(root / "mnist" / "train-images-idx3-ubyte.gz", rng.integers(0, 256, (100, 28, 28)))
    write_idx(root / "mnist" / "train-labels-idx1-ubyte", np.arange(100) % 10)
    (root / "cifar-10-batches-py").mkdir()
    data, labels = cifar_images(40)
    with open(root / "cifar-10-batches-py" / "data_batch_1", "wb") as handle:
        pickle.dump({b"data": data, b"labels": labels, b"batch_label": b"training batch 1 of 5"}, handle)
    words = [f"w{i % 37}" for i in range(3000)]
    (root / "ptb.train.txt").write_text("\n".join(" ".join(words[i : i + 20]) for i in range(0, 3000, 20)) + "\n")
    return root


def test_real_files_are_read_in_their_published_formats(real_data_dir, tmp_path):
    mnist = datasets.load("fcn5", data_dir=real_data_dir, batch_size=10)
    assert mnist.kind == "real" and mnist.inputs.shape == (100, 28, 28) and list(mnist.labels[:3]) == [0, 1, 2]
    cifar = datasets.load("alexnet", data_dir=real_data_dir, batch_size=10)
    assert cifar.kind == "real" and cifar.inputs.shape == (40, 32, 32, 3)
    assert list(cifar.inputs[3, 5, 7]) == [13, 20, 30] and cifar.labels[3] == 3
    ptb = datasets.load("lstm", data_dir=real_data_dir, batch_size=4)
    assert ptb.kind == "real" and ptb.examples == 3000 + 150  # one <eos> per line
    assert ptb.notes["ptb_vocabulary"] == "38"
    # The binary CIFAR-10 version: records of a label byte and 3072 pixel bytes.
    binary = tmp_path / "bin" / "cifar-10-batches-bin"
    binary.mkdir(parents=True)
    data, labels = cifar_images(5)
    records = np.concatenate([np.array(labels, dtype=np.uint8)[:, None], data], axis=1)
    records.tofile(binary / "data_batch_1.bin")
    from_bin = datasets.load("resnet50", data_dir=tmp_path / "bin", batch_size=2)
    assert from_bin.kind == "real" and list(from_bin.inputs[4, 0, 0]) == [14, 20, 30]
    assert from_bin.notes["cifar_format"] == "bin"
    # A shorter epoch keeps what it reads, so both epochs see the same examples.
    assert datasets.load("fcn5", data_dir=real_data_dir, batch_size=10, batches_per_epoch=3).examples == 30


@pytest.mark.parametrize("model", ["fcn5", "alexnet", "lstm"])
def test_a_run_on_real_files_is_labelled_real(real_data_dir, tmp_path, model):
    out = tmp_path / "r.json"
    assert (
        cli.main(
            [
                "dltools",
                "--model",
                model,
                "--out",
                str(out),
                "--data-dir",
                str(real_data_dir),
                "--batch-size",
                "4",
                "--batches-per-epoch",
                "2",
            ]
        )
        == 0
    )
    doc = ResultDocument.read(out)
    assert doc.labels["data"] == "real" and str(real_data_dir) in doc.labels["data_source"]
    assert doc.sample("seconds_per_batch", epoch=2, data="real").value > 0


def test_data_real_without_the_files_fails_naming_the_expected_layout(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert (
        cli.main(["dltools", "--model", "fcn5", "--data", "real", "--data-dir", str(tmp_path), "--out", str(out)]) == 1
    )
    doc = ResultDocument.read(out)
    assert doc.status is Status.FAILED and "train-images-idx3-ubyte" in doc.error
    assert cli.main(["dltools", "--model", "fcn5", "--data", "real", "--out", str(out)]) == 2
    assert "--data real needs --data-dir" in capsys.readouterr().err


def test_the_profile_travels_as_a_spec(tmp_path, fresh_registry):
    """A user profile reaches the machine with --profile-spec and is what ran."""
    custom = get_profile("smoke").model_copy(update={"name": "tiny"})
    custom = custom.model_copy(update={"dltools": custom.dltools.model_copy(update={"batches_per_epoch": 2})})
    out = tmp_path / "r.json"
    assert (
        cli.main(
            [
                "dltools",
                "--model",
                "alexnet",
                "--out",
                str(out),
                "--profile",
                "tiny",
                "--profile-spec",
                profile_to_argument(custom),
            ]
        )
        == 0
    )
    doc = ResultDocument.read(out)
    assert doc.labels["batches_per_epoch"] == "2" and doc.labels["profile"] == "tiny"
