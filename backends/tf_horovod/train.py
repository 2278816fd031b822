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
        self.data_format = opt(spec, "data_format")
        xla = opt(spec, "xla")
        self.xla = spec.compile if xla is None else xla  # --compile means XLA here
        self.strategy = self._strategy()
        tf.random.set_seed(spec.seed)  # same initial weights everywhere (Horovod broadcasts too)
        with self.strategy.scope():
            self.model = resnet50(spec.num_classes, spec.image_size, self.data_format)
            self.optimizer = self._optimizer()
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
        if self.gpus:
            self.cross_device_ops = "NcclAllReduce"
            return tf.distribute.MirroredStrategy(["/gpu:{}".format(i) for i in range(self.world)])
        # NCCL is for GPUs; on logical CPU devices reduce through one device
        self.cross_device_ops = "ReductionToOneDevice"
        return tf.distribute.MirroredStrategy(
            ["/cpu:{}".format(i) for i in range(self.world)],
            cross_device_ops=tf.distribute.ReductionToOneDevice())

    def _optimizer(self):
        opt = tf.keras.optimizers.SGD(learning_rate=self.spec.learning_rate,
                                      momentum=self.spec.momentum)
        if self.policy == "mixed_float16":
            opt = tf.keras.mixed_precision.LossScaleOptimizer(opt)
        return opt

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
        values = self.strategy.experimental_distribute_values_from_function(
            lambda ctx: make(ctx.replica_id_in_sync_group))
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
        settings = policy.settings(
            trainable_parameters=self.parameters, optimizer_impl="keras",
            precision=self.spec.precision,
            loss_scaling="dynamic" if self.policy == "mixed_float16" else None, tf32=tf32,
            layout="NHWC" if self.data_format == "channels_last" else "NCHW",
            compiler="xla" if self.xla else None,
            threads=tf.config.threading.get_intra_op_parallelism_threads() or None,
            non_trainable_parameters=non_trainable_parameters(self.model),
            tensor_float_32_execution=tf32,
            policy=tf.keras.mixed_precision.global_policy().name,
            xla=self.xla, data_format=self.data_format, keras_version=keras_version(),
            allreduce=self.allreduce,
            intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),
            inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads())
        if self.hvd is not None:
            import horovod
            settings.update(horovod_version=horovod.__version__, horovod_controller=(
                "gloo" if self.hvd.gloo_enabled() else "mpi"))
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
