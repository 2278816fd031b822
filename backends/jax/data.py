"""JAX's input pipeline for --data DIR: the JPEG folder itself (DATA_FORMAT None), decoded on
the GPU's JPEG engines (decode=hw, hwfeed.py: the default where it works) or with Pillow in Grain
worker processes (grain_loader.py; loader=threads: a thread pool, loader.py), each batch sharded
onto the devices ahead of the step: the rows of PIPELINES (__init__.py), made by the functions
of the same names here (pipeline=dali: dali.py).

A feeder thread takes each host batch of this process (uint8 NHWC, its local devices' share of
the global batch) and makes it one global array sharded along the mesh's batch axis
(`jax.make_array_from_process_local_data`: each local device gets its slice; with several
jax.distributed processes each one reads its own shard of the files and fills its own devices),
then normalises it on the devices (a small jitted program: uint8 crosses to the device, 4x fewer
bytes than float32), `device_prefetch` batches ahead. jax dispatches asynchronously: the step
that takes a batch waits for its transfer on the device, never on the host; the labels' range
is read from the host copy.
"""
import os
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .. import dataset as ds
from .. import options, pipelines
from ..pipelines import cpudecode, feed
from ..protocol import RunSpec, Unsupported
from . import OPTIONS, PIPELINES
from .flags import pinned
from .loader import HostLoader
from .runtime import AXIS, JaxRuntime

HOST_PREFETCH = 2  # host batches the loader threads decode ahead of the feeder
# decode=hw's loader workers per device by default: they only read bytes (~130 us of CPU an image
# on the 2-core VM, so one keeps up with ~7,000 img/s), and each Grain worker holds 2 x 2 + 2
# batches of ~28 MB in shared memory: 16 of them per GPU would take gigabytes of /dev/shm
BYTE_READERS = 4
GRAIN_PIPELINE = ("Grain worker processes (Pillow decode, crop, flip) -> uint8 NHWC -> "
                  "jax.make_array_from_process_local_data sharded over the mesh, normalised on "
                  "the devices, prefetched by a feeder thread")
PIPELINE = ("thread pool (Pillow decode, crop, flip) -> uint8 NHWC -> "
            "jax.make_array_from_process_local_data sharded over the mesh, normalised on the "
            "devices, prefetched by a feeder thread")


def normaliser(sharding):
    """uint8 NHWC -> float32 normalised with ImageNet's mean and std, in the batch's sharding."""
    shift = np.array(ds.MEAN, np.float32) * 255
    scale = 1 / (np.array(ds.STD, np.float32) * 255)
    return jax.jit(lambda x: (x.astype(jnp.float32) - shift) * scale, out_shardings=sharding)


class HostSource:
    """CPU decode: the loader's uint8 host batches as normalised global arrays on the devices.
    next() -> (images, labels, (images, label range, files skipped)); close()."""

    def __init__(self, loader, sharding: NamedSharding):
        self.loader, self.sharding = loader, sharding
        self.normalise = normaliser(sharding)

    def next(self):
        images, labels, skipped = self.loader.next()
        x, y = jax.make_array_from_process_local_data(self.sharding, (images, labels))
        counts = (len(labels), (labels.min(), labels.max()), skipped)  # host copy: no sync
        return self.normalise(x), y, counts

    def buffered(self) -> int:
        return self.loader.buffered()

    def close(self) -> None:
        self.loader.close()


class Feed(feed.Feed):
    """Batches on the devices: next() -> (images, labels), global arrays sharded over the mesh,
    made by a feeder thread `depth` batches ahead; sync() waits for the last one handed out.
    source: HostSource or hwfeed.HwSource (next() -> images, labels, counts; close())."""

    def __init__(self, source, depth: int, settings):
        super().__init__(settings)
        self.source, self.last = source, None
        self.ahead = feed.Prefetcher(source.next, depth)

    def next(self):
        images, labels, counts = self.ahead.get()
        self.tally.add(*counts)
        self.last = (images, labels)
        return images, labels

    def sync(self) -> None:
        if self.last is not None:
            jax.block_until_ready(self.last)

    def buffered(self) -> int:
        """Batches that can be ready before the first is asked for (--data-only drains them):
        the source's, those on the devices, and the one the feeder holds."""
        return self.source.buffered() + self.ahead.queue.maxsize + 1

    def close(self) -> None:
        self.ahead.close(timeout=60.0)  # it ends after the batch it is decoding
        self.source.close()


class Made(NamedTuple):
    """What a pipeline's maker returns (the makers named in PIPELINES): the feeder's source, the
    pipeline's description, its extra settings, the loader workers of this process."""
    source: Any
    pipeline: str
    extra: Dict[str, Any]
    workers: Tuple[int, str]


class Shard(NamedTuple):
    """What every maker is given: this process's files, batch (its devices' share of the global
    one) and seed, the mesh, and the loader workers per device (count, where it came from)."""
    files: List[Tuple[str, int]]
    batch: int
    seed: int
    mesh: Mesh
    per_device: Tuple[int, str]

    def workers(self, per_device: Optional[Tuple[int, str]] = None) -> Tuple[int, str]:
        """The process's loader workers: per device times its devices, and where that came from."""
        (count, source), local = per_device or self.per_device, len(self.mesh.local_devices)
        return count * local, source if local == 1 else \
            "{} x {} devices (one pool per process)".format(source, local)


