"""Study 003's Fathom suite, its three sequence workloads (seq2seq, memnet, speech): real TensorFlow
networks at Fathom's sizes, bAbI files in their published format, the real CLI. The other five
workloads and the command's own checks: tests/workloads/test_fathom.py."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from dlbench.workloads.fathom import babi
from dlbench.workloads.fathom.workload import DataMode, DataUnavailable, workload
from dlbench.workloads.profiles import get_profile
from dlbench.workloads.profiles.fathom import Seq2SeqSpec, SpeechSpec
from dlbench.workloads.result import ResultDocument
from tests.workloads.fathom_checks import assert_contract, assert_parameter_count, dense, run_fathom, run_module


def lstm(n_in: int, units: int) -> int:
    return (n_in + units) * 4 * units + 4 * units  # BasicLSTMCell: one kernel over [x, h] for 4 gates, one bias


def simple_rnn(n_in: int, units: int) -> int:
    return n_in * units + units * units + units  # Fathom's ClippedReluRNNCell: _linear([x, h], units, True)


# --- the networks at Fathom's sizes ---------------------------------------------------------------

# Two 40000 x 256 embeddings, 3 encoder + 3 decoder LSTMs of 256 (every layer's input is 256 wide),
# attention: AttnW_0 (256 x 256, no bias), AttnV_0 (256), the query's linear map from the 3 layers'
# (c, h) = 1536 values; the decoder's input merge and AttnOutputProjection ([256, 256] -> 256); the
# 256 x 40000 output projection with its bias.
SEQ2SEQ = (2 * 40000 * 256 + 6 * lstm(256, 256) + 256 * 256 + 256 + dense(6 * 256, 256)
           + 2 * dense(2 * 256, 256) + dense(256, 40000))
# bAbI qa1: 19 words + nil = 20, embedding 20, min(50, 10) memories: A, B, TA, H, W.
MEMNET = 2 * 20 * 20 + 10 * 20 + 20 * 20 + 20 * 20
# 26 MFCCs -> 1024 -> 1024 -> 1024 (clipped ReLU) -> bidirectional RNN of 1024 each way -> 2048 -> 62.
SPEECH = dense(26, 1024) + 2 * dense(1024, 1024) + 2 * simple_rnn(1024, 1024) + dense(2 * 1024, 61 + 1)


@pytest.mark.parametrize(("model", "expected", "literal"), [
    ("seq2seq", SEQ2SEQ, 34_633_792),
    ("memnet", MEMNET, 1_800),
    ("speech", SPEECH, 6_450_238),
])
def test_parameter_count_at_fathoms_sizes_is_the_architectures_arithmetic(model, expected, literal):
    assert_parameter_count(model, expected, literal)


def test_paper_profile_is_fathoms_defaults():
    spec = get_profile("paper").fathom
    s = spec.seq2seq
    assert (s.batch_size, s.learning_rate, s.max_gradient_norm) == (64, 0.5, 5.0)
    assert (s.source_vocabulary, s.target_vocabulary, s.width, s.layers, s.sampled_classes) == (40000, 40000, 256, 3,
                                                                                              512)
    assert (s.encoder_length, s.decoder_length) == (40, 50)  # the largest of buckets (5,10) (10,15) (20,25) (40,50)
    m = spec.memnet
    assert (m.batch_size, m.learning_rate, m.embedding_size, m.hops, m.memory_size, m.task) == (32, 0.01, 20, 3, 50, 1)
    assert (m.max_gradient_norm, m.gradient_noise, m.memories) == (40.0, 1e-3, 10)
    p = spec.speech
    assert (p.batch_size, p.learning_rate, p.features, p.hidden, p.max_frames, p.max_labels, p.alphabet,
            p.relu_clip) == (32, 0.01, 26, 1024, 1566, 75, 61, 20.0)


@pytest.mark.parametrize(("spec", "kwargs", "message"), [
    (Seq2SeqSpec, {"target_vocabulary": 512}, "sampled_classes"),
    (SpeechSpec, {"max_frames": 149}, "max_frames"),
])
def test_a_size_fathoms_model_cannot_have_is_refused(spec, kwargs, message):
    with pytest.raises(ValidationError, match=message):
        spec(**kwargs)


# --- runs through the command line ----------------------------------------------------------------


@pytest.mark.parametrize("model", ["seq2seq", "memnet", "speech"])
def test_each_workload_trains_and_infers_through_the_cli(tmp_path, model):
    for task in ("train", "infer"):
        assert_contract(run_fathom(tmp_path, model, task), model, task)


def test_seq2seq_inference_feeds_back_its_own_words_as_fathoms_forward_only_mode():
    """Decoding reads only the GO word of the decoder's inputs (feed_previous=True); training reads
    them all (teacher forcing)."""
    work = workload("seq2seq")
    spec = get_profile("smoke").fathom.seq2seq
    net = work.build(spec)
    source, decoder, _, _ = work.data(spec, spec.batch_size, mode=DataMode.SYNTHETIC, data_dir=None, seed=1,
                                      steps=1).batches[0]
    other = np.array(decoder)
    other[:, 1:] = (other[:, 1:] + 7) % spec.target_vocabulary  # same GO, other reference words
    decode = work.infer_step(net, spec)
    words = np.asarray(decode((source, decoder)))
    assert words.shape == (spec.batch_size, spec.decoder_length)
    assert np.array_equal(words, np.asarray(decode((source, other))))
    forced, _ = net.decode(source, decoder, feed_previous=False)
    forced_other, _ = net.decode(source, other, feed_previous=False)
    assert not np.allclose(np.asarray(forced[-1]), np.asarray(forced_other[-1]))


def test_speech_ctc_loss_counts_every_path_with_the_blank_as_the_last_class():
    """Uniform logits over C classes, 2 frames, transcript [0]: the paths "00", "0_", "_0" (blank
    last, TF1's convention Fathom's labels use; with the blank at 0 label 0 could not be emitted)."""
    import tensorflow as tf

    from dlbench.workloads.fathom.speech import ctc_loss

    classes = 62
    loss = ctc_loss(tf.zeros((1, 2, classes)), tf.constant([[0, 5]], tf.int32), tf.constant([1]), tf.constant([2]))
    assert float(loss[0]) == pytest.approx(math.log(classes**2 / 3), rel=1e-5)


def test_memnet_never_trains_the_nil_word():
    work = workload("memnet")
    spec = get_profile("smoke").fathom.memnet
    net = work.build(spec)
    before = np.array(net.A.numpy())
    step = work.train_step(net, spec)
    for batch in work.data(spec, spec.batch_size, mode=DataMode.SYNTHETIC, data_dir=None, seed=0, steps=2).batches:
        step(batch)
    after = net.A.numpy()
    assert not after[0].any() and not net.B.numpy()[0].any()
    assert not np.allclose(before[1:], after[1:])


# --- real bAbI ----------------------------------------------------------------------------------------

QA1 = """1 Mary moved to the bathroom.
2 John went to the hallway.
3 Where is Mary? \tbathroom\t1
4 Daniel went back to the hallway.
5 Sandra moved to the garden.
6 Where is Daniel? \thallway\t4
1 Sandra travelled to the office.
2 Sandra went to the bathroom.
3 Where is Sandra? \tbathroom\t2
"""
QA1_TEST = """1 John journeyed to the kitchen.
2 Where is John? \tkitchen\t1
"""
PEOPLE = ("Mary", "John", "Daniel", "Sandra")
PLACES = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
MOVES = ("moved to", "went to", "journeyed to", "travelled to", "went back to")


def qa1_story(rng: np.random.Generator) -> list[str]:
    """A story of task 1's grammar: 5 x (2 moves, a question about someone who moved)."""
    lines, where = [], {}
    for _ in range(5):
        for _ in range(2):
            person, place = str(rng.choice(PEOPLE)), str(rng.choice(PLACES))
            where[person] = (place, len(lines) + 1)
            lines.append(f"{len(lines) + 1} {person} {rng.choice(MOVES)} the {place}.")
        person = str(rng.choice(sorted(where)))
        lines.append(f"{len(lines) + 1} Where is {person}? \t{where[person][0]}\t{where[person][1]}")
    return lines


