"""Hardware JPEG decode (--option decode=hw) with nvImageCodec, shared by PyTorch and JAX.

Loader workers read each file's bytes, its size from the JPEG header, and draw the random-resized
crop and the flip (read_encoded). The feeder then decodes only the crop window of every image of
the batch (region-of-interest decode) in one call on the GPU's JPEG engines (NVJPG, not the SMs)
straight into slices of one flat uint8 buffer that the framework allocated on the device: the
pixels never touch the host and are never copied. The framework then resizes all crops to the
image size with one gather (its own code) and normalises them.

One decoder per device and process, created once and reused (a decoder created after another
one was dropped failed on the H200s: measured-facts.md). Standard library only at import time;
nvImageCodec (`nvidia-nvimgcodec-cu13` + `nvidia-nvjpeg`) is imported inside functions, and
whatever keeps it from running here becomes a reason, recorded with the result.
"""
import atexit
import ctypes
import os
import random
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import dataset as ds
from . import NotAvailable

MIN_CAPACITY = 1 << 20  # a flat buffer holds at least 1 MiB
# the extension modules loaded: JPEG only (nvJPEG: the engines; libjpeg-turbo: the CPU backend)
JPEG_EXTENSIONS = ("libnvjpeg_ext.", "libjpeg_turbo_ext.")
_DECODERS = {}  # type: Dict[Tuple[Optional[int], str, str], Any]
_FAILED = {}  # type: Dict[Tuple[Optional[int], str, str], str]


def read_encoded(path: str, size: int, rng: random.Random) -> Tuple[bytes, List[int]]:
    """A loader worker's share: the file's bytes and [x, y, w, h, flip, width, height] of its
    random-resized crop, drawn by the same rule as the CPU path (dataset.random_resized_crop)."""
    with open(path, "rb") as f:
        data = f.read()
    found = ds.jpeg_size(data)
    if found is None:
        raise ValueError("{}: no JPEG frame header".format(path))
    x, y, w, h = ds.random_resized_crop(found[0], found[1], rng)
    return data, [x, y, w, h, int(rng.random() < 0.5), found[0], found[1]]


def capacity(total: int) -> int:
    """The flat buffer's size for `total` bytes of crops: the next power of two, so that a
    framework that compiles per shape (JAX) sees a handful of sizes, not one per batch."""
    cap = MIN_CAPACITY
    while cap < total:
        cap *= 2
    return cap


def layout(boxes: Sequence[Sequence[int]]) -> Tuple[List[int], int]:
    """Where each crop (x, y, w, h, ...) begins in the flat buffer (HWC, 3 bytes a pixel), and
    the bytes of all of them."""
    offsets, at = [], 0
    for box in boxes:
        offsets.append(at)
        at += int(box[2]) * int(box[3]) * 3
    return offsets, at


class Flat:
    """A batch's JPEGs one after another in one host buffer (the loaders' flat batch): the
    buffer's owner and address, each JPEG's offset in it and length. The decoders take the
    addresses from it: no Python object per image (numpy's __array_interface__ alone costs
    ~10 us a call on the 2-core VM). Slices are Flats of the same buffer; flat[i] is a numpy
    view of JPEG i (for nvImageCodec's Python binding)."""

    def __init__(self, owner: Any, address: int, lengths: Sequence[int],
                 offsets: Optional[Sequence[int]] = None):
        self.owner, self.address, self.lengths = owner, int(address), list(lengths)
        if offsets is None:
            offsets, at = [], 0
            for n in self.lengths:
                offsets.append(at)
                at += n
        self.offsets = list(offsets)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Flat(self.owner, self.address, self.lengths[i], self.offsets[i])
        import numpy as np
        chunk = (ctypes.c_ubyte * self.lengths[i]).from_address(self.address + self.offsets[i])
        return np.frombuffer(chunk, np.uint8)


class View:
    """h x w x 3 uint8 pixels at address `ptr`, as nvImageCodec's as_image() takes them: through
    __cuda_array_interface__ for device memory, __array_interface__ for host memory."""

    def __init__(self, ptr: int, height: int, width: int, device: bool):
        face = {"shape": (height, width, 3), "typestr": "|u1", "data": (ptr, False),
                "strides": None, "version": 3}
        if device:
            face["stream"] = None  # the decoder orders its own work (its cuda_stream argument)
            self.__cuda_array_interface__ = face
        else:
            self.__array_interface__ = face


