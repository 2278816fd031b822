"""PyTorch trainer for the harness: model, SGD, precision, DDP over torchrun or srun workers.

Imported only inside the backend's environment (it needs torch).
"""
from typing import Any, Dict, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .. import caches, options, policy
from ..protocol import RunSpec, Unsupported
from ..trainer import RuntimeTrainer, Trainer
from . import OPTIONS
from .data import make_feed
from .models import build, trainable_parameters
from .runtime import TorchRuntime, start

SGD_IMPL = {"fused": {"fused": True}, "foreach": {"foreach": True}, "loop": {"foreach": False}}


def resolve_precision(precision: str, device: torch.device) -> Optional[torch.dtype]:
    """Set the TF32 switches for `precision` and return the autocast dtype (None: no autocast)."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    policy.check_precision(precision, device.type, capability)
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)


class TorchTrainer(RuntimeTrainer):
    def __init__(self, spec: RunSpec, runtime: TorchRuntime):
        self.spec, self.runtime = spec, runtime

        def opt(key):
            return options.value(OPTIONS, spec.options, key)
        self.rank, local_rank, self.world = runtime.rank, runtime.local_rank, runtime.world
        self.device = runtime.device
        if runtime.cuda:
            torch.backends.cudnn.benchmark = opt("cudnn_benchmark")
            torch.backends.cudnn.benchmark_limit = opt("cudnn_benchmark_limit")
        self.amp_dtype = resolve_precision(spec.precision, self.device)
        torch.manual_seed(spec.seed)
        self.channels_last = policy.channels_last(opt("channels_last"), spec.device)
        fmt = torch.channels_last if self.channels_last else torch.contiguous_format
        model = build(spec.model, spec.num_classes).to(self.device, memory_format=fmt)
        self.parameters = trainable_parameters(model)
        self.distribution = runtime.distribution
        if self.world > 1:
            model = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[local_rank] if spec.device == "cuda" else None,
                broadcast_buffers=False, gradient_as_bucket_view=True)
        self.compile_mode = opt("compile_mode")
        self.inductor_tuning = opt("inductor_tuning") if spec.compile else None
        if self.inductor_tuning:
            _tune_inductor(self.inductor_tuning)
        self.model = torch.compile(model, mode=self.compile_mode) if spec.compile else model
        self.optimizer_impl = opt("optimizer") or ("fused" if spec.device == "cuda" else "foreach")
        self.optimizer = torch.optim.SGD(
            model.parameters(), lr=spec.learning_rate, momentum=spec.momentum,
            **SGD_IMPL[self.optimizer_impl])
        self.scaler = torch.amp.GradScaler(self.device.type) if spec.precision == "fp16" else None
        # the synthetic batch lives on the device once, as tf_cnn_benchmarks does
        g = torch.Generator(device="cpu").manual_seed(spec.seed + self.rank)
        images = torch.randn(spec.batch_size, 3, spec.image_size, spec.image_size, generator=g)
        labels = torch.randint(0, spec.num_classes, (spec.batch_size,), generator=g)
        self.images = images.to(self.device, memory_format=fmt)
        self.labels = labels.to(self.device)
        self.feed = None
        self._loss = None
        self.graph = None
        self.cuda_graphs = opt("cuda_graphs")
        if self.cuda_graphs:
            self._capture()
        if spec.data != "synthetic":  # real data: each step takes the next prefetched batch
            self.feed = make_feed(spec, runtime)  # after the capture: no feeder work during it

    def _eager_step(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        # the autocast cache must be off under graph capture (cached casts would be replayed stale)
        with torch.autocast(self.device.type, dtype=self.amp_dtype or torch.float32,
                            enabled=self.amp_dtype is not None, cache_enabled=not self.cuda_graphs):
            loss = F.cross_entropy(self.model(self.images), self.labels)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)  # fused SGD takes the scale on-device: no host sync
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self._loss = loss.detach()

    def _capture(self) -> None:
        """Record one whole step (forward, backward, optimizer) as a CUDA graph, replayed by step().

        Its input tensors are static: the synthetic batch, or (real data) the tensors each
        step's batch is copied into (step()); warm-up steps run first on a side stream
        so that cuDNN autotuning and the optimizer's lazily created state stay out of the graph.
        """
        if self.device.type != "cuda":
            raise Unsupported("cuda_graphs needs --device cuda")
        if self.world > 1:
            raise Unsupported("cuda_graphs is implemented for one GPU; DDP capture is not")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._eager_step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self._eager_step()

    def step(self) -> None:
        if self.feed is not None:
            images, labels = self.feed.next()
            if self.graph is not None:  # the graph reads the tensors it was captured with:
                self.images.copy_(images)  # refilled in stream order, after the last replay
                self.labels.copy_(labels)
            else:
                self.images, self.labels = images, labels
        if self.graph is not None:
            self.graph.replay()
        else:
            self._eager_step()

    def loss(self) -> float:
        return float(self._loss) if self._loss is not None else float("nan")

    def describe(self) -> Dict[str, Any]:
        cuda = self.device.type == "cuda"
        # read back from the tensors, not from the option: what really ran
        nhwc = self.images.is_contiguous(memory_format=torch.channels_last) and \
            not self.images.is_contiguous()
        settings = policy.settings(
            trainable_parameters=self.parameters, optimizer_impl=self.optimizer_impl,
            precision=self.spec.precision,
            loss_scaling="dynamic" if self.scaler is not None else None,
            tf32=torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32,
            layout="NHWC" if nhwc else "NCHW",
            compiler="torch.compile " + self.compile_mode if self.spec.compile else None,
            inductor_tuning=self.inductor_tuning,
            threads=torch.get_num_threads(),
            channels_last=nhwc,
            cuda_graphs=self.graph is not None,
            autocast_dtype=str(self.amp_dtype).replace("torch.", "") if self.amp_dtype else None,
            allow_tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
            allow_tf32_cudnn=torch.backends.cudnn.allow_tf32,
            float32_matmul_precision=torch.get_float32_matmul_precision())
        if cuda:
            settings.update(cuda_version=torch.version.cuda,
                            cudnn_version=torch.backends.cudnn.version(),
                            cudnn_benchmark=torch.backends.cudnn.benchmark,
                            cudnn_benchmark_limit=torch.backends.cudnn.benchmark_limit)
        elif policy.cpu_precision_note(self.spec.precision, "cpu"):  # fp16, or bf16 emulated
            settings["note"] = policy.cpu_precision_note(self.spec.precision, "cpu", "autocast",
                                                         "PyTorch")
        if self.world > 1:
            settings["process_group"] = dist.get_backend()
        if self.spec.compile:
            _count_compile_cache()
        return self.record(settings)


def _tune_inductor(how: str) -> None:
    """inductor_tuning: inductor times candidate block sizes of its generated Triton kernels when
    it compiles them (part of the compile settings, so of its cache key); cuDNN's convolutions
    are left to cudnn_benchmark. No effect on a CPU, where inductor writes C++ instead."""
    import torch._inductor.config as inductor
    inductor.coordinate_descent_tuning = how in ("coordinate", "both")
    inductor.max_autotune_pointwise = how in ("pointwise", "both")


def _count_compile_cache() -> None:
    """What torch.compile found in its caches (caches.py): Inductor's FX graphs, AOTAutograd's."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return
    fx, aot = counters["inductor"], counters["aot_autograd"]
    caches.note("torchinductor", fx_graph_hits=fx["fxgraph_cache_hit"],
                fx_graph_misses=fx["fxgraph_cache_miss"], aot_hits=aot["autograd_cache_hit"],
                aot_misses=aot["autograd_cache_miss"],
                hits=fx["fxgraph_cache_hit"] + aot["autograd_cache_hit"],
                misses=fx["fxgraph_cache_miss"] + aot["autograd_cache_miss"])


def release() -> None:
    """Between the probes of a batch search in one process (backends/batchprobe.py): forget
    torch.compile's graphs (the next batch would be compiled with a dynamic batch dimension)
    and give the device memory the last probe cached back, so the next one sees all of it."""
    import torch._dynamo  # noqa: F401  (torch.compile's, loaded where it was used)
    torch._dynamo.reset()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def setup(spec: RunSpec, runtime: Optional[TorchRuntime] = None) -> Trainer:
    return TorchTrainer(spec, runtime or start(spec))