def make_feed(spec: RunSpec, runtime: JaxRuntime) -> Feed:
    """This process's pipeline: its shard of spec.data's files (every process_count-th), batches
    of spec.batch_size per local device of the runtime's mesh; loader_workers threads per local
    device; the row of PIPELINES that pipelines.choose picks."""
    def opt(key):
        return options.value(OPTIONS, spec.options, key)
    mesh, member = runtime.mesh, runtime.member
    prepared = ds.Prepared.find(spec.data)
    prepared.check_labels(spec.num_classes)
    rank, processes = jax.process_index(), jax.process_count()
    files = [(os.path.join(prepared.root, rel), label)
             for rel, label in ds.shard(prepared.files(), rank, processes)]
    local = len(mesh.local_devices)
    # a process pinned to its share of the cores shares them with its own devices only
    shard = Shard(files, spec.batch_size * local, spec.seed + rank, mesh, ds.loader_workers(
        spec, opt("loader_workers"), local if pinned(spec, member) else None))
    depth = opt("device_prefetch")
    first = [d for d in mesh.devices.flat if d.process_index == rank][0]
    row, why = pipelines.choose(PIPELINES, opt, spec.device == "cuda",
                                getattr(first, "local_hardware_id", first.id), files[0][0])
    made = pipelines.function(row.make)(spec, opt, shard)

    def settings(tally: ds.Tally) -> Dict[str, Any]:
        out = ds.settings(spec, prepared, tally, pipeline=made.pipeline,
                          data_format="folder (the JPEG files)", workers=made.workers,
                          ranks=processes, device_prefetch=depth, host_prefetch=HOST_PREFETCH,
                          shard_images=len(files), process_batch=shard.batch,
                          decode=row.name, decode_why=why, **made.extra)
        out.update(made.source.describe() if hasattr(made.source, "describe") else {})
        if hasattr(made.source, "failed"):
            out["decode_error_files"] = [files[i][0] for i in made.source.failed]
        return out
    return Feed(made.source, depth, settings)


def cpu(spec: RunSpec, opt, shard: Shard) -> Made:
    """decode=cpu: Pillow decodes in Grain's worker processes (loader=threads: a thread pool)."""
    workers = shard.workers()
    sharding = NamedSharding(shard.mesh, P(AXIS))
    if opt("loader") == "threads":
        host = HostLoader(shard.files, shard.batch, spec.image_size, shard.seed, workers[0],
                          HOST_PREFETCH)
        return Made(HostSource(host, sharding), PIPELINE, {"loader": "threads"}, workers)
    host = _grain(shard.files, shard.batch, spec.image_size, shard.seed, workers[0], False)
    return Made(HostSource(host, sharding), GRAIN_PIPELINE, {"loader": "grain " + host.version},
                workers)


def hw(spec: RunSpec, opt, shard: Shard) -> Made:
    """decode=hw: BYTE_READERS loader workers per device (unless loader_workers says otherwise)
    read bytes; the JPEG engines decode the crops, CPU decoders (the process's cores less two
    unless cpu_decoders says) a share of each batch (hwfeed.py)."""
    from . import hwfeed
    per_device = shard.per_device
    if opt("loader_workers") is None and per_device[0] > BYTE_READERS:
        per_device = (BYTE_READERS, "{} byte readers per device (decode=hw; {})".format(
            BYTE_READERS, per_device[1]))
    workers = shard.workers(per_device)
    feeder = feed.hw_feeder_settings(opt)
    processes = opt("cpu_decoders")
    if processes is None:
        processes = cpudecode.default_processes(ds.available_cores())
    if opt("loader") == "threads":
        host = hwfeed.ByteLoader(shard.files, shard.batch, spec.image_size, shard.seed,
                                 workers[0], HOST_PREFETCH)
    else:
        host = _grain(shard.files, shard.batch, spec.image_size, shard.seed, workers[0], True)
    source = hwfeed.HwSource(host, shard.mesh, spec.batch_size, spec.image_size,
                             high=feeder["feeder_priority"] == "high",
                             api=opt("nvimgcodec_api"), cpu_decoders=processes,
                             share=opt("cpu_share"),
                             draft=spec.image_size if opt("cpu_draft") else 0)
    threads = opt("loader") == "threads"
    return Made(source, hwfeed.PIPELINE.format("threads" if threads else "Grain worker processes"),
                dict({"loader": "threads (file bytes)" if threads else
                      "grain {} (file bytes)".format(host.version)}, **feeder), workers)


def _grain(files, batch: int, size: int, seed: int, workers: int, encoded: bool):
    """Grain's worker processes: file bytes and crop boxes (decode=hw) or Pillow's pixels."""
    from . import grain_loader as gl
    try:
        return gl.GrainLoader(files, batch, size, seed, workers, HOST_PREFETCH,
                              gl.encoded if encoded else gl.pixels)
    except ImportError as exc:
        raise Unsupported("loader=grain: grain does not import here ({}); install it or give "
                          "--option loader=threads".format(exc)) from None