def module():
    """nvidia.nvimgcodec, imported with its JPEG extension modules only.

    nvImageCodec loads every module of its extensions folder as it is imported (or those of
    NVIMGCODEC_EXTENSIONS_PATH); the JPEG 2000 and TIFF ones print six lines of "Failed to
    load" on stderr in every process where their libraries are not installed. The folder we
    point it at mirrors the package's own tree with symbolic links (the extensions find their
    libraries relative to where they were loaded from), holding only JPEG_EXTENSIONS; it is
    removed as the process exits (where it cannot be made: a plain import). A
    NVIMGCODEC_EXTENSIONS_PATH set by the user wins."""
    if "nvidia.nvimgcodec" in sys.modules or "NVIMGCODEC_EXTENSIONS_PATH" in os.environ:
        from nvidia import nvimgcodec
        return nvimgcodec
    mirror = extensions_dir(package_dir())
    if mirror:
        os.environ["NVIMGCODEC_EXTENSIONS_PATH"] = mirror
    try:
        from nvidia import nvimgcodec
    finally:
        os.environ.pop("NVIMGCODEC_EXTENSIONS_PATH", None)  # not for the processes we start
    return nvimgcodec


def package_dir() -> str:
    """The installed nvidia/nvimgcodec folder (ImportError where it is not installed)."""
    import importlib.util
    found = importlib.util.find_spec("nvidia.nvimgcodec")
    if found is None or not found.submodule_search_locations:
        raise ImportError("No module named 'nvidia.nvimgcodec'")
    return list(found.submodule_search_locations)[0]


_MIRROR = []  # type: List[Optional[str]]


def extensions_dir(package: str) -> Optional[str]:
    """The JPEG-only extensions folder (module()), made once per process; None where it cannot
    be made (every extension is loaded then), or where the user set NVIMGCODEC_EXTENSIONS_PATH."""
    if "NVIMGCODEC_EXTENSIONS_PATH" in os.environ:
        return os.environ["NVIMGCODEC_EXTENSIONS_PATH"]
    if not _MIRROR:
        try:
            mirror = tempfile.mkdtemp(prefix="compare-nvimgcodec-")
            atexit.register(shutil.rmtree, mirror, True)  # kept while the process may load from it
            _MIRROR.append(_mirror(package, mirror))
        except OSError:  # no temporary folder: every extension, and their lines on stderr
            _MIRROR.append(None)
    return _MIRROR[0]


def _mirror(package: str, into: str) -> str:
    """nvidia/ (the folder of `package`) mirrored under `into` by links, its extensions folder
    holding the JPEG extension modules only; returns that extensions folder."""
    top = os.path.dirname(package)
    for name in os.listdir(top):
        if name != os.path.basename(package):
            os.symlink(os.path.join(top, name), os.path.join(into, name))
    own = os.path.join(into, os.path.basename(package))
    extensions = os.path.join(own, "extensions")
    os.makedirs(extensions)
    for name in os.listdir(package):
        if name != "extensions":
            os.symlink(os.path.join(package, name), os.path.join(own, name))
    for name in os.listdir(os.path.join(package, "extensions")):
        if name.startswith(JPEG_EXTENSIONS):
            os.symlink(os.path.join(package, "extensions", name), os.path.join(extensions, name))
    return extensions


API_NAMES = {"c": "C API through ctypes (nvcapi.py)", "python": "Python binding"}
_LIBRARY = []  # type: List[Any]


def library():
    """This process's nvImageCodec C library and instance (nvcapi.Library), made once."""
    if not _LIBRARY:
        from . import nvcapi
        package = package_dir()
        _LIBRARY.append(nvcapi.Library(package, extensions_dir(package)))
    return _LIBRARY[0]


