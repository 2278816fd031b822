"""nvImageCodec's C API (libnvimgcodec.so.0, shipped in the nvidia-nvimgcodec wheel) through
ctypes, for decode=hw's batch decode (nvdecode.py, --option nvimgcodec_api=c, the default).

Why not the package's Python binding: its Decoder.decode lets go of the GIL and takes it back
around every image's header query and image set-up, about 500 times for a batch of 256. In the
training process the training loop holds the GIL most of the time, so each of those hand-overs
waits for it (up to the switch interval): beside an eager PyTorch loop the decode fell behind and
took 12-22 % of the step with it, and beside a loop that never lets go (a CUDA graph replay) it
made no progress at all (bench/feed_contention.py, BENCHMARKS.md). Here the per-image calls are
made through ctypes.PyDLL, which keeps the GIL (they parse a header or fill a struct: a few
microseconds each), and only the batch's decode and the wait for it go through ctypes.CDLL,
which lets go of it: two hand-overs a batch.

Standard library only (ctypes), Python >= 3.8. The structs below mirror nvimgcodec.h of the
pinned version (0.9.0); `compatible()` refuses any other major.minor, and the caller records why.
"""
import ctypes as C
import os
from typing import List, Optional, Sequence

MAX_DIM, MAX_PLANES, MAX_FILL, CODEC_NAME = 5, 32, 5, 256
# nvimgcodecStructureType_t
ST_INSTANCE_CREATE_INFO, ST_DECODE_PARAMS, ST_ORIENTATION, ST_REGION = 2, 5, 7, 8
ST_CODE_STREAM_VIEW, ST_IMAGE_INFO, ST_IMAGE_PLANE_INFO, ST_BACKEND = 9, 11, 12, 17
ST_BACKEND_PARAMS, ST_EXECUTION_PARAMS = 29, 30
SUCCESS = 0  # nvimgcodecStatus_t
PROCESSING_SUCCESS = 1  # nvimgcodecProcessingStatus_t
COLORSPEC_SRGB, SAMPLING_NONE, SAMPLEFORMAT_I_RGB, UINT8 = 1, 0, 8, 0x0802
BUFFER_DEVICE, BUFFER_HOST = 1, 2
BACKEND_CPU_ONLY, BACKEND_HW_GPU_ONLY, LOAD_HINT_FIXED = 1, 4, 2
DEVICE_CPU_ONLY = -99999
SEVERITY_ERROR_FATAL = 0x00010000 | 0x00100000
CATEGORY_ALL = 0x0FFFFFFF
VERSION = (0, 9)  # the header these structs mirror


class _Head(C.Structure):
    _fields_ = [("struct_type", C.c_int), ("struct_size", C.c_size_t), ("struct_next", C.c_void_p)]


def _struct(name: str, fields):
    """A C struct that begins with nvImageCodec's (type, size, next) header."""
    return type(name, (C.Structure,), {"_fields_": list(_Head._fields_) + fields})


Orientation = _struct("Orientation", [("rotated", C.c_int), ("flip_x", C.c_int), ("flip_y", C.c_int)])
PlaneInfo = _struct("PlaneInfo", [("width", C.c_uint32), ("height", C.c_uint32),
                                  ("row_stride", C.c_size_t), ("num_channels", C.c_uint32),
                                  ("sample_type", C.c_int), ("precision", C.c_uint8)])


class _Sample(C.Structure):
    _fields_ = [("value", C.c_uint32), ("type", C.c_int)]


Region = _struct("Region", [("ndim", C.c_int), ("start", C.c_int * MAX_DIM),
                            ("end", C.c_int * MAX_DIM), ("out_of_bounds_policy", C.c_int),
                            ("out_of_bounds_samples", _Sample * MAX_FILL)])
ImageInfo = _struct("ImageInfo", [("codec_name", C.c_char * CODEC_NAME), ("color_spec", C.c_int),
                                  ("chroma_subsampling", C.c_int), ("sample_format", C.c_int),
                                  ("orientation", Orientation), ("num_planes", C.c_uint32),
                                  ("plane_info", PlaneInfo * MAX_PLANES), ("buffer", C.c_void_p),
                                  ("buffer_kind", C.c_int), ("cuda_stream", C.c_void_p)])
CodeStreamView = _struct("CodeStreamView", [("image_idx", C.c_size_t), ("region", Region),
                                            ("bitstream_offset", C.c_size_t)])
InstanceCreateInfo = _struct("InstanceCreateInfo", [
    ("load_builtin_modules", C.c_int), ("load_extension_modules", C.c_int),
    ("extension_modules_path", C.c_char_p), ("create_debug_messenger", C.c_int),
    ("debug_messenger_desc", C.c_void_p), ("message_severity", C.c_uint32),
    ("message_category", C.c_uint32)])
