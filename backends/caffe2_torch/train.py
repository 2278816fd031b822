"""PyTorch trainer for the harness: model, SGD, precision, DDP over torchrun or srun workers.

Imported only inside the backend's environment (it needs torch).
"""
import os
from typing import Any, Dict, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .. import options, phases, policy
from ..harness import Trainer, cpu_name
from ..protocol import RunSpec, Unsupported
from . import OPTIONS
from .resnet50 import ResNet50, trainable_parameters

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


def _init_distributed(spec: RunSpec):
    """Join the process group if there is one; return (rank, local_rank, world).

    torchrun, or a Slurm job's srun task (COMPARE_LAUNCHER=srun), sets RANK, WORLD_SIZE,
    LOCAL_RANK, MASTER_ADDR and MASTER_PORT; the default env:// rendezvous reads them.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    policy.check_workers(spec.world_size, world, os.environ.get("COMPARE_LAUNCHER", "torchrun"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if world > 1:
        dist.init_process_group("nccl" if spec.device == "cuda" else "gloo")
    return rank, local_rank, world


class TorchTrainer(Trainer):
    def __init__(self, spec: RunSpec):
        self.spec = spec

        def opt(key):
            return options.value(OPTIONS, spec.options, key)
        self.rank, local_rank, self.world = _init_distributed(spec)
        if spec.device == "cuda":
            if not torch.cuda.is_available():
                raise Unsupported("device cuda asked for, but torch {} sees no GPU".format(
                    torch.__version__))
            self.device = torch.device("cuda", local_rank)
            torch.cuda.set_device(self.device)
            torch.backends.cudnn.benchmark = opt("cudnn_benchmark")
            torch.backends.cudnn.benchmark_limit = opt("cudnn_benchmark_limit")
        else:
            self.device = torch.device("cpu")
            # each worker gets its share of its node's cores, so N workers do not oversubscribe them
            torch.set_num_threads(policy.cpu_threads(spec.gpus))
        phases.mark("devices_ready")  # communicators are created lazily, with the model
        self.amp_dtype = resolve_precision(spec.precision, self.device)
        torch.manual_seed(spec.seed)
        self.channels_last = policy.channels_last(opt("channels_last"), spec.device)
        fmt = torch.channels_last if self.channels_last else torch.contiguous_format
        model = ResNet50(spec.num_classes).to(self.device, memory_format=fmt)
        self.parameters = trainable_parameters(model)
        self.distribution = "single"
        if self.world > 1:
            self.distribution = "ddp"
            model = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[local_rank] if spec.device == "cuda" else None,
                broadcast_buffers=False, gradient_as_bucket_view=True)
        self.compile_mode = opt("compile_mode")
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
        if spec.data != "synthetic":  # real data: each step takes the next prefetched batch
            from .data import make_feed
            self.feed = make_feed(spec, self.device, self.rank, self.world, self.channels_last)
        self._loss = None
        self.graph = None
        self.cuda_graphs = opt("cuda_graphs")
        if self.cuda_graphs:
            self._capture()

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

        Valid because the synthetic batch is static; warm-up steps run first on a side stream
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
            self.images, self.labels = self.feed.next()
        if self.graph is not None:
            self.graph.replay()
        else:
            self._eager_step()

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

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
        elif self.spec.precision == "fp16":
            settings["note"] = "fp16 autocast on CPU: runs, but CPUs have no fp16 tensor cores"
        if self.world > 1:
            settings["process_group"] = dist.get_backend()
        if self.feed is not None:
            settings.update(self.feed.describe())
        return {
            "framework_version": "torch " + torch.__version__,
            "device_name": torch.cuda.get_device_name(self.device) if cuda else cpu_name(),
            "settings": settings,
        }

    def close(self) -> None:
        if self.feed is not None:
            self.feed.close()
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()


def setup(spec: RunSpec) -> Trainer:
    if spec.data_only:  # the input pipeline alone (data.py)
        from .data import data_only
        return data_only(spec)
    return TorchTrainer(spec)
