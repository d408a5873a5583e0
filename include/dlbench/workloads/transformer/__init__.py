"""The ``transformer`` suite: a GPT-style decoder's training and generation in PyTorch (docs/transformer.md)."""
