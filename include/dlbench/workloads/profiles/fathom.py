"""Study 003's Fathom suite in a profile: Fathom's default hyper-parameters (``paper``) or tiny
sizes (``smoke``), one spec per workload (docs/fathom.md says where every default comes from).

The defaults are Fathom's, so a user profile written before this suite existed still validates
and a ``fathom:`` block need only name what it changes.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from dlbench.workloads.profiles.enums import FathomModel, FathomTask


class FathomModelSpec(BaseModel):
    """What every Fathom workload has: its batch size and its optimizer's learning rate. Each
    workload's subclass adds its architecture's sizes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_size: PositiveInt
    learning_rate: float = Field(gt=0)


# -- the workloads' specs (architecture sizes: Fathom's defaults) --------------------------------


class Seq2SeqSpec(FathomModelSpec):
    """Fathom's seq2seq (``fathom/seq2seq/seq2seq.py``, TensorFlow's WMT15 English->French
    translation example): an embedding encoder of ``layers`` LSTMs, an attention decoder of as many,
    a sampled softmax over the target vocabulary; plain SGD with global-norm gradient clipping. The
    lengths are Fathom's largest bucket, (40, 50)."""

    batch_size: PositiveInt = 64
    learning_rate: float = Field(default=0.5, gt=0)
    source_vocabulary: PositiveInt = Field(default=40000, description="English vocabulary (en_vocab_size)")
    target_vocabulary: int = Field(default=40000, ge=2, description="French vocabulary (fr_vocab_size)")
    width: PositiveInt = Field(default=256, description="LSTM units and embedding size (size)")
    layers: PositiveInt = Field(default=3, description="LSTM layers of the encoder and of the decoder (num_layers)")
    sampled_classes: PositiveInt = Field(default=512, description="sampled-softmax classes per step (num_samples)")
    encoder_length: PositiveInt = Field(default=40, description="source tokens: the largest bucket's")
    decoder_length: int = Field(default=50, ge=2, description="target tokens (with GO): the largest bucket's")
    max_gradient_norm: float = Field(default=5.0, gt=0, description="global-norm clipping")

    @model_validator(mode="after")
    def _sampled_softmax(self) -> Seq2SeqSpec:
        # Fathom switches to a full softmax (and another architecture: no output projection) when
        # num_samples >= the vocabulary; one architecture per workload, so that is refused here.
        if self.sampled_classes >= self.target_vocabulary:
            raise ValueError(f"sampled_classes ({self.sampled_classes}) must be below target_vocabulary "
                             f"({self.target_vocabulary}): Fathom's model is the sampled-softmax one")
        return self


class MemNetSpec(FathomModelSpec):
    """Fathom's memnet (``fathom/memnet/memnet.py``, an end-to-end memory network, Sukhbaatar et al.
    2015) on bAbI task ``task``: ``hops`` hops over at most ``memory_size`` sentences embedded in
    ``embedding_size``; Adam, per-gradient norm clipping, gradient noise. Fathom derives vocabulary,
    sentence and story sizes from the task's files; the defaults here are those of task 1
    (qa1_single-supporting-fact, the ``en`` 1k set), and real files must fit them."""

    batch_size: PositiveInt = 32
    learning_rate: float = Field(default=0.01, gt=0)
    embedding_size: PositiveInt = 20
    hops: PositiveInt = 3
    memory_size: PositiveInt = Field(default=50, description="Fathom's cap on the sentences a story keeps")
    task: int = Field(default=1, ge=1, le=20, description="the bAbI task (Fathom's task_id)")
    vocabulary: int = Field(default=20, ge=2, description="words + the nil word (qa1: 19 + 1)")
    sentence_size: PositiveInt = Field(default=6, description="longest sentence or question, words (qa1: 6)")
    story_length: PositiveInt = Field(default=10, description="longest story, sentences (qa1: 10)")
    max_gradient_norm: float = Field(default=40.0, gt=0, description="clip_by_norm of each gradient")
    gradient_noise: float = Field(default=1e-3, ge=0, description="stddev of the Gaussian added to gradients")

    @property
    def memories(self) -> int:
        """Memory slots: Fathom's ``min(memory_size, longest story)``."""
        return min(self.memory_size, self.story_length)