@pytest.fixture
def babi_dir(tmp_path: Path) -> Path:
    """bAbI's archive layout with task 1: 4 generated stories (20 questions) for training."""
    en = tmp_path / "babi" / "tasks_1-20_v1-2" / "en"
    en.mkdir(parents=True)
    rng = np.random.default_rng(0)
    stories = [line for _ in range(4) for line in qa1_story(rng)]
    (en / "qa1_single-supporting-fact_train.txt").write_text("\n".join(stories) + "\n")
    (en / "qa1_single-supporting-fact_test.txt").write_text(QA1_TEST)
    (en / "qa2_two-supporting-facts_train.txt").write_text(QA1_TEST)  # another task: not read
    return tmp_path / "babi"


def test_babi_is_vectorised_as_fathom_does(tmp_path):
    train, test = tmp_path / "qa1_single-supporting-fact_train.txt", tmp_path / "qa1_single-supporting-fact_test.txt"
    train.write_text(QA1)
    test.write_text(QA1_TEST)
    assert babi.find_task(tmp_path, 1) == (train, test) and babi.find_task(tmp_path, 2) is None
    arrays = babi.load_task(train, test, memory_size=3)
    words = sorted({"mary", "moved", "to", "the", "bathroom", "john", "went", "hallway", "where", "is", "daniel",
                    "back", "sandra", "garden", "travelled", "office", "journeyed", "kitchen"})
    index = {w: i + 1 for i, w in enumerate(words)}
    # The test file's words count; the longest sentence is "daniel went back to the hallway"; the
    # longest story is question 2's four sentences; three memories keep the most recent three.
    assert (arrays.vocabulary, arrays.sentence_size, arrays.story_length) == (len(words) + 1, 6, 4)
    assert arrays.stories.shape == (3, 3, 6) and arrays.questions.shape == (3, 6) and arrays.answers.shape == (3, 19)
    ids = [[index[w] for w in s.split()] for s in ("john went to the hallway", "daniel went back to the hallway",
                                                   "sandra moved to the garden")]
    assert arrays.stories[1].tolist() == [row + [0] * (6 - len(row)) for row in ids]
    assert arrays.questions[1].tolist() == [index["where"], index["is"], index["daniel"], 0, 0, 0]
    assert arrays.answers[1].argmax() == index["hallway"] and arrays.answers[1].sum() == 1
    assert arrays.stories[0][:2].any(axis=1).all() and arrays.stories[0][2:].tolist() == [[0] * 6]  # 2, then empty
    with pytest.raises(ValueError, match="vocabulary >= 19"):
        babi.fit(arrays, vocabulary=10, sentence_size=6, memories=3)


