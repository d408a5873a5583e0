"""TensorFlow on the benchmarked instance: what every TensorFlow suite's documents say of it
(the CNN trainer, dltools, Fathom), as :mod:`.torch_instance` is PyTorch's.
"""

from __future__ import annotations

import os


def versions() -> dict[str, str]:
    """TensorFlow's, Keras' and (a CUDA build) CUDA's and cuDNN's versions, and the CPU threads it may use."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    build = tf.sysconfig.get_build_info()
    out = {"tensorflow": tf.__version__, "keras": tf.keras.__version__ if hasattr(tf.keras, "__version__") else ""}
    if build.get("cuda_version"):
        out["cuda"] = str(build["cuda_version"])
    if build.get("cudnn_version"):
        out["cudnn"] = str(build["cudnn_version"])
    out["tf_cpu_threads"] = str(os.cpu_count())
    return out


def framework_labels(on_gpu: bool) -> dict[str, str]:
    """What every framework's document says of how it ran (PyTorch's and JAX's runners set the same keys)."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only a training run needs it

    return {"framework_version": tf.__version__, "backend": "gpu" if on_gpu else "cpu", "compiler": "tf.function"}
