"""Study 003's Fathom suite, the five workloads of this file (alexnet, vgg, residual, autoenc,
deepq) and the ``fathom`` command: real TensorFlow networks, a real idx file, the real CLI. The
other three workloads' tests: tests/workloads/test_fathom_sequence.py."""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from dlbench.workloads import cli
from dlbench.workloads.fathom.workload import DataMode, workload
from dlbench.workloads.profiles import get_profile
from dlbench.workloads.result import ResultDocument, Status
from tests.workloads.fathom_checks import assert_contract, assert_parameter_count, dense, run_fathom, run_module

MINE = ("alexnet", "vgg", "residual", "autoenc", "deepq")


def conv(k: int, c_in: int, c_out: int, bias: bool = True) -> int:
    return k * k * c_in * c_out + (c_out if bias else 0)


# --- the networks at Fathom's sizes ---------------------------------------------------------------

# 224 -> conv1 11x11/4 SAME 56 -> pool 3/2 27 -> pool 13 -> pool 6: the dense layers see 6*6*256.
ALEXNET = (conv(11, 3, 64) + conv(5, 64, 192) + conv(3, 192, 384) + conv(3, 384, 256) + conv(3, 256, 256)
           + dense(6 * 6 * 256, 4096) + dense(4096, 4096) + dense(4096, 1001))
# Fathom's VGG has two convolutions in its third stage (2-2-2-3-3), five 2x2 pools: 224 -> 7.
VGG = (conv(3, 3, 64) + conv(3, 64, 64) + conv(3, 64, 128) + conv(3, 128, 128) + conv(3, 128, 256)
       + conv(3, 256, 256) + conv(3, 256, 512) + 2 * conv(3, 512, 512) + 3 * conv(3, 512, 512)
       + dense(7 * 7 * 512, 4096) + dense(4096, 4096) + dense(4096, 1001))
# Stem 7x7 to 64, a 1x1 to 128, stages of 3 bottleneck units (128:32, 256:64, 512:128, 1024:256),
# bias-free 1x1s between stages, a bias-free classifier.
RESIDUAL = (conv(7, 3, 64) + conv(1, 64, 128)
            + sum(3 * (conv(1, f, b) + conv(3, b, b) + conv(1, b, f)) for f, b in
                  ((128, 32), (256, 64), (512, 128), (1024, 256)))
            + conv(1, 128, 256, False) + conv(1, 256, 512, False) + conv(1, 512, 1024, False)
            + dense(1024, 1001, bias=False))
# 784 -> mean and log variance of 200 (two layers) -> 784.
AUTOENC = 2 * dense(784, 200) + dense(200, 784)
# Nature DQN: 84x84x4 -> 8x8/4 32 (20) -> 4x4/2 64 (9) -> 3x3/1 64 (7) -> 512 -> 4 actions (Breakout).
DEEPQ = conv(8, 4, 32) + conv(4, 32, 64) + conv(3, 64, 64) + dense(7 * 7 * 64, 512) + dense(512, 4)


@pytest.mark.parametrize(("model", "expected", "literal"), [
    ("alexnet", ALEXNET, 61_104_937),
    ("vgg", VGG, 137_771_561),
    ("residual", RESIDUAL, 6_178_624),
    ("autoenc", AUTOENC, 471_584),
    ("deepq", DEEPQ, 1_686_180),
])
def test_parameter_count_at_fathoms_sizes_is_the_architectures_arithmetic(model, expected, literal):
    assert_parameter_count(model, expected, literal)


def test_paper_profile_is_fathoms_defaults():
    spec = get_profile("paper").fathom
    assert (spec.alexnet.batch_size, spec.alexnet.learning_rate) == (64, 1e-3)
    assert (spec.vgg.batch_size, spec.vgg.learning_rate, spec.vgg.keep_probability) == (8, 1e-4, 0.8)
    assert (spec.residual.batch_size, spec.residual.learning_rate) == (16, 0.01)
    assert (spec.autoenc.batch_size, spec.autoenc.learning_rate, spec.autoenc.latent_size) == (128, 1e-3, 200)
    deepq = spec.deepq
    assert (deepq.batch_size, deepq.learning_rate, deepq.discount, deepq.rms_decay, deepq.rms_epsilon) == (
        32, 2.5e-4, 0.99, 0.95, 0.01)
    assert (deepq.frame_size, deepq.frame_stack, deepq.actions, deepq.target_update_interval) == (84, 4, 4, 10000)


# --- runs through the command line ----------------------------------------------------------------


@pytest.mark.parametrize("model", MINE)
def test_each_workload_trains_and_infers_through_the_cli(tmp_path, model):
    for task in ("train", "infer"):
        assert_contract(run_fathom(tmp_path, model, task), model, task)


def test_the_command_runs_as_a_module_in_its_own_process(tmp_path):
    out = tmp_path / "deepq.json"
    done = run_module("--model", "deepq", "--task", "train", "--out", str(out), "--profile", "smoke",
                      "--measured-steps", "4")
    assert done.returncode == 0, done.stderr[-2000:]
    doc = ResultDocument.read(out)
    assert_contract_steps = [s for s in doc.samples if s.metric == "step_time"]
    assert doc.status is Status.OK and len(assert_contract_steps) == 4
    assert doc.benchmark.parameters["measured_steps"] == 4 and doc.sample("throughput").unit == "frames/s"


