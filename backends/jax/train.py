"""JAX (Flax) trainer for the harness: precision, devices and processes, state, the jitted step.

Imported only inside the backend's environment, after launch.prepare() set XLA_FLAGS and
JAX_PLATFORMS (jax reads them once, at import).
"""
import inspect
import os
import re
import time
from typing import Any, Dict, List, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .. import options, phases, policy
from ..harness import Trainer, cpu_name
from ..protocol import RunSpec, Unsupported
from . import OPTIONS, step
from .launch import Member, devices_per_process
from .resnet50 import ResNet50, count

# precision -> (compute dtype, jax_default_matmul_precision, loss scaling); params stay float32.
# "highest" keeps float32 matmuls and convolutions in true FP32 (no TF32 on the GPU);
# "tensorfloat32" lets them use TF32; low-precision compute does its matmuls in its own dtype.
PRECISIONS = {"fp32": (jnp.float32, "highest", None),
              "tf32": (jnp.float32, "tensorfloat32", None),
              "bf16": (jnp.bfloat16, None, None),
              "fp16": (jnp.float16, None, "dynamic")}
SHUTDOWN_TIMEOUT_S = 60


def _capability(device) -> Optional[tuple]:
    text = getattr(device, "compute_capability", None)
    try:
        return tuple(int(x) for x in str(text).split(".")[:2]) if text else None
    except ValueError:
        return None


def resolve_precision(precision: str, device_kind: str, device,
                      static_scale: Optional[float] = None) -> Dict[str, Any]:
    """Check that `precision` runs here and set jax's matmul precision for it. One place only.

    static_scale (fp16 only): a fixed loss scale instead of the dynamic one."""
    policy.check_precision(precision, device_kind, _capability(device) if device_kind == "cuda" else None)
    dtype, matmul, scaling = PRECISIONS[precision]
    if precision == "tf32" and os.environ.get("NVIDIA_TF32_OVERRIDE") == "0":
        raise Unsupported("tf32 asked for, but NVIDIA_TF32_OVERRIDE=0 switches it off")
    if scaling and static_scale:
        scaling = "static {:g}".format(static_scale)
    jax.config.update("jax_default_matmul_precision", matmul)
    return {"dtype": dtype, "matmul_precision": matmul or "default", "loss_scaling": scaling,
            "static_scale": static_scale if scaling and static_scale else None}


def join(spec: RunSpec, member: Member) -> None:
    """Join the other processes of the job through jax.distributed (no-op for one process)."""
    if member.processes == 1:
        return
    kwargs = {}  # type: Dict[str, Any]
    if member.coordinator:
        kwargs = dict(coordinator_address=member.coordinator, num_processes=member.processes,
                      process_id=member.process_id)
    if spec.device == "cuda":
        k = devices_per_process(spec, member)
        visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d]
        # a launcher that gives each task its own GPUs makes them devices 0..k-1
        first = 0 if len(visible) == k else member.local_rank * k
        kwargs["local_device_ids"] = list(range(first, first + k))
    if "shutdown_timeout_seconds" in inspect.signature(jax.distributed.initialize).parameters:
        # a process whose run failed waits this long for the others at shutdown (default 300 s)
        kwargs["shutdown_timeout_seconds"] = SHUTDOWN_TIMEOUT_S
    jax.distributed.initialize(**kwargs)  # without a coordinator: jax's own Slurm detection


def _devices(spec: RunSpec, member: Member) -> List[Any]:
    """Every device of the job (all processes), checked against the spec."""
    if spec.device == "cuda" and jax.default_backend() not in ("gpu", "cuda"):
        raise Unsupported("device cuda asked for, but jax {} sees no GPU (backend {})".format(
            jax.__version__, jax.default_backend()))
    devices = jax.devices()
    if member.processes == 1:  # one process takes the first N devices it sees
        if len(devices) < spec.world_size:
            raise Unsupported("spec asks for {} {}s, jax {} sees {}".format(
                spec.world_size, "GPU" if spec.device == "cuda" else "CPU device",
                jax.__version__, len(devices)))
        return devices[:spec.world_size]
    policy.check_workers(spec.world_size, len(devices), "jax.distributed ({} processes)".format(
        member.processes))
    return devices


