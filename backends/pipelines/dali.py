"""DALI as the input pipeline (--option pipeline=dali): the graph every backend with it builds.

One DALI pipeline per device: `readers.file` over the rank's shard of the JPEG folder (shuffled),
`decoders.image_random_crop` (only the crop window is decoded; on a GPU the "mixed" decoder with
hw_decoder_load 0.99, nearly everything on the JPEG engines, as NVIDIA's MLPerf ResNet-50 entries
run it), `resize` to the image size, `crop_mirror_normalize` (flip with probability 1/2, ImageNet
mean and std, float32 HWC). Without a GPU the same graph runs on DALI's CPU operators
(device_id=None): that is what CI tests. Each backend hands the batches to its framework itself
(caffe2_torch/dali.py, jax/dali.py): by DLPack on the GPU, copied once on the consumer's stream
(DALI recycles its output buffers).

Standard library only at import time; nvidia.dali and the framework are imported inside
functions. Where DALI does not import, the run is a recorded `unsupported` with the reason.
"""
from typing import Any, Dict, List, Optional, Tuple

from .. import dataset as ds
from ..protocol import Unsupported

HW_DECODER_LOAD = 0.99  # share of the JPEGs the mixed decoder sends to the JPEG engines
PREFETCH = 2  # DALI's own prefetch queue depth


def require() -> Any:
    """The nvidia.dali module, or Unsupported with the reason it does not import."""
    try:
        import nvidia.dali as dali
    except Exception as exc:
        raise Unsupported("pipeline=dali: DALI (nvidia.dali, PyPI nvidia-dali-cuda130) does not "
                          "import here: {}: {}".format(type(exc).__name__, exc)) from None
    return dali


def build(files: List[Tuple[str, int]], batch: int, size: int, seed: int, threads: int,
          device_id: Optional[int]):
    """A built DALI pipeline over `files` [(path, label)]; device_id None: CPU operators only."""
    require()
    from nvidia.dali import fn, pipeline_def, types
    gpu = device_id is not None

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=device_id, seed=seed,
                  prefetch_queue_depth=PREFETCH)
    def graph():
        jpegs, labels = fn.readers.file(files=[f for f, _ in files], labels=[lb for _, lb in files],
                                        random_shuffle=True, name="reader")
        where = dict(device="mixed", hw_decoder_load=HW_DECODER_LOAD) if gpu else dict(device="cpu")
        images = fn.decoders.image_random_crop(
            jpegs, output_type=types.RGB, random_area=list(ds.AREA),
            random_aspect_ratio=list(ds.RATIO), num_attempts=10, **where)
        images = fn.resize(images, resize_x=size, resize_y=size, interp_type=types.INTERP_LINEAR)
        images = fn.crop_mirror_normalize(
            images, dtype=types.FLOAT, output_layout="HWC", mean=[255 * m for m in ds.MEAN],
            std=[255 * s for s in ds.STD], mirror=fn.random.coin_flip(probability=0.5))
        return images, labels
    pipe = graph()
    pipe.build()
    return pipe


def describe(gpu: bool, pipelines: int, threads: int) -> Dict[str, Any]:
    """The settings a DALI run records beside the common data settings."""
    import nvidia.dali as dali
    return {"dali_version": dali.__version__, "dali_pipelines": pipelines, "dali_threads": threads,
            "hw_decoder_load": HW_DECODER_LOAD if gpu else None, "dali_prefetch": PREFETCH}


PIPELINE = ("DALI {}: readers.file -> decoders.image_random_crop ({}) -> resize -> "
            "crop_mirror_normalize, one pipeline per device")


def pipeline_text(gpu: bool) -> str:
    return PIPELINE.format("on the GPU" if gpu else "CPU-only",
                           "mixed: JPEG engines, hw_decoder_load {}".format(HW_DECODER_LOAD)
                           if gpu else "CPU")


def run(pipe):
    """One batch: (images TensorList, labels as a flat int list)."""
    images, labels = pipe.run()
    return images, [int(v) for v in labels.as_array().reshape(-1)]
