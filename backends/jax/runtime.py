"""JAX's runtime: join the other processes (jax.distributed), the job's devices and their mesh,
barrier, close. Imported by train.py, step.py and data.py, after the backend's prepare() set
XLA_FLAGS and JAX_PLATFORMS (flags.py: jax reads them once)."""
import inspect
from typing import Any, Dict, List, Optional

import jax
import numpy as np
from jax.sharding import Mesh

from .. import phases, policy, world
from ..contract.rules import visible_gpus
from ..machine import cpu_model
from ..protocol import RunSpec, Unsupported
from ..trainer import Runtime
from ..world import World
from . import compile_cache, flags

AXIS = "data"  # the mesh's one axis: the batch is split along it, one slice per device
SHUTDOWN_TIMEOUT_S = 60


def join(spec: RunSpec, member: World) -> None:
    """Join the other processes of the job through jax.distributed (no-op for one process)."""
    if member.processes == 1:
        return
    kwargs = {}  # type: Dict[str, Any]
    if member.coordinator:
        kwargs = dict(coordinator_address=member.coordinator, num_processes=member.processes,
                      process_id=member.rank)
    if spec.device == "cuda":
        k = flags.devices_per_process(spec, member)
        visible = visible_gpus() or []
        # a launcher that gives each task its own GPUs makes them devices 0..k-1
        first = 0 if len(visible) == k else member.local_rank * k
        kwargs["local_device_ids"] = list(range(first, first + k))
    if "shutdown_timeout_seconds" in inspect.signature(jax.distributed.initialize).parameters:
        # a process whose run failed waits this long for the others at shutdown (default 300 s)
        kwargs["shutdown_timeout_seconds"] = SHUTDOWN_TIMEOUT_S
    jax.distributed.initialize(**kwargs)  # without a coordinator: jax's own Slurm detection


def devices(spec: RunSpec, member: World) -> List[Any]:
    """Every device of the job (all processes), checked against the spec."""
    if spec.device == "cuda":
        policy.check_gpu(jax.default_backend() in ("gpu", "cuda"), "jax " + jax.__version__,
                         " (backend {})".format(jax.default_backend()))
    found = jax.devices()
    if member.processes == 1:  # one process takes the first N devices it sees
        if len(found) < spec.world_size:
            raise Unsupported("spec asks for {} {}s, jax {} sees {}".format(
                spec.world_size, "GPU" if spec.device == "cuda" else "CPU device",
                jax.__version__, len(found)))
        return found[:spec.world_size]
    policy.check_workers(spec.world_size, len(found), "jax.distributed ({} processes)".format(
        member.processes))
    return found


def versions() -> str:
    import flax
    import jaxlib
    import optax
    return "jax {} (jaxlib {}, flax {}, optax {})".format(
        jax.__version__, jaxlib.__version__, flax.__version__, optax.__version__)


class JaxRuntime(Runtime):
    def __init__(self, spec: RunSpec, member: Optional[World] = None):
        self.spec, self.member = spec, member or world.world()
        compile_cache.watch(jax.monitoring)  # before anything is compiled
        join(spec, self.member)
        self.rank = jax.process_index()
        self.devices = devices(spec, self.member)
        phases.mark("devices_ready")  # the step is compiled ahead of time: under model_built
        self.mesh = Mesh(np.array(self.devices), (AXIS,))
        self.distribution = "jax-spmd" if len(self.devices) > 1 else "single"
        self.xla_flags_added = list(flags.ADDED)

    def barrier(self) -> None:
        """Every process of the job waits here (nothing to wait for with one process)."""
        if self.member.processes > 1:
            from jax.experimental import multihost_utils
            multihost_utils.sync_global_devices("compare-barrier")

    def describe(self) -> Dict[str, Any]:
        return {"framework_version": versions(),
                "device_name": self.devices[0].device_kind if self.spec.device == "cuda"
                else cpu_model()}

    def close(self) -> None:
        if self.member.processes > 1:
            jax.distributed.shutdown()


def start(spec: RunSpec) -> JaxRuntime:
    return JaxRuntime(spec)