class SpeechSpec(FathomModelSpec):
    """Fathom's speech (``fathom/speech/speech.py``, Deep Speech's shape, Hannun et al. 2014): three
    clipped-ReLU dense layers, a bidirectional clipped-ReLU recurrent layer, a dense output over
    TIMIT's 61 phonemes + the CTC blank; CTC loss, plain SGD (Fathom hard-codes 0.01)."""

    batch_size: PositiveInt = 32
    learning_rate: float = Field(default=0.01, gt=0)
    features: PositiveInt = Field(default=26, description="MFCC coefficients per frame (n_coeffs)")
    hidden: PositiveInt = Field(default=1024, description="width of every hidden layer (n_hidden)")
    max_frames: PositiveInt = Field(default=1566, description="frames per (padded) utterance")
    max_labels: PositiveInt = Field(default=75, description="phonemes per (padded) transcript")
    alphabet: PositiveInt = Field(default=61, description="TIMIT phonemes; the CTC blank is one more class")
    relu_clip: float = Field(default=20.0, gt=0, description="Deep Speech's clipped ReLU: min(relu(x), 20)")

    @model_validator(mode="after")
    def _ctc_feasible(self) -> SpeechSpec:
        # A transcript of n labels (repeats need a blank between them) needs up to 2n - 1 frames;
        # shorter utterances make the CTC loss infinite.
        if self.max_frames < 2 * self.max_labels:
            raise ValueError(f"max_frames ({self.max_frames}) must be at least 2 * max_labels ({self.max_labels})")
        return self


class AutoencSpec(FathomModelSpec):
    """Fathom's ``autoenc``: the variational autoencoder of ``fathom/autoenc/variational.py`` on
    MNIST (one linear encoder to a Gaussian latent's mean and log variance, one linear decoder)."""

    batch_size: PositiveInt = 128
    learning_rate: float = Field(default=1e-3, gt=0, description="Adam's (AdamOptimizer() default)")
    latent_size: PositiveInt = Field(default=200, description="n_hidden: the latent Gaussian's dimension")


