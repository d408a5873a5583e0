"""Study 003's Fathom suite re-implemented for TensorFlow 2: the eight workloads of
rdadolf/fathom (seq2seq, memnet, speech, autoenc, residual, vgg, alexnet, deepq), each trained
and run forward only with per-step timing (docs/fathom.md)."""
