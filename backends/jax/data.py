"""JAX's input pipeline for --data DIR: the JPEG folder itself (DATA_FORMAT None), decoded on
the GPU's JPEG engines (decode=hw, hwfeed.py: the default where it works) or with Pillow in Grain
worker processes (grain_loader.py; loader=threads: a thread pool, loader.py), each batch sharded
onto the devices ahead of the step. DALI (pipeline=dali) is backends/pipelines/dali.py.

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
from typing import Any, Dict

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .. import dataset as ds
from .. import options
from ..pipelines import cpudecode, feed
from ..pipelines import nvdecode as nvd
from ..protocol import RunSpec, Unsupported
from . import OPTIONS
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


def make_feed(spec: RunSpec, runtime: JaxRuntime) -> Feed:
    """This process's pipeline: its shard of spec.data's files (every process_count-th), batches
    of spec.batch_size per local device of the runtime's mesh; loader_workers threads per local
    device."""
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
    per_device, source = ds.loader_workers(spec, opt("loader_workers"),
                                           local if pinned(spec, member) else None)
    depth = opt("device_prefetch")
    first = [d for d in mesh.devices.flat if d.process_index == rank][0]
    if opt("pipeline") == "dali":
        decode, why = "dali", "--option pipeline=dali (decode={} not used)".format(opt("decode"))
    else:
        decode, why = nvd.resolve(opt("decode"), spec.device == "cuda",
                                  getattr(first, "local_hardware_id", first.id), files[0][0],
                                  api=opt("nvimgcodec_api"))
    if decode == "hw" and opt("loader_workers") is None and per_device > BYTE_READERS:
        per_device, source = BYTE_READERS, "{} byte readers per device (decode=hw; {})".format(
            BYTE_READERS, source)
    workers = (per_device * local, source if local == 1 else
               "{} x {} devices (one pool per process)".format(source, local))
    feeder = ds.hw_feeder_settings(opt) if decode == "hw" and spec.device == "cuda" else {}
    split = None
    if decode == "hw":  # CPU decoders beside the engines: the process's cores less two
        processes = opt("cpu_decoders")
        if processes is None:
            processes = cpudecode.default_processes(ds.available_cores())
        split = (processes, opt("cpu_share"), spec.image_size if opt("cpu_draft") else 0)
    source, pipeline, extra = _source(decode, opt("loader"), files, spec, mesh, workers[0], rank,
                                      feeder.get("feeder_priority") == "high",
                                      opt("nvimgcodec_api"), split)
    extra.update(feeder)

    def settings(tally: ds.Tally) -> Dict[str, Any]:
        out = ds.settings(spec, prepared, tally, pipeline=pipeline,
                          data_format="folder (the JPEG files)", workers=workers,
                          ranks=processes, device_prefetch=depth, host_prefetch=HOST_PREFETCH,
                          shard_images=len(files), process_batch=spec.batch_size * local,
                          decode=decode, decode_why=why, **extra)
        out.update(source.describe() if hasattr(source, "describe") else {})
        if hasattr(source, "failed"):
            out["decode_error_files"] = [files[i][0] for i in source.failed]
        return out
    return Feed(source, depth, settings)


def _source(decode: str, loader: str, files, spec: RunSpec, mesh: Mesh, workers: int, rank: int,
            high: bool = False, api: str = "c", split=None):
    """(the feeder's source, the pipeline's description, settings) for the decode that runs;
    split (decode=hw): (CPU decoders, their fixed share or None, draft size)."""
    batch, seed = spec.batch_size * len(mesh.local_devices), spec.seed + rank
    sharding = NamedSharding(mesh, P(AXIS))
    if decode == "dali":
        return _dali(files, spec, mesh, workers, seed, sharding)
    if decode == "hw":
        from . import hwfeed
        if loader == "threads":
            host = hwfeed.ByteLoader(files, batch, spec.image_size, seed, workers, HOST_PREFETCH)
        else:
            host = _grain(files, batch, spec.image_size, seed, workers, True)
        processes, share, draft = split or (0, None, 0)
        return (hwfeed.HwSource(host, mesh, spec.batch_size, spec.image_size, high=high,
                                api=api, cpu_decoders=processes, share=share, draft=draft),
                hwfeed.PIPELINE.format("threads" if loader == "threads" else "Grain worker processes"),
                {"loader": "threads (file bytes)" if loader == "threads" else
                 "grain {} (file bytes)".format(host.version)})
    if loader == "threads":
        host = HostLoader(files, batch, spec.image_size, seed, workers, HOST_PREFETCH)
        return HostSource(host, sharding), PIPELINE, {"loader": "threads"}
    host = _grain(files, batch, spec.image_size, seed, workers, False)
    return HostSource(host, sharding), GRAIN_PIPELINE, {"loader": "grain " + host.version}


def _grain(files, batch: int, size: int, seed: int, workers: int, encoded: bool):
    """Grain's worker processes: file bytes and crop boxes (decode=hw) or Pillow's pixels."""
    from . import grain_loader as gl
    try:
        return gl.GrainLoader(files, batch, size, seed, workers, HOST_PREFETCH,
                              gl.encoded if encoded else gl.pixels)
    except ImportError as exc:
        raise Unsupported("loader=grain: grain does not import here ({}); install it or give "
                          "--option loader=threads".format(exc)) from None


def _dali(files, spec: RunSpec, mesh: Mesh, workers: int, seed: int, sharding):
    """pipeline=dali: one DALI pipeline per local device over its share of the process's files."""
    from ..pipelines import dali
    devices = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
    gpu, k = spec.device == "cuda", len(devices)
    threads = max(1, workers // k)
    pipes = [dali.build(ds.shard(files, i, k), spec.batch_size, spec.image_size, seed + i, threads,
                        getattr(d, "local_hardware_id", d.id) if gpu else None)
             for i, d in enumerate(devices)]
    shape = (spec.batch_size * mesh.devices.size, spec.image_size, spec.image_size, 3)
    return (dali.JaxSource(pipes, devices, sharding, shape), dali.pipeline_text(gpu),
            dali.describe(gpu, k, threads))