BackendParams = _struct("BackendParams", [("load_hint", C.c_float), ("load_hint_policy", C.c_int)])
Backend = _struct("Backend", [("kind", C.c_int), ("params", BackendParams)])
ExecutionParams = _struct("ExecutionParams", [
    ("device_allocator", C.c_void_p), ("pinned_allocator", C.c_void_p),
    ("max_num_cpu_threads", C.c_int), ("executor", C.c_void_p), ("device_id", C.c_int),
    ("pre_init", C.c_int), ("skip_pre_sync", C.c_int), ("num_backends", C.c_int),
    ("backends", C.POINTER(Backend))])
DecodeParams = _struct("DecodeParams", [("apply_exif_orientation", C.c_int)])


class CApiError(RuntimeError):
    """A call of the C API failed; the message names it and its status."""


def _head(s, kind: int):
    s.struct_type, s.struct_size, s.struct_next = kind, C.sizeof(s), None
    return s


class Library:
    """The C library, loaded twice over: `held` calls keep the GIL (PyDLL), `free` calls let go
    of it (CDLL). One instance of the library (nvimgcodecInstance_t) per process."""

    def __init__(self, package_dir: str, extensions_dir: Optional[str]):
        path = os.path.join(package_dir, "libnvimgcodec.so.0")
        self.held, self.free = C.PyDLL(path), C.CDLL(path)
        P = C.c_void_p
        for lib in (self.held, self.free):
            for name, args in (
                    ("nvimgcodecInstanceCreate", [C.POINTER(P), C.POINTER(InstanceCreateInfo)]),
                    ("nvimgcodecDecoderCreate", [P, C.POINTER(P), C.POINTER(ExecutionParams),
                                                 C.c_char_p]),
                    ("nvimgcodecCodeStreamCreateFromHostMem", [P, C.POINTER(P), P, C.c_size_t, P]),
                    ("nvimgcodecCodeStreamGetSubCodeStream", [P, C.POINTER(P),
                                                              C.POINTER(CodeStreamView)]),
                    ("nvimgcodecCodeStreamGetImageInfo", [P, C.POINTER(ImageInfo)]),
                    ("nvimgcodecImageCreate", [P, C.POINTER(P), C.POINTER(ImageInfo)]),
                    ("nvimgcodecDecoderDecode", [P, C.POINTER(P), C.POINTER(P), C.c_int,
                                                 C.POINTER(DecodeParams), C.POINTER(P)]),
                    ("nvimgcodecFutureWaitForAll", [P]),
                    ("nvimgcodecFutureGetProcessingStatus", [P, C.POINTER(C.c_int),
                                                             C.POINTER(C.c_size_t)]),
                    ("nvimgcodecFutureDestroy", [P])):
                fn = getattr(lib, name)
                fn.argtypes, fn.restype = args, C.c_int
        info = _head(InstanceCreateInfo(), ST_INSTANCE_CREATE_INFO)
        info.load_builtin_modules = 1
        info.load_extension_modules = 1
        info.extension_modules_path = extensions_dir.encode() if extensions_dir else None
        info.create_debug_messenger = 1
        info.message_severity, info.message_category = SEVERITY_ERROR_FATAL, CATEGORY_ALL
        self.instance = P()
        self.check(self.free.nvimgcodecInstanceCreate(C.byref(self.instance), C.byref(info)),
                   "nvimgcodecInstanceCreate")

    @staticmethod
    def check(status: int, what: str) -> None:
        if status != SUCCESS:
            raise CApiError("nvImageCodec C API: {} returned status {}".format(what, status))


def _address(data):
    """(address, bytes, the object that keeps them alive) of a JPEG's bytes: bytes (not copied),
    a numpy array or anything with __array_interface__ (contiguous uint8; not copied), or any
    other buffer (copied)."""
    if isinstance(data, bytes):
        return C.cast(C.c_char_p(data), C.c_void_p).value, len(data), data
    face = getattr(data, "__array_interface__", None)
    if face is not None and face.get("strides") is None:
        return int(face["data"][0]), int(data.nbytes), data
    copy = bytes(memoryview(data).cast("B"))
    return C.cast(C.c_char_p(copy), C.c_void_p).value, len(copy), copy


