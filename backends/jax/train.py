"""JAX (Flax) trainer for the harness: precision, state, the jitted step, on the runtime's
devices and processes (runtime.py).

Imported only inside the backend's environment, after flags.prepare() set XLA_FLAGS and
JAX_PLATFORMS (jax reads them once, at import).
"""
import hashlib
import os
import re
import time
from collections import Counter
from typing import Any, Dict, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from .. import options, policy
from ..protocol import RunSpec
from ..trainer import RuntimeTrainer, Trainer
from . import OPTIONS, step
from .data import make_feed
from .models import build, count
from .runtime import AXIS, JaxRuntime, start

# precision -> (compute dtype, jax_default_matmul_precision, loss scaling); params stay float32.
# "highest" keeps float32 matmuls and convolutions in true FP32 (no TF32 on the GPU);
# "tensorfloat32" lets them use TF32; low-precision compute does its matmuls in its own dtype.
PRECISIONS = {"fp32": (jnp.float32, "highest", None),
              "tf32": (jnp.float32, "tensorfloat32", None),
              "bf16": (jnp.bfloat16, None, None),
              "fp16": (jnp.float16, None, "dynamic")}


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
    policy.check_tf32_override(precision)
    if scaling and static_scale:
        scaling = "static {:g}".format(static_scale)
    jax.config.update("jax_default_matmul_precision", matmul)
    return {"dtype": dtype, "matmul_precision": matmul or "default", "loss_scaling": scaling,
            "static_scale": static_scale if scaling and static_scale else None}


class JaxTrainer(RuntimeTrainer):
    def __init__(self, spec: RunSpec, runtime: JaxRuntime):
        self.spec, self.runtime, self.member = spec, runtime, runtime.member
        self.xla_flags_added = runtime.xla_flags_added
        self.sync_bn = options.value(OPTIONS, spec.options, "sync_bn")
        self.donate = options.value(OPTIONS, spec.options, "donate")
        self.flat = options.value(OPTIONS, spec.options, "flat_allreduce")
        self.rank, self.devices, self.mesh = runtime.rank, runtime.devices, runtime.mesh
        self.world = len(self.devices)
        self.precision = resolve_precision(spec.precision, spec.device, self.devices[0],
                                           options.value(OPTIONS, spec.options, "loss_scale"))
        self.distribution = runtime.distribution
        global_bn = self.sync_bn and self.world > 1
        self.model = build(spec.model, spec.num_classes, self.precision["dtype"],
                           AXIS if global_bn else None)
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
        self._losses = None  # the last step's per-device losses: what sync() waits for
        self.feed = None
        if spec.data != "synthetic":  # real data: each step takes the next prefetched batch
            self.feed = make_feed(spec, runtime)

    def _batch(self, key):
        """The synthetic global batch, made on the devices once, split along the mesh axis."""
        spec = self.spec
        sharding = NamedSharding(self.mesh, P(AXIS))
        shape = (spec.global_batch, spec.image_size, spec.image_size, 3)  # NHWC

        def make(key):
            k_images, k_labels = jax.random.split(key)
            return (jax.random.normal(k_images, shape, jnp.float32),
                    jax.random.randint(k_labels, (spec.global_batch,), 0, spec.num_classes))
        return jax.jit(make, out_shardings=(sharding, sharding))(key)

    def step(self) -> None:
        if self.feed is not None:
            self.images, self.labels = self.feed.next()
        self.state, self._losses = self._step(self.state, self.images, self.labels)  # async

    def sync(self) -> None:
        # every output of one execution is ready at once (one completion event per device), and a
        # device runs its steps in order: the last losses stand for the whole queue. Waiting on
        # the state's ~430 arrays instead costs a walk over them inside each timed window
        # (1.6 ms on a 2-core VM, bench/jax_parity.sh's note)
        if self._losses is not None:
            jax.block_until_ready(self._losses)

    def loss(self) -> float:
        """Mean loss over this process's devices (each one's loss on its own slice)."""
        if self._losses is None:
            return float("nan")
        shards = self._losses.addressable_shards
        return float(np.mean([np.asarray(s.data) for s in shards]))

    def describe(self) -> Dict[str, Any]:
        return self.record(self.settings())

    def settings(self) -> Dict[str, Any]:
        spec, cuda = self.spec, self.spec.device == "cuda"
        program = self._step.as_text()  # the compiled step's text: megabytes, read once
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
            processes=self.member.processes, process_launcher=self.member.kind,
            devices_per_process=self.world // self.member.processes,
            allreduce_ops=allreduce_ops(program), **program_fingerprint(program),
            platform_version=getattr(self.devices[0].client, "platform_version", None),
            donate=self.donate, compile_s=round(self.compile_s, 2),
            xla_flags=os.environ.get("XLA_FLAGS", ""), xla_flags_added=self.xla_flags_added)
        if not cuda and policy.cpu_precision_note(spec.precision, "cpu"):
            out["note"] = policy.cpu_precision_note(spec.precision, "cpu", who="XLA")
        return out


def allreduce_ops(compiled_hlo: str) -> int:
    """All-reduce instructions in the compiled step, after XLA combined them: one (or a few
    buckets) for the gradients with per-device BN; SyncBN adds some in every BN layer."""
    return len(re.findall(r" all-reduce(?:-start)?\(", compiled_hlo))


def program_fingerprint(compiled_hlo: str) -> Dict[str, str]:
    """A hash of the compiled step (its optimized HLO holds the algorithms XLA's autotuning
    picked) and the cuDNN convolution algorithm ids it uses: two runs of one cell whose figures
    differ can be told apart as two programs, or one program run differently."""
    algorithms = Counter(re.findall(r'"algo_id":"?(\d+)', compiled_hlo))
    program = _without_debug_info(compiled_hlo)
    return {"program_fingerprint": hashlib.sha256(program.encode()).hexdigest()[:16],
            "conv_algorithms": ",".join("{}x{}".format(k, n) for k, n in sorted(algorithms.items()))}


def _without_debug_info(hlo: str) -> str:
    """The HLO text without what only points back at the Python source (the file, function and
    stack-frame tables, each instruction's metadata): an executable loaded from the persistent
    compilation cache lists those in another order, the program being the same."""
    lines = hlo.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(("%", "ENTRY"))), 0)
    return re.sub(r",? metadata=\{[^}]*\}", "", "\n".join(lines[:1] + lines[start:]))


def _threads() -> int:
    """CPU threads this process's XLA pool has: the cores it may run on (flags.prepare pins
    each of several local processes to its share); N devices of one process share them."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def setup(spec: RunSpec, runtime: Optional[JaxRuntime] = None) -> Trainer:
    return JaxTrainer(spec, runtime or start(spec))