def test_memnet_reads_real_babi_into_the_profiles_shapes(babi_dir):
    spec = get_profile("paper").fathom.memnet
    data = workload("memnet").data(spec, 8, mode=DataMode.AUTO, data_dir=babi_dir, seed=0, steps=10)
    assert data.kind.value == "real" and "qa1_single-supporting-fact_train.txt" in data.source
    assert len(data.batches) == 2  # 20 questions: two full batches of 8, in file order
    stories, questions, answers = (np.asarray(t) for t in data.batches[0])
    assert stories.shape == (8, 10, 6) and questions.shape == (8, 6) and answers.shape == (8, 20)
    assert stories[0, 2:].sum() == 0 and stories[0, :2].any(axis=1).all()  # first question: two sentences
    assert (answers.sum(axis=1) == 1).all() and answers[:, 0].sum() == 0


def test_memnet_on_real_babi_through_the_module_command(tmp_path, babi_dir):
    out = tmp_path / "memnet.json"
    done = run_module("--model", "memnet", "--task", "train", "--profile", "smoke", "--data", "real", "--data-dir",
                      str(babi_dir), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    doc = ResultDocument.read(out)
    assert_contract(doc, "memnet", "train", data="real")
    assert str(babi_dir) in doc.labels["data_source"] and doc.benchmark.parameters["data"] == "real"


def test_data_real_without_the_files_fails_naming_what_is_expected(tmp_path):
    spec = get_profile("smoke").fathom
    with pytest.raises(DataUnavailable, match="qa1_"):
        workload("memnet").data(spec.memnet, 8, mode=DataMode.REAL, data_dir=tmp_path, seed=0, steps=2)
    for model, names in (("seq2seq", "WMT15"), ("speech", "TIMIT")):
        with pytest.raises(DataUnavailable, match=names):
            workload(model).data(spec.model(model), 2, mode=DataMode.REAL, data_dir=tmp_path, seed=0, steps=2)
    auto = workload("memnet").data(spec.memnet, 8, mode=DataMode.AUTO, data_dir=tmp_path, seed=0, steps=2)
    assert auto.kind.value == "synthetic" and len(auto.batches) == 2
