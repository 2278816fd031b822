"""TensorFlow trainer for the harness: Keras ResNet-50, SGD, precision, on the runtime's Horovod
or tf.distribute strategy (runtime.py).

Imported only inside the backend's environment (it needs tensorflow). See docs/tf_horovod.md.
"""
import os
from typing import Any, Dict, Optional

import tensorflow as tf

from .. import options, policy
from ..launchers.horovod import FALLBACK_ENV
from ..protocol import RunSpec, Unsupported
from ..trainer import RuntimeTrainer, Trainer
from . import ONEDNN, OPTIONS
from .data import make_feed
from .models import build, non_trainable_parameters, trainable_parameters
from .runtime import MIRRORED, TFRuntime, horovod_build, keras_version, start
from .step import build_step

POLICIES = {"fp32": "float32", "tf32": "float32", "fp16": "mixed_float16", "bf16": "mixed_bfloat16"}


def opt(spec: RunSpec, key: str):
    return options.value(OPTIONS, spec.options, key)


def resolve_precision(precision: str, gpus) -> str:
    """Set TF32 and the Keras policy for `precision`; return the policy name."""
    tf.config.experimental.enable_tensor_float_32_execution(precision == "tf32")
    capability = None
    if gpus:
        capability = tuple(tf.config.experimental.get_device_details(gpus[0]).get(
            "compute_capability", (0, 0)))
    policy.check_precision(precision, "cuda" if gpus else "cpu", capability)
    name = POLICIES[precision]
    tf.keras.mixed_precision.set_global_policy(name)
    return name


def make_optimizer(learning_rate: float, momentum: float, xla: bool, loss_scaling: bool,
                   sgd=None):
    """SGD with momentum (Keras' own, or the `sgd` subclass given); XLA compiles its update only
    when asked (`xla`).

    Keras 2's optimizers default to jit_compile=True whenever a GPU is visible, which would make
    every GPU run XLA-compile its update while the result says XLA is off. Keras 3's optimizers
    have no such switch (they compile only under Model.compile(jit_compile=True), unused here).
    """
    kwargs = {} if keras_version().startswith("3") else {"jit_compile": xla}
    opt = (sgd or tf.keras.optimizers.SGD)(learning_rate=learning_rate, momentum=momentum, **kwargs)
    return tf.keras.mixed_precision.LossScaleOptimizer(opt) if loss_scaling else opt


def optimizer_jit_compile(opt) -> bool:
    """Whether the optimizer really XLA-compiles its update (read back, not the request)."""
    return bool(getattr(getattr(opt, "inner_optimizer", opt), "jit_compile", False))


def check_layout(data_format: str, dtype: str, device: str) -> None:
    """Run a tiny convolution and max-pooling, forward and backward, compiled as the step is, in
    the model's layout and compute dtype; where TF has no kernel for that (its CPU pooling runs
    NCHW only through oneDNN, which has no float16) the result is an Unsupported with TF's words."""
    nchw = data_format == "channels_first"
    fmt = "NCHW" if nchw else "NHWC"

    @tf.function
    def conv_pool(x, w):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(tf.nn.max_pool2d(tf.nn.conv2d(x, w, 1, "SAME", data_format=fmt),
                                               2, 2, "VALID", data_format=fmt))
        return tape.gradient(y, x)

    try:
        with tf.device(device):
            x = tf.cast(tf.ones((1, 2, 4, 4) if nchw else (1, 4, 4, 2)), dtype)
            conv_pool(x, tf.cast(tf.ones((3, 3, 2, 2)), dtype)).numpy()
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError,
            tf.errors.NotFoundError) as exc:
        said = [ln.strip() for ln in exc.message.splitlines() if ln.strip() and "{{" not in ln]
        raise Unsupported("{} {} on {}: tensorflow {} says: {}{}".format(
            dtype, fmt, device, tf.__version__, said[-1] if said else type(exc).__name__,
            " (--option channels_last=true runs NHWC)" if nchw else ""))


def layout(model) -> str:
    """'NHWC' or 'NCHW': what the built model's first convolution really uses."""
    first = next(x for x in model.layers if isinstance(x, tf.keras.layers.Conv2D))
    return "NCHW" if first.data_format == "channels_first" else "NHWC"


