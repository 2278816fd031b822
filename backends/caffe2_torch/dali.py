"""PyTorch's pipeline=dali (its row in PIPELINES): the DALI graph every backend builds
(backends/pipelines/dali.py), its batches handed to torch: by DLPack on the GPU, copied once on
the feeder's stream (DALI recycles its buffers), as NCHW in the model's layout.
"""
from typing import Tuple

import torch

from ..pipelines import dali
from ..protocol import RunSpec
from .data import Made


class Batches:
    """An endless iterator for data.Feed: (images, labels, 0) per batch, images a DALI TensorList
    that prepare() below turns into the step's tensor."""

    def __init__(self, pipe):
        self.pipe = pipe

    def __iter__(self):
        return self

    def __next__(self):
        images, labels = dali.run(self.pipe)
        return images, torch.tensor(labels), 0

    def buffered(self) -> int:
        return dali.PREFETCH


def prepare_on(device: torch.device, channels_last: bool):
    """prepare(batch) for data.Feed: DALI's float32 NHWC -> NCHW (channels_last strides) on the
    device, copied once on the current (the feeder's) stream."""
    def prepare(batch):
        images, labels = batch[0], batch[1]
        if device.type == "cuda":
            x = torch.from_dlpack(images.as_tensor()).clone()  # DALI reuses its buffer
        else:
            x = torch.from_numpy(images.as_array().copy())
        x = x.permute(0, 3, 1, 2)
        labels = labels.pin_memory() if device.type == "cuda" else labels
        return (x if channels_last else x.contiguous()), labels.to(device, non_blocking=True), 0
    return prepare


def make(spec: RunSpec, opt, device: torch.device, files, workers: Tuple[int, str], seed: int,
         channels_last: bool) -> Made:
    """pipeline=dali: DALI decodes (the mixed decoder on a GPU, CPU operators without one)."""
    gpu = device.type == "cuda"
    pipe = dali.build(files, spec.batch_size, spec.image_size, seed, workers[0],
                      device.index if gpu else None)
    return Made(Batches(pipe), prepare_on(device, channels_last), dali.pipeline_text(gpu),
                dali.describe(gpu, 1, workers[0]), workers)