def test_batch_size_on_the_command_line_overrides_the_profile(tmp_path):
    doc = run_fathom(tmp_path, "autoenc", "infer", "--batch-size", "5", "--warmup-steps", "2")
    assert doc.benchmark.parameters["batch_size"] == 5 and doc.benchmark.parameters["warmup_steps"] == 2
    assert doc.sample("throughput").value == pytest.approx(5 / doc.sample("step_time_mean").value)


# --- real MNIST ------------------------------------------------------------------------------------------


def write_idx(path: Path, array: np.ndarray) -> None:
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def mnist_dir(tmp_path: Path) -> Path:
    root = tmp_path / "data" / "MNIST_data"
    root.mkdir(parents=True)
    images = np.zeros((60, 28, 28), dtype=np.uint8)
    images[:, 0, 0] = np.arange(60)  # pixel 0 varies: image i has value i there
    images[:, 27, 27] = 200  # a constant pixel: standardised to 0, not divided by 0
    write_idx(root / "train-images-idx3-ubyte.gz", images)
    write_idx(root / "train-labels-idx1-ubyte", np.arange(60) % 10)
    return tmp_path / "data"


def test_autoenc_reads_real_mnist_standardised_in_random_blocks(mnist_dir):
    work = workload("autoenc")
    spec = get_profile("smoke").fathom.autoenc
    data = work.data(spec, 8, mode=DataMode.REAL, data_dir=mnist_dir, seed=3, steps=5)
    scaled = np.arange(60) / 255.0
    ramp = (scaled - scaled.mean()) / scaled.std()
    assert data.kind.value == "real" and "train-images-idx3-ubyte.gz" in data.source and len(data.batches) == 5
    for (block,) in data.batches:
        pixels = block.numpy()
        assert pixels.shape == (8, 784) and np.allclose(pixels[:, 783], 0, atol=1e-6)
        # Pixel 0 of image i is i: standardised over the 60 images, a block is 8 consecutive values.
        assert any(np.allclose(pixels[:, 0], ramp[k:k + 8], atol=1e-5) for k in range(60 - 8 + 1))


def test_a_run_on_real_mnist_is_labelled_real(tmp_path, mnist_dir):
    doc = run_fathom(tmp_path, "autoenc", "train", "--data", "real", "--data-dir", str(mnist_dir))
    assert doc.status is Status.OK and doc.labels["data"] == "real"
    assert str(mnist_dir) in doc.labels["data_source"] and doc.benchmark.parameters["dataset"] == "mnist"


def test_data_real_without_the_files_fails_naming_what_is_expected(tmp_path):
    out = tmp_path / "r.json"
    code = cli.main(["fathom", "--model", "autoenc", "--task", "train", "--data", "real", "--data-dir",
                     str(tmp_path), "--out", str(out)])
    doc = ResultDocument.read(out)
    assert code == 1 and doc.status is Status.FAILED and "train-images-idx3-ubyte" in doc.error
    code = cli.main(["fathom", "--model", "vgg", "--task", "infer", "--data", "real", "--data-dir", str(tmp_path),
                     "--out", str(out)])
    assert code == 1 and "ImageNet" in ResultDocument.read(out).error


# --- bad arguments ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "field"), [
    (["--model", "alexnet", "--task", "train", "--batch-size", "0"], "--batch-size"),
    (["--model", "alexnet", "--task", "train", "--measured-steps", "1"], "--measured-steps"),
    (["--model", "alexnet", "--task", "train", "--warmup-steps", "0"], "--warmup-steps"),
    (["--model", "autoenc", "--task", "train", "--data", "real"], "--data"),
    (["--model", "lenet", "--task", "train"], "--model"),
    (["--model", "alexnet", "--task", "serve"], "--task"),
    (["--model", "alexnet"], "--task"),
])
def test_bad_arguments_exit_2_naming_the_field(tmp_path, capsys, argv, field):
    out = tmp_path / "r.json"
    try:
        code = cli.main(["fathom", *argv, "--out", str(out)])
    except SystemExit as exit_info:
        code = exit_info.code
    assert code == 2 and field in capsys.readouterr().err and not out.exists()


def test_a_bad_fathom_size_in_a_profile_exits_2_naming_the_field(tmp_path, capsys, fresh_registry):
    broken = get_profile("smoke").model_dump(mode="json")
    broken["name"] = "mine"
    broken["fathom"]["deepq"]["frame_size"] = 8  # the three convolutions need at least 36 pixels
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["fathom", "--model", "deepq", "--task", "train", "--out", str(tmp_path / "r.json"),
                  "--profile", "mine", "--profile-spec", json.dumps(broken)])
    assert exit_info.value.code == 2
    assert "profiles.mine.fathom.deepq.frame_size" in capsys.readouterr().err