class JaxTrainer(Trainer):
    def __init__(self, spec: RunSpec, member: Member, xla_flags_added: List[str]):
        self.spec, self.member, self.xla_flags_added = spec, member, xla_flags_added
        self.sync_bn = options.value(OPTIONS, spec.options, "sync_bn")
        self.donate = options.value(OPTIONS, spec.options, "donate")
        self.flat = options.value(OPTIONS, spec.options, "flat_allreduce")
        join(spec, member)
        self.rank = jax.process_index()
        self.devices = _devices(spec, member)
        phases.mark("devices_ready")  # the step is compiled ahead of time: under model_built
        self.world = len(self.devices)
        self.precision = resolve_precision(spec.precision, spec.device, self.devices[0],
                                           options.value(OPTIONS, spec.options, "loss_scale"))
        self.distribution = "jax-spmd" if self.world > 1 else "single"
        self.mesh = Mesh(np.array(self.devices), (step.AXIS,))
        global_bn = self.sync_bn and self.world > 1
        self.model = ResNet50(num_classes=spec.num_classes, dtype=self.precision["dtype"],
                              axis_name=step.AXIS if global_bn else None)
        self.tx = optax.sgd(spec.learning_rate, momentum=spec.momentum)
        key = jax.random.PRNGKey(spec.seed)
        self.state = step.initial_state(self.model, self.tx, key, spec.image_size, self.mesh,
                                        self.precision["loss_scaling"] == "dynamic")
        # the synthetic batch; with real data its shapes and shardings are also the step's
        self.images, self.labels = self._batch(jax.random.fold_in(key, 1))
        started = time.perf_counter()
        jitted = step.build(self.model, self.tx, self.mesh, self.state, self.donate,
                            self.precision["static_scale"], self.flat)
        self.lowered = jitted.lower(self.state, self.images, self.labels)
        self._step = self.lowered.compile()  # ahead of time: no compile inside the warm-up
        self.compile_s = time.perf_counter() - started
        self.parameters = count(self.state.params)
        self.running_statistics = count(self.state.batch_stats) // self.world
        self._out = None  # the last step's outputs (state, losses): what sync() waits for
        self.feed = None
        if spec.data != "synthetic":  # real data: each step takes the next prefetched batch
            from .data import make_feed
            self.feed = make_feed(spec, self.mesh, member)

    def _batch(self, key):
        """The synthetic global batch, made on the devices once, split along the mesh axis."""
        spec = self.spec
        sharding = NamedSharding(self.mesh, P(step.AXIS))
        shape = (spec.global_batch, spec.image_size, spec.image_size, 3)  # NHWC

        def make(key):
            k_images, k_labels = jax.random.split(key)
            return (jax.random.normal(k_images, shape, jnp.float32),
                    jax.random.randint(k_labels, (spec.global_batch,), 0, spec.num_classes))
        return jax.jit(make, out_shardings=(sharding, sharding))(key)

    def step(self) -> None:
        if self.feed is not None:
            self.images, self.labels = self.feed.next()
        self.state, losses = self._step(self.state, self.images, self.labels)  # async dispatch
        self._out = (self.state, losses)

    def sync(self) -> None:
        if self._out is not None:
            jax.block_until_ready(self._out)

    def barrier(self) -> None:
        barrier(self.member)

    def loss(self) -> float:
        """Mean loss over this process's devices (each one's loss on its own slice)."""
        if self._out is None:
            return float("nan")
        shards = self._out[1].addressable_shards
        return float(np.mean([np.asarray(s.data) for s in shards]))

    def describe(self) -> Dict[str, Any]:
        return {"framework_version": versions(),
                "device_name": self.devices[0].device_kind if self.spec.device == "cuda"
                else cpu_name(),
                "settings": self.settings()}

    def settings(self) -> Dict[str, Any]:
        spec, cuda = self.spec, self.spec.device == "cuda"
        out = policy.settings(
            trainable_parameters=self.parameters, optimizer_impl="optax.sgd",
            precision=spec.precision, loss_scaling=self.precision["loss_scaling"],
            tf32=spec.precision == "tf32" and cuda, layout="NHWC", compiler="xla",
            threads=None if cuda else _threads(),
            bn_running_statistics=self.running_statistics,
            matmul_precision=self.precision["matmul_precision"],
            param_dtype="float32",
            bn_mode="global (sync_bn)" if self.sync_bn and self.world > 1 else "per-device",
            gradient_allreduce=("pmean once per step" + (", one flat buffer" if self.flat else ""))
            if self.world > 1 else None,
            devices=[str(d) for d in self.devices],
            processes=self.member.processes, process_launcher=self.member.source,
            devices_per_process=self.world // self.member.processes,
            allreduce_ops=allreduce_ops(self._step.as_text()),
            platform_version=getattr(self.devices[0].client, "platform_version", None),
            donate=self.donate, compile_s=round(self.compile_s, 2),
            xla_flags=os.environ.get("XLA_FLAGS", ""), xla_flags_added=self.xla_flags_added)
        if not cuda and spec.precision == "fp16":
            out["note"] = "fp16 on CPU: XLA runs it, but CPUs have no fp16 tensor cores"
        if self.feed is not None:
            out.update(self.feed.describe())
        return out

    def close(self) -> None:
        if self.feed is not None:
            self.feed.close()
        if self.member.processes > 1:
            jax.distributed.shutdown()


def barrier(member: Member) -> None:
    """Every process of the job waits here (nothing to wait for with one process)."""
    if member.processes > 1:
        from jax.experimental import multihost_utils
        multihost_utils.sync_global_devices("compare-barrier")


def allreduce_ops(compiled_hlo: str) -> int:
    """All-reduce instructions in the compiled step, after XLA combined them: one (or a few
    buckets) for the gradients with per-device BN; SyncBN adds some in every BN layer."""
    return len(re.findall(r" all-reduce(?:-start)?\(", compiled_hlo))


def _threads() -> int:
    """CPU threads this process's XLA pool has: the cores it may run on (launch.prepare pins
    each of several local processes to its share); N devices of one process share them."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def versions() -> str:
    import flax
    import jaxlib
    return "jax {} (jaxlib {}, flax {}, optax {})".format(
        jax.__version__, jaxlib.__version__, flax.__version__, optax.__version__)


def setup(spec: RunSpec, member: Optional[Member] = None, xla_flags_added=()) -> Trainer:
    if spec.data_only:  # the input pipeline alone (data.py)
        from .data import data_only
        return data_only(spec, member or Member())
    return JaxTrainer(spec, member or Member(), list(xla_flags_added))
