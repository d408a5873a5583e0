"""The core study's image-classification training (InceptionV3, ResNet-50, AlexNet), the ``tf-cnn``
command (its suite id stays ``tf_cnn``), in TensorFlow, PyTorch and JAX: the networks written once
(:mod:`.nets`), one trainer per framework (``tf_trainer``, ``torch_trainer``, ``jax_trainer``),
each importing its own framework only, on the neutral training core (:mod:`dlbench.workloads.training`).
"""