class Decoder:
    """A decoder of one backend (hw: the JPEG engines of device_id; cpu: the host) and the
    handles it reuses from batch to batch (code streams, sub-streams, images)."""

    def __init__(self, lib: Library, device_id: Optional[int], kind: str):
        self.lib, self.kind = lib, kind
        backend = _head(Backend(), ST_BACKEND)
        backend.kind = BACKEND_HW_GPU_ONLY if kind == "hw" else BACKEND_CPU_ONLY
        _head(backend.params, ST_BACKEND_PARAMS)
        backend.params.load_hint, backend.params.load_hint_policy = 1.0, LOAD_HINT_FIXED
        self._backend = backend  # kept alive with the decoder
        params = _head(ExecutionParams(), ST_EXECUTION_PARAMS)
        params.device_id = DEVICE_CPU_ONLY if kind != "hw" else (
            -1 if device_id is None else int(device_id))
        params.num_backends, params.backends = 1, C.pointer(backend)
        self.handle = C.c_void_p()
        lib.check(lib.free.nvimgcodecDecoderCreate(lib.instance, C.byref(self.handle),
                                                   C.byref(params), b""),
                  "nvimgcodecDecoderCreate")
        if not self.handle.value:
            raise CApiError("nvImageCodec C API: nvimgcodecDecoderCreate made no decoder")
        self.buffer_kind = BUFFER_DEVICE if kind == "hw" else BUFFER_HOST
        self.capacity = 0
        self._grow(256)
        self.view = _head(CodeStreamView(), ST_CODE_STREAM_VIEW)
        _head(self.view.region, ST_REGION)
        self.view.region.ndim = 2
        self.info = _head(ImageInfo(), ST_IMAGE_INFO)
        self.params = _head(DecodeParams(), ST_DECODE_PARAMS)  # no EXIF rotation (as Pillow's boxes)

    def _grow(self, n: int) -> None:
        """Room for batches of n: one handle per image for its code stream, sub-stream (the
        region) and image, made on first use and reused after (nvImageCodec re-initialises a
        handle that is not NULL), and the arrays of the batch's handles."""
        if n <= self.capacity:
            return
        for name in ("streams", "subs", "images"):
            have = getattr(self, name, [])
            setattr(self, name, have + [C.c_void_p() for _ in range(n - len(have))])
        self.batch_streams, self.batch_images = (C.c_void_p * n)(), (C.c_void_p * n)()
        self.status, self.capacity = (C.c_int * n)(), n

    def decode_into(self, datas: Sequence, boxes: Sequence[Sequence[int]], offsets: Sequence[int],
                    ptr: int, stream: int = 0) -> List[int]:
        """Crop i of boxes ([x, y, w, h, ...]) of JPEG datas[i] (bytes or a buffer; or datas is
        an nvdecode.Flat, the JPEGs by address) decoded as h x w x 3 RGB at ptr + offsets[i];
        returns the indices that did not decode."""
        n = len(datas)
        self._grow(n)
        held, lib = self.lib.held, self.lib
        view, info = self.view, self.info
        bad, todo = [], []  # type: Tuple[List[int], List[int]]
        keep = [datas]  # the buffers' owners, alive until the decode is done
        flat = getattr(datas, "address", None)  # an nvdecode.Flat: no object per image
        for i in range(n):
            box = boxes[i]
            x, y, w, h = int(box[0]), int(box[1]), int(box[2]), int(box[3])
            if flat is not None:
                address, size = flat + datas.offsets[i], datas.lengths[i]
            else:
                address, size, owner = _address(datas[i])
                keep.append(owner)
            if held.nvimgcodecCodeStreamCreateFromHostMem(
                    lib.instance, C.byref(self.streams[i]), address, size, None) != SUCCESS:
                bad.append(i)
                continue
            region = view.region
            region.start[0], region.start[1], region.end[0], region.end[1] = y, x, y + h, x + w
            if held.nvimgcodecCodeStreamGetSubCodeStream(
                    self.streams[i], C.byref(self.subs[i]),
                    C.byref(view)) != SUCCESS or held.nvimgcodecCodeStreamGetImageInfo(
                    self.subs[i], C.byref(info)) != SUCCESS:
                bad.append(i)
                continue
            info.struct_type, info.struct_size, info.struct_next = ST_IMAGE_INFO, C.sizeof(info), None
            info.color_spec, info.chroma_subsampling = COLORSPEC_SRGB, SAMPLING_NONE
            info.sample_format, info.num_planes = SAMPLEFORMAT_I_RGB, 1
            info.orientation.rotated = info.orientation.flip_x = info.orientation.flip_y = 0
            plane = info.plane_info[0]
            plane.struct_type, plane.struct_size = ST_IMAGE_PLANE_INFO, C.sizeof(PlaneInfo)
            plane.width, plane.height, plane.row_stride = w, h, w * 3
            plane.num_channels, plane.sample_type, plane.precision = 3, UINT8, 0
            info.buffer, info.buffer_kind = ptr + int(offsets[i]), self.buffer_kind
            info.cuda_stream = stream or None
            if held.nvimgcodecImageCreate(lib.instance, C.byref(self.images[i]),
                                          C.byref(info)) != SUCCESS:
                bad.append(i)
                continue
            self.batch_streams[len(todo)] = self.subs[i].value
            self.batch_images[len(todo)] = self.images[i].value
            todo.append(i)
        if not todo:
            return list(range(n))
        future = C.c_void_p()
        free = lib.free  # the GIL is let go from here until the batch is decoded
        lib.check(free.nvimgcodecDecoderDecode(self.handle, self.batch_streams, self.batch_images,
                                               len(todo), C.byref(self.params), C.byref(future)),
                  "nvimgcodecDecoderDecode")
        try:
            lib.check(free.nvimgcodecFutureWaitForAll(future), "nvimgcodecFutureWaitForAll")
            count = C.c_size_t(len(todo))
            lib.check(held.nvimgcodecFutureGetProcessingStatus(future, self.status, C.byref(count)),
                      "nvimgcodecFutureGetProcessingStatus")
        finally:
            held.nvimgcodecFutureDestroy(future)
        bad.extend(i for k, i in enumerate(todo) if self.status[k] != PROCESSING_SUCCESS)
        return sorted(bad)
