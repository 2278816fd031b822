"""JAX's pipeline=dali (its row in PIPELINES): one DALI graph per local device
(backends/pipelines/dali.py) over its share of the process's files, each batch made one global
array sharded over the mesh: by DLPack on a GPU (copied once: DALI recycles its buffers), by
device_put on the CPU.
"""
import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from .. import dataset as ds
from ..pipelines import dali
from ..protocol import RunSpec
from .data import Made, Shard
from .runtime import AXIS


class Source:
    """The feeder's source: one pipeline per local device; next() -> (images, labels, counts)
    as global arrays sharded over the mesh (data.Feed)."""

    def __init__(self, pipes, devices, sharding, global_shape):
        self.pipes, self.devices, self.sharding, self.global_shape = pipes, devices, sharding, global_shape

    def next(self):
        parts, labels = [], []
        for pipe, device in zip(self.pipes, self.devices):
            images, part = dali.run(pipe)
            if device.platform == "cpu":
                parts.append(jax.device_put(images.as_array(), device))
            else:
                parts.append(jax.dlpack.from_dlpack(images.as_tensor()).copy())
            labels += part
        x = jax.make_array_from_single_device_arrays(self.global_shape, self.sharding, parts)
        y = jax.make_array_from_process_local_data(self.sharding, np.array(labels, np.int32))
        return x, y, (len(labels), (min(labels), max(labels)), 0)

    def buffered(self) -> int:
        return dali.PREFETCH

    def close(self) -> None:
        self.pipes = []


def make(spec: RunSpec, opt, shard: Shard) -> Made:
    """pipeline=dali: one DALI pipeline per local device over its share of the process's files,
    the process's loader workers shared among them as DALI threads."""
    mesh, workers = shard.mesh, shard.workers()
    devices = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
    gpu, k = spec.device == "cuda", len(devices)
    threads = max(1, workers[0] // k)
    pipes = [dali.build(ds.shard(shard.files, i, k), spec.batch_size, spec.image_size,
                        shard.seed + i, threads, getattr(d, "local_hardware_id", d.id) if gpu else None)
             for i, d in enumerate(devices)]
    shape = (spec.batch_size * mesh.devices.size, spec.image_size, spec.image_size, 3)
    source = Source(pipes, devices, NamedSharding(mesh, P(AXIS)), shape)
    return Made(source, dali.pipeline_text(gpu), dali.describe(gpu, k, threads), workers)
