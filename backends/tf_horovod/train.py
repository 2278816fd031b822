"""TensorFlow trainer for the harness: Keras ResNet-50, SGD, precision, Horovod or MirroredStrategy.

Imported only inside the backend's environment (it needs tensorflow). Distribution:
`horovod` when a horovodrun worker (HOROVOD_RANK set), `multiworker` for one worker (one device)
of a job across nodes (MultiWorkerMirroredStrategy), `mirrored` for N > 1 devices in one
process (N logical CPU devices on a CPU), `single` otherwise. See docs/tf_horovod.md.
"""
import json
import os
from typing import Any, Dict

import tensorflow as tf

from .. import options, phases, policy
from ..harness import Trainer, cpu_name
from ..protocol import RunSpec, Unsupported
from . import OPTIONS
from .launch import BUILD_KEYS
from .resnet50 import non_trainable_parameters, resnet50, trainable_parameters

MIRRORED = ("mirrored", "multiworker")  # distributions that run through a tf.distribute strategy
POLICIES = {"fp32": "float32", "tf32": "float32", "fp16": "mixed_float16", "bf16": "mixed_bfloat16"}


def keras_version() -> str:
    version = getattr(tf.keras, "__version__", None)
    if version is None:
        import keras
        version = keras.__version__
    return version


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


def make_optimizer(learning_rate: float, momentum: float, xla: bool, loss_scaling: bool):
    """SGD with momentum; XLA compiles its update only when asked (`xla`).

    Keras 2's optimizers default to jit_compile=True whenever a GPU is visible, which would make
    every GPU run XLA-compile its update while the result says XLA is off. Keras 3's optimizers
    have no such switch (they compile only under Model.compile(jit_compile=True), unused here).
    """
    kwargs = {} if keras_version().startswith("3") else {"jit_compile": xla}
    opt = tf.keras.optimizers.SGD(learning_rate=learning_rate, momentum=momentum, **kwargs)
    return tf.keras.mixed_precision.LossScaleOptimizer(opt) if loss_scaling else opt


def optimizer_jit_compile(opt) -> bool:
    """Whether the optimizer really XLA-compiles its update (read back, not the request)."""
    return bool(getattr(getattr(opt, "inner_optimizer", opt), "jit_compile", False))


def make_strategy(devices, gpu: bool):
    """MirroredStrategy over `devices` with the all-reduce named, not left for TF to pick:
    NCCL between GPUs, reduction through one device between logical CPU devices."""
    ops = tf.distribute.NcclAllReduce() if gpu else tf.distribute.ReductionToOneDevice()
    return tf.distribute.MirroredStrategy(devices, cross_device_ops=ops)


def allreduce_name(strategy) -> str:
    """The cross-device op a MirroredStrategy holds, e.g. 'NcclAllReduce' (read back from it)."""
    ops = getattr(strategy.extended, "_cross_device_ops", None)
    return type(ops).__name__ if ops is not None else "unknown"


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
    return "NCHW" if model.get_layer("conv1").data_format == "channels_first" else "NHWC"


def horovod_build(hvd) -> Dict[str, bool]:
    """What this Horovod was built with: controllers (gloo, mpi) and GPU all-reduce (nccl, cuda)."""
    return {key: bool(getattr(hvd, key + "_built")()) for key in BUILD_KEYS}


def _distribution(spec: RunSpec) -> str:
    """Which kind of run this process is part of (launch.py made the choice)."""
    if "HOROVOD_RANK" in os.environ:
        return "horovod"
    if spec.nodes > 1:
        return "multiworker"
    return "mirrored" if spec.gpus > 1 else "single"


def _configure_devices(spec: RunSpec, distribution: str, world: int, local_rank: int):
    """Threads and device visibility; must run before TF touches a device. Returns GPU list."""
    if spec.device == "cuda":
        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            raise Unsupported("device cuda asked for, but tensorflow {} sees no GPU".format(
                tf.__version__))
        need = spec.gpus if distribution == "mirrored" else local_rank + 1
        if len(gpus) < need:
            raise Unsupported("spec asks for {} GPUs; tensorflow sees {}".format(need, len(gpus)))
        one = distribution in ("horovod", "multiworker")  # one GPU per process
        gpus = gpus[local_rank:local_rank + 1] if one else gpus[:spec.gpus]
        tf.config.set_visible_devices(gpus, "GPU")
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
        return gpus
    tf.config.set_visible_devices([], "GPU")
    # each worker (process or logical device) gets its share of its node's cores, as in torch
    tf.config.threading.set_intra_op_parallelism_threads(
        opt(spec, "intra_op_threads") or policy.cpu_threads(spec.gpus))
    tf.config.threading.set_inter_op_parallelism_threads(opt(spec, "inter_op_threads"))
    if distribution == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(spec.gpus)])
    return []