class ResidualBlock(BaseModel):
    """One stage of Fathom's residual network: ``repeats`` bottleneck units (1x1 to ``bottleneck``,
    3x3, 1x1 back to ``filters``), each added to its input."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repeats: PositiveInt
    filters: PositiveInt
    bottleneck: PositiveInt


class ResidualSpec(FathomModelSpec):
    """Fathom's ``residual`` (``fathom/residual/residual.py``, after Parag Mital's tutorial): a 7x7
    stride-2 stem, max pool, four stages of bottleneck units at one resolution, global average
    pool, a bias-free linear classifier."""

    batch_size: PositiveInt = 16
    learning_rate: float = Field(default=0.01, gt=0, description="Adam's")
    image_size: PositiveInt = 224
    classes: PositiveInt = Field(default=1001, description="ImageNet's 1000 + background, as Fathom")
    stem_filters: PositiveInt = 64
    blocks: list[ResidualBlock] = Field(
        default=[
            ResidualBlock(repeats=3, filters=128, bottleneck=32),
            ResidualBlock(repeats=3, filters=256, bottleneck=64),
            ResidualBlock(repeats=3, filters=512, bottleneck=128),
            ResidualBlock(repeats=3, filters=1024, bottleneck=256),
        ],
        min_length=1,
    )


class VGGSpec(FathomModelSpec):
    """Fathom's ``vgg`` (``fathom/vgg/vgg.py``): 3x3 convolutions in five stages, each closed by a
    2x2 max pool, then three fully connected layers (ReLU on all three, dropout after two)."""

    batch_size: PositiveInt = 8
    learning_rate: float = Field(default=1e-4, gt=0, description="Adam's")
    image_size: PositiveInt = 224
    classes: PositiveInt = Field(default=1001, description="ImageNet's 1000 + background, as Fathom")
    stages: list[list[PositiveInt]] = Field(
        default=[[64, 64], [128, 128], [256, 256], [512, 512, 512], [512, 512, 512]],
        min_length=1,
        description="output channels of each 3x3 convolution, stage by stage",
    )
    fc_width: PositiveInt = 4096
    keep_probability: float = Field(default=0.8, gt=0, le=1, description="dropout's keep probability (training)")


class AlexNetSpec(FathomModelSpec):
    """Fathom's ``alexnet`` (``fathom/alexnet/alexnet.py``, after Aymeric Damien's example): five
    convolutions (11x11/4, 5x5, 3x3 x3) with LRN after the first two pools, three dense layers."""

    batch_size: PositiveInt = 64
    learning_rate: float = Field(default=1e-3, gt=0, description="Adam's")
    image_size: PositiveInt = Field(default=224, ge=64, description="at least 64: three pools must leave a pixel")
    classes: PositiveInt = Field(default=1001, description="ImageNet's 1000 + background, as Fathom")
    filters: list[PositiveInt] = Field(
        default=[64, 192, 384, 256, 256], min_length=5, max_length=5, description="conv1..conv5's output channels"
    )
    fc_width: PositiveInt = 4096


class DeepQSpec(FathomModelSpec):
    """Fathom's ``deepq`` (``fathom/deepq/deepq.py``, Nature DQN parameters): Q-learning updates
    on minibatches sampled from a replay buffer of 84x84 grey frames, against a target network."""

    batch_size: PositiveInt = 32
    learning_rate: float = Field(default=2.5e-4, gt=0, description="RMSProp's")
    frame_size: PositiveInt = Field(default=84, ge=36, description="side of a preprocessed frame")
    frame_stack: PositiveInt = Field(default=4, description="frames stacked into one state")
    actions: PositiveInt = Field(default=4, description="Breakout's minimal action set (Fathom's default game)")
    filters: list[PositiveInt] = Field(
        default=[32, 64, 64], min_length=3, max_length=3, description="conv 8x8/4, 4x4/2, 3x3/1 output channels"
    )
    hidden: PositiveInt = Field(default=512, description="the fully connected layer's width")
    discount: float = Field(default=0.99, ge=0, le=1)
    rms_decay: float = Field(default=0.95, gt=0, lt=1)
    rms_epsilon: float = Field(default=0.01, gt=0)
    clip_delta: float = Field(default=1.0, ge=0, description="Huber loss threshold (0: squared error)")
    target_update_interval: PositiveInt = Field(default=10000, description="copy_freq: steps between target copies")
    replay_frames: int = Field(
        default=10000, ge=8, description="generated frames in the replay buffer (Fathom allocates 10^6, fills ~100)"
    )


class FathomSpec(BaseModel):
    """Fathom's eight workloads: each in each task (training steps, inference), ``warmup_steps``
    untimed then ``measured_steps`` timed steps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repetitions: PositiveInt = Field(default=3, description="executions of each workload and task")
    warmup_steps: int = Field(default=10, ge=1, description="untimed steps first (tracing, first touches)")
    measured_steps: int = Field(default=100, ge=2, description="timed steps")
    tasks: list[FathomTask] = Field(default=[FathomTask.TRAIN, FathomTask.INFER], min_length=1)
    models: list[FathomModel] = Field(default=list(FathomModel), min_length=1,
                                      description="the workloads a run plans (default all eight)")
    seq2seq: Seq2SeqSpec = Seq2SeqSpec()
    memnet: MemNetSpec = MemNetSpec()
    speech: SpeechSpec = SpeechSpec()
    autoenc: AutoencSpec = AutoencSpec()
    residual: ResidualSpec = ResidualSpec()
    vgg: VGGSpec = VGGSpec()
    alexnet: AlexNetSpec = AlexNetSpec()
    deepq: DeepQSpec = DeepQSpec()

    def model(self, name: FathomModel | str) -> FathomModelSpec:
        spec: FathomModelSpec = getattr(self, FathomModel(name).value)
        return spec