def decoder(device_id: Optional[int], kind: str = "hw", api: str = "c"):
    """The process's decoder for a device (None: the host), created on first use and reused.
    kind "hw": the JPEG engines only (BackendKind.HW_GPU_ONLY); "cpu": nvImageCodec's CPU backend
    (tests on machines without a GPU). api "c": nvcapi.Decoder (the C API: two hand-overs of the
    GIL a batch); "python": the package's nvimgcodec.Decoder. NotAvailable with the reason when
    it cannot be made."""
    key = (device_id, kind, api)
    if key in _DECODERS:
        return _DECODERS[key]
    if key in _FAILED:
        raise NotAvailable(_FAILED[key])
    try:  # the C API does without the Python binding (and its own instance of the library)
        nv = module() if api == "python" else None
        lib = library() if api == "c" else None
    except Exception as exc:  # not installed, or its libraries do not load
        raise NotAvailable("nvImageCodec does not import: {}: {}".format(
            type(exc).__name__, exc)) from None
    try:
        if api == "c":
            from . import nvcapi
            made = nvcapi.Decoder(lib, device_id, kind)  # type: Any
        elif kind == "hw":
            made = nv.Decoder(device_id=device_id, backends=[nv.Backend(nv.BackendKind.HW_GPU_ONLY)])
        else:
            made = nv.Decoder(device_id=nv.NVIMGCODEC_DEVICE_CPU_ONLY,
                              backends=[nv.Backend(nv.BackendKind.CPU_ONLY)])
    except Exception as exc:  # no GPU, no JPEG engines, no driver
        _FAILED[key] = "{} ({}) could not make a {} decoder{}: {}: {}".format(
            version(), API_NAMES[api],
            "hardware (HW_GPU_ONLY)" if kind == "hw" else "CPU",
            "" if device_id is None else " on device {}".format(device_id), type(exc).__name__,
            str(exc).strip()[:300])
        raise NotAvailable(_FAILED[key]) from None
    _DECODERS[key] = made
    return made


def probe(device_id: Optional[int], path: str, kind: str = "hw", api: str = "c") -> None:
    """Decode a 16 x 16 window of one file of the data set with the device's decoder (made here,
    once), so that a decoder that is made but cannot decode (a GPU without JPEG engines) is
    known before the run starts. NotAvailable with the reason."""
    made = BatchDecoder(device_id, kind, api)
    with open(path, "rb") as f:
        data = f.read()
    found = ds.jpeg_size(data)
    if found is None:
        raise NotAvailable("{}: no JPEG frame header (the probe needs a JPEG)".format(path))
    h, w = min(16, found[1]), min(16, found[0])
    size = h * w * 3
    try:
        with _scratch(size, device_id if kind == "hw" else None) as (ptr, stream):
            bad = made.decode_into([data], [[0, 0, w, h]], ptr, stream)
        reason = "it did not decode the window" if bad else ""
    except NotAvailable:
        raise
    except Exception as exc:
        bad, reason = [0], "{}: {}".format(type(exc).__name__, str(exc).strip()[:300])
    if bad:
        key = (device_id, kind, api)
        _FAILED[key] = "the {} decoder of {} ({}) did not decode a {}x{} window of {}: {}".format(
            kind, version(), API_NAMES[api], w, h, path, reason)
        _DECODERS.pop(key, None)
        raise NotAvailable(_FAILED[key])


class _scratch:
    """`size` bytes to decode into, and the stream to order it on: host memory (device None), or
    device memory of the CUDA driver API on the device's primary context, freed on exit."""

    def __init__(self, size: int, device: Optional[int]):
        self.size, self.device, self.host, self.stream = size, device, None, None  # type: Any

    def __enter__(self) -> Tuple[int, int]:
        if self.device is None:
            self.host = ctypes.create_string_buffer(self.size)
            return ctypes.addressof(self.host), 0
        self.stream = Stream(self.device)
        self.ptr = ctypes.c_uint64()
        self.stream._check(self.stream.lib.cuMemAlloc_v2(ctypes.byref(self.ptr), self.size),
                           "cuMemAlloc")
        return int(self.ptr.value), self.stream.value

    def __exit__(self, *exc) -> None:
        if self.stream is not None:
            self.stream.synchronize()
            self.stream.lib.cuMemFree_v2(self.ptr)
            self.stream.lib.cuStreamDestroy_v2(self.stream.handle)


def can_decode(device_id: Optional[int], sample: str, opt) -> None:
    """The hw row's probe in a backend's PIPELINES (pipelines.choose): whether the device's JPEG
    engines decode a window of `sample` through the API --option nvimgcodec_api names."""
    probe(device_id, sample, api=opt("nvimgcodec_api"))


