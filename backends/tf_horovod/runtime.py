"""TensorFlow's runtime: how this process's workers run (Horovod, MirroredStrategy over its
devices, one worker of a MultiWorkerMirroredStrategy across nodes, or alone), its devices and
threads, the strategy, sync, barrier, close. Imported by train.py, step.py and data.py.

Distribution: `horovod` for a horovodrun worker (backends/world.py), `multiworker` for one worker
(one device) of a job across nodes, `mirrored` for N > 1 devices in one process (N logical CPU
devices on a CPU), `single` otherwise. See docs/tf_horovod.md.
"""
import json
import os
from typing import Any, Dict, List

import tensorflow as tf

from .. import options, phases, policy, world
from ..launchers.horovod import BUILD_KEYS
from ..machine import cpu_model
from ..protocol import RunSpec, Unsupported
from ..trainer import Runtime
from ..world import World
from . import OPTIONS

MIRRORED = ("mirrored", "multiworker")  # distributions that run through a tf.distribute strategy


def keras_version() -> str:
    version = getattr(tf.keras, "__version__", None)
    if version is None:
        import keras
        version = keras.__version__
    return version


def make_strategy(devices, gpu: bool):
    """MirroredStrategy over `devices` with the all-reduce named, not left for TF to pick:
    NCCL between GPUs, reduction through one device between logical CPU devices."""
    ops = tf.distribute.NcclAllReduce() if gpu else tf.distribute.ReductionToOneDevice()
    return tf.distribute.MirroredStrategy(devices, cross_device_ops=ops)


def allreduce_name(strategy) -> str:
    """The cross-device op a MirroredStrategy holds, e.g. 'NcclAllReduce' (read back from it)."""
    ops = getattr(strategy.extended, "_cross_device_ops", None)
    return type(ops).__name__ if ops is not None else "unknown"


def horovod_build(hvd) -> Dict[str, bool]:
    """What this Horovod was built with: controllers (gloo, mpi) and GPU all-reduce (nccl, cuda)."""
    return {key: bool(getattr(hvd, key + "_built")()) for key in BUILD_KEYS}


def multiworker_config(me: World) -> Dict[str, Any]:
    """TF_CONFIG of one worker of a Slurm job whose srun tasks are the workers (tasks placed
    block-wise on the nodes). Each worker listens at its node's address as Slurm knows it
    (COMPARE_NODE_ADDRS, in node order: node names need not resolve) on its own port after the
    job's coordinator port, so workers sharing a host differ."""
    per_node, base = me.local_processes, me.port + 1
    workers = ["{}:{}".format(me.node_addresses[r // per_node], base + r) for r in range(me.processes)]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": me.rank}}


def distribution(spec: RunSpec) -> str:
    """Which kind of run this process is part of (the launcher made the choice)."""
    if world.world().kind == "horovod":  # a horovodrun worker
        return "horovod"
    if spec.nodes > 1:
        return "multiworker"
    return "mirrored" if spec.gpus > 1 else "single"


def configure_devices(spec: RunSpec, distribution: str, local_rank: int) -> List[Any]:
    """Threads and device visibility; must run before TF touches a device. Returns GPU list."""
    if spec.device == "cuda":
        gpus = tf.config.list_physical_devices("GPU")
        policy.check_gpu(bool(gpus), "tensorflow " + tf.__version__)
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
        options.value(OPTIONS, spec.options, "intra_op_threads") or policy.cpu_threads(spec.gpus))
    tf.config.threading.set_inter_op_parallelism_threads(
        options.value(OPTIONS, spec.options, "inter_op_threads"))
    if distribution == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(spec.gpus)])
    return []


class TFRuntime(Runtime):
    def __init__(self, spec: RunSpec):
        self.spec, self.distribution, self.hvd = spec, distribution(spec), None
        local_rank, self.world = 0, spec.gpus
        if self.distribution == "horovod":
            import horovod.tensorflow as hvd
            hvd.init()
            self.hvd, self.rank, local_rank, self.world = hvd, hvd.rank(), hvd.local_rank(), hvd.size()
            policy.check_workers(spec.gpus, self.world, "horovodrun")
        elif self.distribution == "multiworker":
            me = world.world()
            os.environ["TF_CONFIG"] = json.dumps(multiworker_config(me))
            self.rank, local_rank, self.world = me.rank, me.local_rank, me.processes
            policy.check_workers(spec.world_size, self.world, "srun")
        self.gpus = configure_devices(spec, self.distribution, local_rank)
        phases.mark("devices_ready")
        # before any op runs: MultiWorkerMirroredStrategy configures collectives at start-up
        self.strategy = self._strategy()

    def _strategy(self):
        self.strategy_name, self.cross_device_ops = "MirroredStrategy", None
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

    def sync(self) -> None:
        # sync_devices (TF >= 2.14) drains every queue
        if self.gpus and hasattr(tf.test.experimental, "sync_devices"):
            tf.test.experimental.sync_devices()

    def barrier(self) -> None:
        if self.hvd is not None:
            self.hvd.allreduce(tf.constant(0.0), name="compare_barrier").numpy()
        elif self.distribution == "multiworker":  # a collective every worker must join
            ones = self.strategy.run(lambda: tf.constant(1.0))
            self.strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None).numpy()

    def describe(self) -> Dict[str, Any]:
        name = cpu_model()
        if self.gpus:
            name = tf.config.experimental.get_device_details(self.gpus[0]).get("device_name", "gpu")
        return {"framework_version": "tensorflow " + tf.__version__, "device_name": name}

    def close(self) -> None:
        if self.hvd is not None:
            self.hvd.shutdown()


def start(spec: RunSpec) -> TFRuntime:
    return TFRuntime(spec)
