"""JAX's input pipeline for --data DIR: the JPEG folder itself (DATA_FORMAT None), decoded by a
thread pool with Pillow (loader.py), each batch sharded onto the devices ahead of the step.

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
import queue
import threading
from typing import Any, Dict

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .. import dataset as ds
from .. import options, phases
from ..protocol import RunSpec
from . import OPTIONS, step
from .launch import Member, pinned
from .loader import HostLoader

HOST_PREFETCH = 2  # host batches the loader threads decode ahead of the feeder
PIPELINE = ("thread pool (Pillow decode, crop, flip) -> uint8 NHWC -> "
            "jax.make_array_from_process_local_data sharded over the mesh, normalised on the "
            "devices, prefetched by a feeder thread")


def normaliser(sharding):
    """uint8 NHWC -> float32 normalised with ImageNet's mean and std, in the batch's sharding."""
    shift = np.array(ds.MEAN, np.float32) * 255
    scale = 1 / (np.array(ds.STD, np.float32) * 255)
    return jax.jit(lambda x: (x.astype(jnp.float32) - shift) * scale, out_shardings=sharding)


class Feed:
    """Batches on the devices: next() -> (images, labels), global arrays sharded over the mesh;
    sync() waits for the last one handed out. settings(tally) -> the data settings recorded."""

    def __init__(self, loader: HostLoader, sharding: NamedSharding, depth: int, settings):
        self.loader, self.sharding, self.settings = loader, sharding, settings
        self.normalise = normaliser(sharding)
        self.tally = ds.Tally()
        self.last = None
        self.queue = queue.Queue(maxsize=depth)  # type: queue.Queue
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._feed, name="compare-feeder", daemon=True)
        self.thread.start()

    def _put(self, item) -> None:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _feed(self) -> None:
        try:
            while not self.stop.is_set():
                images, labels, skipped = self.loader.next()
                x, y = jax.make_array_from_process_local_data(self.sharding, (images, labels))
                counts = (len(labels), (labels.min(), labels.max()), skipped)  # host copy: no sync
                self._put((self.normalise(x), y, counts))
        except BaseException as exc:  # handed to the training thread, which raises it
            self._put(exc)

    def next(self):
        item = self.queue.get()
        if isinstance(item, BaseException):
            raise RuntimeError("input pipeline: {}: {}".format(type(item).__name__, item))
        images, labels, counts = item
        self.tally.add(*counts)
        self.last = (images, labels)
        return images, labels

    def sync(self) -> None:
        if self.last is not None:
            jax.block_until_ready(self.last)

    def describe(self) -> Dict[str, Any]:
        return self.settings(self.tally)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)  # it ends after the batch it is decoding
        self.loader.close()


def make_feed(spec: RunSpec, mesh: Mesh, member: Member) -> Feed:
    """This process's pipeline: its shard of spec.data's files (every process_count-th), batches
    of spec.batch_size per local device of the mesh; loader_workers threads per local device."""
    def opt(key):
        return options.value(OPTIONS, spec.options, key)
    prepared = ds.Prepared.find(spec.data)
    prepared.check_labels(spec.num_classes)
    rank, processes = jax.process_index(), jax.process_count()
    files = [(os.path.join(prepared.root, rel), label)
             for rel, label in ds.shard(prepared.files(), rank, processes)]
    local = len(mesh.local_devices)
    # a process pinned to its share of the cores shares them with its own devices only
    per_device, source = ds.loader_workers(spec, opt("loader_workers"),
                                           local if pinned(spec, member) else None)
    workers = (per_device * local, source if local == 1 else
               "{} x {} devices (one pool per process)".format(source, local))
    depth = opt("device_prefetch")
    loader = HostLoader(files, spec.batch_size * local, spec.image_size, spec.seed + rank,
                        workers[0], HOST_PREFETCH)

    def settings(tally: ds.Tally) -> Dict[str, Any]:
        return ds.settings(spec, prepared, tally, pipeline=PIPELINE,
                           data_format="folder (the JPEG files)", workers=workers,
                           ranks=processes, device_prefetch=depth, host_prefetch=HOST_PREFETCH,
                           shard_images=len(files), process_batch=spec.batch_size * local)
    return Feed(loader, NamedSharding(mesh, P(step.AXIS)), depth, settings)


def data_only(spec: RunSpec, member: Member) -> ds.DataOnly:
    """--data-only: the pipeline alone, onto the devices and processes a training run would use."""
    from ..harness import cpu_name
    from .train import _devices, barrier, join, versions
    join(spec, member)
    devices = _devices(spec, member)
    phases.mark("devices_ready")
    feed = make_feed(spec, Mesh(np.array(devices), (step.AXIS,)), member)
    several = member.processes > 1
    return ds.DataOnly(
        feed, describe=lambda: {"framework_version": versions(),
                                "device_name": devices[0].device_kind if spec.device == "cuda"
                                else cpu_name()},
        sync=feed.sync, barrier=lambda: barrier(member), rank=jax.process_index(),
        distribution="jax-spmd" if len(devices) > 1 else "single",
        close=jax.distributed.shutdown if several else (lambda: None))