def version() -> str:
    """"nvImageCodec X.Y.Z", from the installed package's metadata (the C API path never imports
    the Python binding), else from the binding."""
    try:
        import importlib.metadata as metadata
        for name in ("nvidia-nvimgcodec-cu13", "nvidia-nvimgcodec-cu12", "nvidia-nvimgcodec-cu11"):
            try:
                return "nvImageCodec " + ".".join(metadata.version(name).split(".")[:3])
            except metadata.PackageNotFoundError:
                continue
    except ImportError:
        pass
    try:
        return "nvImageCodec " + str(getattr(module(), "__version__", "?"))
    except Exception:
        return "nvImageCodec (not importable)"


class BatchDecoder:
    """Decodes the crop windows of a batch into a flat buffer on one device (or the host).

    decode_into(datas, boxes, ptr, stream) writes crop i at ptr + offsets[i] as h x w x 3 RGB,
    and returns the indices of the images that did not decode (their slots hold no pixels).
    """

    def __init__(self, device_id: Optional[int], kind: str = "hw", api: str = "c"):
        self.kind, self.device_id, self.api = kind, device_id, api
        self.decoder = decoder(device_id, kind, api)
        self.on_device = kind == "hw"
        if api == "c":
            return
        self.nv = nv = module()
        # header sizes and crop boxes are in stored (unrotated) pixels, as Pillow reads them
        self.params = nv.DecodeParams(apply_exif_orientation=False, color_spec=nv.ColorSpec.SRGB,
                                      allow_any_depth=False, sample_format=nv.SampleFormat.I_RGB)

    def decode_into(self, datas: Sequence[bytes], boxes: Sequence[Sequence[int]], ptr: int,
                    stream: int = 0) -> List[int]:
        offsets, _ = layout(boxes)
        if self.api == "c":
            return self.decoder.decode_into(datas, boxes, offsets, ptr, stream)
        nv = self.nv
        if isinstance(datas, Flat):
            datas = [datas[i] for i in range(len(datas))]
        sources, views, bad = [], [], []
        for i, (data, box) in enumerate(zip(datas, boxes)):
            x, y, w, h = (int(v) for v in box[:4])
            try:
                code = nv.CodeStream(data)  # bytes or a uint8 numpy array, not copied
                sources.append(code.get_sub_code_stream(region=nv.Region(y, x, y + h, x + w)))
            except Exception:  # a header nvImageCodec cannot parse: counted, replaced later
                bad.append(i)
                continue
            views.append((i, nv.as_image(View(ptr + offsets[i], h, w, self.on_device), stream)))
        if not sources:
            return list(range(len(datas)))
        images = self.decoder.decode(sources, images=[v for _, v in views], params=self.params,
                                     cuda_stream=stream)
        for (i, _), image in zip(views, images):
            if image is None or tuple(image.shape) != (int(boxes[i][3]), int(boxes[i][2]), 3):
                bad.append(i)
        return sorted(bad)


def replace_bad(meta: List[List[int]], labels: List[int], bad: Sequence[int]) -> None:
    """Images that did not decode take the crop, flip and label of the first one that did (in
    place), so that batches stay full; the caller counts them as decode errors."""
    good = next((i for i in range(len(meta)) if i not in set(bad)), None)
    if good is None:
        raise RuntimeError("nvImageCodec decoded none of the {} images of a batch".format(len(meta)))
    for i in bad:
        meta[i], labels[i] = list(meta[good]), labels[good]