class TFTrainer(RuntimeTrainer):
    def __init__(self, spec: RunSpec, runtime: TFRuntime):
        self.spec, self.runtime = spec, runtime
        # what step.py reads of its trainer: the runtime's choices
        self.distribution, self.hvd, self.rank, self.world = (
            runtime.distribution, runtime.hvd, runtime.rank, runtime.world)
        self.gpus, self.strategy = runtime.gpus, runtime.strategy
        self.strategy_name, self.cross_device_ops = runtime.strategy_name, runtime.cross_device_ops
        self.policy = resolve_precision(spec.precision, self.gpus)
        self.channels_last = policy.channels_last(opt(spec, "channels_last"), spec.device)
        self.data_format = "channels_last" if self.channels_last else "channels_first"
        xla = opt(spec, "xla")
        self.xla = spec.compile if xla is None else xla  # --compile means XLA here
        compute = tf.keras.mixed_precision.Policy(self.policy).compute_dtype
        check_layout(self.data_format, compute, "/gpu:0" if self.gpus else "/cpu:0")
        tf.random.set_seed(spec.seed)  # same initial weights everywhere (Horovod broadcasts too)
        with self.strategy.scope():
            self.model = build(spec.model, spec.num_classes, spec.image_size, self.data_format)
            self.optimizer = self._make_optimizer()
        self.parameters = trainable_parameters(self.model)
        if self.hvd is not None:
            self.hvd.broadcast_variables(self.model.variables, root_rank=0)
        self.images, self.labels = self._synthetic_batch()
        self.feed = None
        if spec.data != "synthetic":  # real data: each step takes the next batch (data.py)
            self.feed = make_feed(spec, runtime)
        self.allreduce = None
        self._train_step = self._build_step()
        self._loss = None  # type: Optional[tf.Tensor]

    def _make_optimizer(self):
        """Built inside the strategy's scope (time to accuracy's is the recipe's: accuracy.py)."""
        return make_optimizer(self.spec.learning_rate, self.spec.momentum, self.xla,
                              self.policy == "mixed_float16")

    def _synthetic_batch(self):
        """Random images and labels made on the device once, as tf_cnn_benchmarks does."""
        spec = self.spec
        shape = (spec.batch_size, spec.image_size, spec.image_size, 3)
        if self.data_format == "channels_first":
            shape = (spec.batch_size, 3, spec.image_size, spec.image_size)

        def make(rank):
            images = tf.random.normal(shape, seed=spec.seed + rank)
            labels = tf.random.uniform((spec.batch_size,), 0, spec.num_classes, tf.int32,
                                       seed=spec.seed + rank)
            return images, labels

        if self.distribution not in MIRRORED:
            with tf.device("/gpu:0" if self.gpus else "/cpu:0"):
                return make(self.rank)
        devices = self.strategy.extended.worker_devices  # this worker's own (multiworker: 1)

        def on_its_device(ctx):
            # TF calls this without a device scope: every batch would be made on the first
            # device and copied to the others every step. Replica ids run over all workers,
            # each worker's own devices in a row.
            replica = ctx.replica_id_in_sync_group
            with tf.device(devices[replica % len(devices)]):
                return make(replica)

        values = self.strategy.experimental_distribute_values_from_function(on_its_device)
        return values[0], values[1]

    def _build_step(self):
        fn, self.allreduce = build_step(self)
        return fn

    def step(self) -> None:
        if self.feed is not None:
            self.images, self.labels = self.feed.next()
        self._loss = self._train_step(self.images, self.labels)  # no .numpy(): no host sync

    def sync(self) -> None:
        # reading a value back waits for the device; then every queue (runtime)
        if self._loss is not None:
            self._loss.numpy()
        self.runtime.sync()

    def loss(self) -> float:
        return float(self._loss.numpy()) if self._loss is not None else float("nan")

    def describe(self) -> Dict[str, Any]:
        tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
        update_xla = optimizer_jit_compile(self.optimizer)
        settings = policy.settings(
            trainable_parameters=self.parameters, optimizer_impl="keras",
            precision=self.spec.precision,
            loss_scaling="dynamic" if self.policy == "mixed_float16" else None, tf32=tf32,
            layout=layout(self.model), compiler="xla" if self.xla or update_xla else None,
            threads=tf.config.threading.get_intra_op_parallelism_threads() or None,
            non_trainable_parameters=non_trainable_parameters(self.model),
            tensor_float_32_execution=tf32,
            policy=tf.keras.mixed_precision.global_policy().name,
            xla=self.xla, optimizer_jit_compile=update_xla, data_format=self.data_format,
            keras_version=keras_version(),
            allreduce=self.allreduce,
            intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),
            inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads(),
            onednn_opts=os.environ.get(ONEDNN))
        if self.hvd is not None:
            import horovod
            settings.update(horovod_version=horovod.__version__, horovod_controller=(
                "gloo" if self.hvd.gloo_enabled() else "mpi"), horovod_build=horovod_build(self.hvd))
        if self.distribution == "multiworker":
            settings["cluster_resolver"] = "TF_CONFIG from the Slurm job (NodeAddr of each node)"
        if self.distribution in MIRRORED:
            settings["replicas"] = self.strategy.num_replicas_in_sync
            if os.environ.get(FALLBACK_ENV):  # the horovod launcher ran one process: why
                settings["distribution_note"] = os.environ[FALLBACK_ENV]
        if not self.gpus and policy.cpu_precision_note(self.spec.precision, "cpu"):
            settings["note"] = policy.cpu_precision_note(self.spec.precision, "cpu", who="TensorFlow")
        if self.gpus:
            build = tf.sysconfig.get_build_info()
            settings.update(cuda_version=build.get("cuda_version"),
                            cudnn_version=build.get("cudnn_version"))
        return self.record(settings)


def setup(spec: RunSpec, runtime: Optional[TFRuntime] = None) -> Trainer:
    return TFTrainer(spec, runtime or start(spec))