class TFTrainer(Trainer):
    def __init__(self, spec: RunSpec):
        self.spec = spec
        self.distribution = _distribution(spec)
        self.hvd = None
        local_rank, world = 0, spec.gpus
        if self.distribution == "horovod":
            import horovod.tensorflow as hvd
            hvd.init()
            self.hvd, self.rank, local_rank, world = hvd, hvd.rank(), hvd.local_rank(), hvd.size()
            policy.check_workers(spec.gpus, world, "horovodrun")
        elif self.distribution == "multiworker":
            from .launch import multiworker_config
            os.environ["TF_CONFIG"] = json.dumps(multiworker_config())
            self.rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
            world = int(os.environ["WORLD_SIZE"])
            policy.check_workers(spec.world_size, world, "srun")
        self.world = world
        self.gpus = _configure_devices(spec, self.distribution, world, local_rank)
        phases.mark("devices_ready")
        self.policy = resolve_precision(spec.precision, self.gpus)
        self.channels_last = policy.channels_last(opt(spec, "channels_last"), spec.device)
        self.data_format = "channels_last" if self.channels_last else "channels_first"
        xla = opt(spec, "xla")
        self.xla = spec.compile if xla is None else xla  # --compile means XLA here
        # before any op runs: MultiWorkerMirroredStrategy configures collectives at start-up
        self.strategy = self._strategy()
        compute = tf.keras.mixed_precision.Policy(self.policy).compute_dtype
        check_layout(self.data_format, compute, "/gpu:0" if self.gpus else "/cpu:0")
        tf.random.set_seed(spec.seed)  # same initial weights everywhere (Horovod broadcasts too)
        with self.strategy.scope():
            self.model = resnet50(spec.num_classes, spec.image_size, self.data_format)
            self.optimizer = make_optimizer(spec.learning_rate, spec.momentum, self.xla,
                                            self.policy == "mixed_float16")
        self.parameters = trainable_parameters(self.model)
        if self.hvd is not None:
            self.hvd.broadcast_variables(self.model.variables, root_rank=0)
        self.images, self.labels = self._synthetic_batch()
        self.feed = None
        if spec.data != "synthetic":  # real data: each step takes the next batch (data.py)
            from .data import make_feed
            self.feed = make_feed(self)
        self.allreduce = None
        self._train_step = self._build_step()
        self._loss = None  # type: Optional[tf.Tensor]

    def _strategy(self):
        self.strategy_name = "MirroredStrategy"
        if self.distribution == "multiworker":
            self.strategy_name = "MultiWorkerMirroredStrategy"
            self.cross_device_ops = "NCCL" if self.gpus else "RING"
            comm = tf.distribute.experimental.CommunicationOptions(
                implementation=getattr(tf.distribute.experimental.CommunicationImplementation,
                                       self.cross_device_ops))
            strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=comm)
            policy.check_workers(self.spec.world_size, strategy.num_replicas_in_sync, self.strategy_name)
            return strategy
        if self.distribution != "mirrored":
            return tf.distribute.get_strategy()  # the default (no-op) strategy
        kind = "gpu" if self.gpus else "cpu"
        return make_strategy(["/{}:{}".format(kind, i) for i in range(self.world)], bool(self.gpus))

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
        from .step import build_step
        fn, self.allreduce = build_step(self)
        return fn

    def step(self) -> None:
        if self.feed is not None:
            self.images, self.labels = self.feed.next()
        self._loss = self._train_step(self.images, self.labels)  # no .numpy(): no host sync

    def sync(self) -> None:
        # reading a value back waits for the device; sync_devices (TF >= 2.14) drains every queue
        if self._loss is not None:
            self._loss.numpy()
        if self.gpus and hasattr(tf.test.experimental, "sync_devices"):
            tf.test.experimental.sync_devices()

    def barrier(self) -> None:
        if self.hvd is not None:
            self.hvd.allreduce(tf.constant(0.0), name="compare_barrier").numpy()
        elif self.distribution == "multiworker":  # a collective every worker must join
            ones = self.strategy.run(lambda: tf.constant(1.0))
            self.strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None).numpy()

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
            inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads())
        if self.hvd is not None:
            import horovod
            settings.update(horovod_version=horovod.__version__, horovod_controller=(
                "gloo" if self.hvd.gloo_enabled() else "mpi"), horovod_build=horovod_build(self.hvd))
        if self.distribution == "multiworker":
            settings["cluster_resolver"] = "TF_CONFIG from the Slurm job (NodeAddr of each node)"
        if self.distribution in MIRRORED:
            settings["replicas"] = self.strategy.num_replicas_in_sync
            if os.environ.get("COMPARE_TF_FALLBACK"):
                settings["distribution_note"] = os.environ["COMPARE_TF_FALLBACK"]
        if not self.gpus and self.spec.precision == "fp16":
            settings["note"] = "fp16 on CPU: runs, but CPUs have no fp16 tensor cores"
        if self.feed is not None:
            settings.update(self.feed.describe())
        name = cpu_name()
        if self.gpus:
            name = tf.config.experimental.get_device_details(self.gpus[0]).get("device_name", "gpu")
            build = tf.sysconfig.get_build_info()
            settings.update(cuda_version=build.get("cuda_version"),
                            cudnn_version=build.get("cudnn_version"))
        return {"framework_version": "tensorflow " + tf.__version__, "device_name": name,
                "settings": settings}

    def close(self) -> None:
        if self.hvd is not None:
            self.hvd.shutdown()


def setup(spec: RunSpec) -> Trainer:
    if spec.data_only:  # the input pipeline alone (data.py)
        from .data import data_only
        return data_only(spec)
    return TFTrainer(spec)