class Stream:
    """A CUDA stream of the driver API (libcuda, which every GPU machine has), for frameworks
    that give the feeder none of their own (JAX): the decode is ordered on it and the feeder
    waits for it before the framework reads the buffer. device: the CUDA ordinal."""

    def __init__(self, device: int, high: bool = False):
        # the library twice over, as nvcapi.py does: `lib` (CDLL) lets go of the GIL for the
        # calls that block (synchronize, wait, pin, a copy from pageable memory); `held` (PyDLL)
        # keeps it for the calls that only queue work or set state (microseconds each), whose
        # hand-back of the GIL would otherwise wait for whichever thread took it meanwhile (in
        # JAX's process the step's dispatch: ~10 ms a batch for the copy's five calls, issue 36)
        self.lib, self.held = ctypes.CDLL("libcuda.so.1"), ctypes.PyDLL("libcuda.so.1")
        self._check(self.lib.cuInit(0), "cuInit")
        dev, ctx, stream = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self.lib.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
        self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
                    "cuDevicePrimaryCtxRetain")  # the context the framework itself uses
        self.ctx = ctx
        self.enter()
        least, greatest = ctypes.c_int(), ctypes.c_int()
        self._check(self.lib.cuCtxGetStreamPriorityRange(ctypes.byref(least), ctypes.byref(greatest)),
                    "cuCtxGetStreamPriorityRange")
        self._check(self.lib.cuStreamCreateWithPriority(  # non-blocking; high: ahead of the step's
            ctypes.byref(stream), 1, greatest if high else least), "cuStreamCreateWithPriority")
        self.handle = stream

    def _check(self, code: int, what: str) -> None:
        if code != 0:
            raise NotAvailable("CUDA driver: {} returned error {}".format(what, code))

    def enter(self) -> None:
        """Make the device's context current on this thread (the feeder's)."""
        self._check(self.held.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    @property
    def value(self) -> int:
        return int(self.handle.value or 0)

    def synchronize(self) -> None:
        self._check(self.lib.cuStreamSynchronize(self.handle), "cuStreamSynchronize")

    def event(self) -> ctypes.c_void_p:
        """A new event; its waiters sleep rather than spin (CU_EVENT_BLOCKING_SYNC), and it keeps
        no time (CU_EVENT_DISABLE_TIMING)."""
        event = ctypes.c_void_p()
        self._check(self.held.cuEventCreate(ctypes.byref(event), 0x1 | 0x2), "cuEventCreate")
        return event

    def record(self, event: ctypes.c_void_p, stream: Optional[int] = None) -> None:
        """The event completes when the work queued on the stream so far has (the decode);
        stream: another stream's raw handle instead of this one."""
        on = self.handle if stream is None else ctypes.c_void_p(stream)
        self._check(self.held.cuEventRecord(event, on), "cuEventRecord")

    def wait(self, event: ctypes.c_void_p) -> None:
        """Block this thread (without the GIL: ctypes releases it) until the event completes."""
        self._check(self.lib.cuEventSynchronize(event), "cuEventSynchronize")

    def copy_in(self, device_ptr: int, host_ptr: int, size: int, pinned: bool = False) -> None:
        """Queue a copy of `size` bytes of host memory to the device on this stream. From
        pageable memory the driver stages the bytes before it returns (the host buffer may be
        reused then: the GIL is let go meanwhile); from registered (pinned) memory it returns at
        once (the GIL is kept)."""
        lib = self.held if pinned else self.lib
        self._check(lib.cuMemcpyHtoDAsync_v2(ctypes.c_uint64(device_ptr), ctypes.c_void_p(host_ptr),
                                             ctypes.c_size_t(size), self.handle),
                    "cuMemcpyHtoDAsync")

    def make_wait(self, stream: int, event: ctypes.c_void_p) -> None:
        """Work queued on `stream` (a raw CUstream/cudaStream_t, another framework's) after this
        call waits on the device for `event`; the host does not wait."""
        self._check(self.held.cuStreamWaitEvent(ctypes.c_void_p(stream), event, 0),
                    "cuStreamWaitEvent")

    def register(self, host_ptr: int, size: int) -> bool:
        """Pin `size` bytes of this process's memory for the device's copy engines (their copies
        then need no staging); False where the driver refuses (the copies still work)."""
        try:
            return self.lib.cuMemHostRegister_v2(ctypes.c_void_p(host_ptr), ctypes.c_size_t(size),
                                                 0) == 0
        except AttributeError:  # a driver without it
            return False

    def unregister(self, host_ptr: int) -> None:
        self.lib.cuMemHostUnregister(ctypes.c_void_p(host_ptr))


def describe(kind: str, decoders: int, note: Optional[str] = None,
             api: str = "c") -> Dict[str, Any]:
    """The settings a hardware-decode run records beside the common data settings."""
    out = {"decoder": "{} {} through its {} (region-of-interest decode into one flat buffer per "
           "device)".format(version(), "HW_GPU_ONLY" if kind == "hw" else "CPU_ONLY",
                            API_NAMES[api]), "decoders": decoders, "nvimgcodec_api": api}
    if note:
        out["decoders_note"] = note
    return out
