"""bAbI for Fathom's memnet: the real task files read and vectorised the way Fathom's
``fathom/memnet/data_utils.py`` does (Dominique Luna's MemN2N code), or stories and questions of
the same shapes generated.

The real format (Weston et al. 2015, ``tasks_1-20_v1-2/en/qa1_single-supporting-fact_train.txt``):
one line per sentence, ``<id> <sentence>``; the id restarts at 1 where a story starts; a question
line is ``<id> <question>\\t<answer>\\t<supporting ids>``. Fathom lower-cases everything, drops the
sentence's final period and the question mark, keeps every earlier sentence of the story as a
question's context (questions are not memories), and encodes:

- a story as ``(memories, sentence_size)`` word ids, the most recent ``memories`` sentences, each
  padded with the nil word 0, then padded with empty memories;
- a question as ``sentence_size`` word ids; its answer as a one-hot vector over the vocabulary
  (index 0 is the nil word, so the vocabulary is the words + 1).

Word ids are 1-based positions in the sorted vocabulary of the train and test files together.
This module needs NumPy only (no TensorFlow): the tests read real-format files through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

TASK_DIRS = ("tasks_1-20_v1-2/en", "en", "")
"""Where a task's files may be under the data directory: the archive's layout (Fathom reads
``/data/babi/tasks_1-20_v1-2/en/``), its ``en`` folder alone, or the directory itself."""

Story = tuple[list[list[str]], list[str], list[str]]
"""(context sentences, question, answer): one question with what precedes it, as Fathom parses it."""


@dataclass(frozen=True)
class BabiArrays:
    """A task vectorised: stories (N, memories, sentence_size), questions (N, sentence_size),
    one-hot answers (N, vocabulary), and the sizes the files imply."""

    stories: Any
    questions: Any
    answers: Any
    vocabulary: int
    sentence_size: int
    story_length: int
    files: tuple[Path, ...]


def find_task(data_dir: Path, task: int) -> tuple[Path, Path | None] | None:
    """The train file of bAbI ``task`` (and its test file, when there) under ``data_dir``: the
    first ``qa<task>_*train*.txt`` of :data:`TASK_DIRS`, Fathom's ``'qa{}_'`` + ``'train'`` match."""
    prefix = f"qa{task}_"
    for sub in TASK_DIRS:
        base = data_dir / sub
        if not base.is_dir():
            continue
        train = sorted(p for p in base.iterdir() if p.name.startswith(prefix) and "train" in p.name)
        if train:
            test = sorted(p for p in base.iterdir() if p.name.startswith(prefix) and "test" in p.name)
            return train[0], (test[0] if test else None)
    return None


def tokenize(sentence: str) -> list[str]:
    """Words and punctuation marks. Fathom splits on ``(\\W+)?``, which under Python >= 3.7 also
    matches the empty string and splits between every character; ``(\\W+)`` is what it meant (what
    it did under the Python 3.5 Fathom ran on)."""
    return [token.strip() for token in re.split(r"(\W+)", sentence) if token.strip()]


def parse_stories(lines: Iterable[str]) -> list[Story]:
    """Fathom's ``parse_stories`` (``only_supporting=False``): each question with every sentence of
    its story before it."""
    data: list[Story] = []
    story: list[list[str]] = []
    for raw in lines:
        line = raw.lower().strip("\n")
        if not line.strip():
            continue
        number, text = line.split(" ", 1)
        if int(number) == 1:
            story = []
        if "\t" in text:
            question_text, answer, _supporting = text.split("\t")
            question = tokenize(question_text)
            if question and question[-1] == "?":
                question = question[:-1]
            data.append(([sentence for sentence in story if sentence], question, [answer.strip()]))
            story.append([])  # the question's slot: questions are not memories
        else:
            sentence = tokenize(text)
            if sentence and sentence[-1] == ".":
                sentence = sentence[:-1]
            story.append(sentence)
    return data


def read_stories(path: Path) -> list[Story]:
    with path.open(encoding="utf-8") as handle:
        return parse_stories(handle)


def vectorize(data: Sequence[Story], word_index: dict[str, int], sentence_size: int, memories: int,
              vocabulary: int) -> tuple[Any, Any, Any]:
    """Fathom's ``vectorize_data``: word ids padded with 0, the last ``memories`` sentences, empty
    memories after them, one-hot answers over ``vocabulary`` classes."""
    stories = np.zeros((len(data), memories, sentence_size), dtype=np.int32)
    questions = np.zeros((len(data), sentence_size), dtype=np.int32)
    answers = np.zeros((len(data), vocabulary), dtype=np.float32)
    for n, (story, question, answer) in enumerate(data):
        for m, sentence in enumerate(story[-memories:]):
            stories[n, m, : len(sentence)] = [word_index[w] for w in sentence]
        questions[n, : len(question)] = [word_index[w] for w in question]
        for word in answer:
            answers[n, word_index[word]] = 1.0
    return stories, questions, answers


def load_task(train: Path, test: Path | None, *, memory_size: int) -> BabiArrays:
    """The training questions of a task, vectorised with Fathom's sizes: the vocabulary of train and
    test together (+1 for nil), the longest sentence or question, ``min(memory_size, longest
    story)`` memories."""
    train_data = read_stories(train)
    test_data = read_stories(test) if test is not None else []
    everything = train_data + test_data
    if not train_data:
        raise ValueError(f"{train} holds no question in bAbI's format")
    words = sorted(set(chain.from_iterable(list(chain.from_iterable(s)) + q + a for s, q, a in everything)))
    word_index = {word: i + 1 for i, word in enumerate(words)}
    story_length = max(len(s) for s, _, _ in everything)
    sentence_size = max(max((len(x) for s, _, _ in everything for x in s), default=0),
                        max(len(q) for _, q, _ in everything))
    vocabulary = len(word_index) + 1
    memories = min(memory_size, story_length)
    stories, questions, answers = vectorize(train_data, word_index, sentence_size, memories, vocabulary)
    files = (train,) if test is None else (train, test)
    return BabiArrays(stories, questions, answers, vocabulary, sentence_size, story_length, files)


def fit(arrays: BabiArrays, *, vocabulary: int, sentence_size: int, memories: int) -> BabiArrays:
    """``arrays`` padded to a model's sizes (nil words, empty memories, zero answer classes): the
    profile states the model's sizes, and a task smaller than them runs padded as Fathom pads every
    story to the longest. Larger than them is refused (the message names the sizes to set)."""
    _, have_memories, have_sentence = arrays.stories.shape
    if arrays.vocabulary > vocabulary or arrays.sentence_size > sentence_size or have_memories > memories:
        raise ValueError(
            f"bAbI files {', '.join(str(f) for f in arrays.files)} need vocabulary >= {arrays.vocabulary}, "
            f"sentence_size >= {arrays.sentence_size}, story_length >= {have_memories}; the profile's "
            f"fathom.memnet has {vocabulary}, {sentence_size}, {memories}: set them in the profile")
    n = arrays.stories.shape[0]
    stories = np.zeros((n, memories, sentence_size), dtype=np.int32)
    stories[:, :have_memories, :have_sentence] = arrays.stories
    questions = np.zeros((n, sentence_size), dtype=np.int32)
    questions[:, : arrays.questions.shape[1]] = arrays.questions
    answers = np.zeros((n, vocabulary), dtype=np.float32)
    answers[:, : arrays.answers.shape[1]] = arrays.answers
    return BabiArrays(stories, questions, answers, vocabulary, sentence_size, arrays.story_length, arrays.files)


def generate(n: int, *, vocabulary: int, sentence_size: int, memories: int, seed: int) -> tuple[Any, Any, Any]:
    """``n`` stories and questions of the shapes: full memories of full sentences of random words
    (ids 1..vocabulary-1), random one-hot answers. The network's cost does not depend on the words:
    every memory slot and position is computed whether it holds a word or the nil word."""
    rng = np.random.default_rng(seed)
    stories = rng.integers(1, vocabulary, size=(n, memories, sentence_size), dtype=np.int32)
    questions = rng.integers(1, vocabulary, size=(n, sentence_size), dtype=np.int32)
    answers = np.zeros((n, vocabulary), dtype=np.float32)
    answers[np.arange(n), rng.integers(1, vocabulary, size=n)] = 1.0
    return stories, questions, answers
