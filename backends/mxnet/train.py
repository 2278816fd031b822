"""MXNet trainer for the harness: Gluon ResNet-50, SGD, precision, a kvstore over contexts.

Imported only inside the backend's environment (it needs mxnet 1.9.x and numpy < 1.24).
One process drives N contexts (mx.gpu(i), or mx.cpu(i) on CPU-only machines) through a kvstore
`device`, as the Dell study ran MXNet.
"""
import os
from typing import Any, Dict, Optional, Sequence, Tuple

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from .. import options, policy
from ..protocol import RunSpec, Unsupported
from ..trainer import RuntimeTrainer, Trainer
from . import HYBRIDIZE, OPTIONS, cuda_build
from .data import make_feed
from .models import build, conv_layout, trainable_parameters
from .runtime import MXNetRuntime, start

FP16_LOSS_SCALE = 128.0  # static, as NVIDIA's MXNet ResNet-50 example: no host sync per step


def _low_dtype(name: str):
    """The dtype object amp_cast takes: numpy has float16, only MXNet's AMP knows bfloat16."""
    if name == "bfloat16":
        from mxnet.contrib.amp.amp import bfloat16
        return bfloat16
    return name


def _said(exc: Exception) -> str:
    """MXNet's own one-line message out of its multi-line error."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [repr(exc)]
    message = next((ln for ln in lines if ln.startswith("MXNetError:")), lines[-1])
    return message.replace("MXNetError:", "", 1).strip()


def _cast(x, dtype: str):
    return x if dtype == "float32" else mx.nd.amp_cast(x, dtype=_low_dtype(dtype))


def _unsupported(what: str, ctx: mx.Context, exc: Exception, hint: str = "") -> Unsupported:
    try:  # MXNet keeps a failed op's error and raises it again at the next wait: take it now
        mx.nd.waitall()
    except mx.base.MXNetError:
        pass
    return Unsupported("{} on {}: mxnet {} says: {}{}".format(what, ctx, mx.__version__,
                                                              _said(exc), hint))


def probe(ctx: mx.Context, dtype: str, layout: str) -> None:
    """Run a tiny dense op, then a 3x3 convolution (forward and backward) in `dtype` and `layout`
    on `ctx`: a GPU the build has no kernels for, a dtype or a layout this build cannot run
    fail here, and MXNet's own error becomes the Unsupported reason."""
    try:
        w = _cast(mx.nd.ones((4, 8), ctx=ctx), dtype)
        mx.nd.FullyConnected(_cast(mx.nd.ones((2, 8), ctx=ctx), dtype), w, no_bias=True,
                             num_hidden=4).wait_to_read()
    except mx.base.MXNetError as exc:
        raise _unsupported(dtype, ctx, exc)
    try:
        data = _cast(mx.nd.ones((2, 8, 8, 8), ctx=ctx), dtype)  # same shape in NCHW and NHWC
        weight = _cast(mx.nd.ones((8, 3, 3, 8) if layout == "NHWC" else (8, 8, 3, 3), ctx=ctx),
                       dtype)
        data.attach_grad()
        with autograd.record():
            out = mx.nd.Convolution(data, weight, kernel=(3, 3), pad=(1, 1), num_filter=8,
                                    no_bias=True, layout=layout)
        out.backward()
        data.grad.wait_to_read()
    except mx.base.MXNetError as exc:
        hint = ""
        if layout == "NHWC" and ctx.device_type == "cpu":
            hint = " (MXNet runs NHWC convolutions with cuDNN only: --option channels_last=false)"
        raise _unsupported("{} {} convolution".format(dtype, layout), ctx, exc, hint)


def gpu_capability(ctx: mx.Context, archs: Optional[Sequence[str]] = None,
                   build: Optional[str] = None) -> Tuple[int, int]:
    """The GPU's compute capability; Unsupported when it cannot be read, or when `archs` (the
    installed pip wheel's architectures, looked up when None) have no code for it."""
    try:
        capability = divmod(int(mx.util.get_cuda_compute_capability(ctx)), 10)
    except (ImportError, OSError, RuntimeError) as exc:  # libcuda.so missing, cuInit failing
        raise Unsupported("cannot read the compute capability of {} ({}: {}), so whether mxnet {} "
                          "runs on it is unknown".format(ctx, type(exc).__name__, exc,
                                                         mx.__version__))
    build = build or cuda_build.installed_wheel()
    archs = archs if archs is not None else cuda_build.WHEEL_ARCHS.get(build)
    if archs is not None:
        cuda_build.check_capability(capability, archs, build or "this mxnet build")
    return capability


def resolve_precision(precision: str, ctx: mx.Context, layout: str = "NCHW") -> Dict[str, Any]:
    """Decide how `precision` runs on `ctx`: the cast dtype, AMP, loss scale. One place only."""
    gpu = ctx.device_type == "gpu"
    capability = gpu_capability(ctx) if gpu else None
    policy.check_precision(precision, "cuda" if gpu else "cpu", capability)
    probe(ctx, {"fp16": "float16", "bf16": "bfloat16"}.get(precision, "float32"), layout)
    policy.check_tf32_override(precision)
    if precision == "fp32" and gpu and os.environ.get("NVIDIA_TF32_OVERRIDE") != "0":
        raise RuntimeError("fp32 on a GPU needs NVIDIA_TF32_OVERRIDE=0 set before mxnet loads "
                           "(cuDNN 8 uses TF32 by default)")
    if precision == "fp16":
        return {"dtype": "float16", "amp": None, "loss_scale": FP16_LOSS_SCALE}
    if precision == "bf16":
        from mxnet.contrib import amp
        # before the model is built: it wraps the operators, so the hybridized graph gets
        # amp_cast nodes (Symbol.tojson() hides them unless remove_amp_cast=False)
        amp.init(target_dtype="bfloat16")
        return {"dtype": "float32", "amp": "bfloat16", "loss_scale": 1.0}
    return {"dtype": "float32", "amp": None, "loss_scale": 1.0}


class MXNetTrainer(RuntimeTrainer):
    def __init__(self, spec: RunSpec, runtime: MXNetRuntime):
        self.spec, self.runtime = spec, runtime
        self.kvstore = options.value(OPTIONS, spec.options, "kvstore")
        self.contexts = runtime.contexts
        channels_last = policy.channels_last(options.value(OPTIONS, spec.options, "channels_last"),
                                             spec.device)
        self.layout = "NHWC" if channels_last else "NCHW"
        self.precision = resolve_precision(spec.precision, self.contexts[0], self.layout)
        mx.random.seed(spec.seed)
        net = build(spec.model, spec.num_classes, self.layout)
        self.parameters = trainable_parameters(net)
        net.initialize(ctx=self.contexts)  # initialised once, copied to every context
        if self.precision["dtype"] == "float16":
            net.cast("float16")  # Gluon keeps BatchNorm parameters in float32
        self.hybridize = options.value(OPTIONS, spec.options, "hybridize")
        if HYBRIDIZE[self.hybridize] is not None:
            net.hybridize(**HYBRIDIZE[self.hybridize])
        self.net = net
        self.trainer = self._make_trainer(net.collect_params())
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        # gradients are summed over contexts: rescale by the images of all contexts, times the
        # static loss scale
        self.step_scale = spec.batch_size * len(self.contexts) * self.precision["loss_scale"]
        self.images, self.labels = self._synthetic_batches()
        self.feed = None
        if spec.data != "synthetic":  # real data: each step takes the next batch (data.py)
            self.feed = make_feed(spec, runtime)
        self._losses = []  # the last step's losses, one NDArray per context

    def _make_trainer(self, params) -> gluon.Trainer:
        opts = {"learning_rate": self.spec.learning_rate, "momentum": self.spec.momentum,
                "multi_precision": self.precision["dtype"] == "float16"}
        self.distribution = self.runtime.distribution
        return gluon.Trainer(params, "sgd", opts, kvstore=self.kvstore)

    def _synthetic_batches(self):
        """One random batch per context, created on that context once (as tf_cnn_benchmarks)."""
        spec, images, labels = self.spec, [], []
        shape = (spec.batch_size, 3, spec.image_size, spec.image_size)
        if self.layout == "NHWC":
            shape = (spec.batch_size, spec.image_size, spec.image_size, 3)
        for ctx in self.contexts:
            images.append(mx.nd.random.normal(shape=shape, ctx=ctx).astype(self.precision["dtype"]))
            labels.append(mx.nd.random.randint(0, spec.num_classes, shape=(spec.batch_size,),
                                               ctx=ctx).astype("float32"))
        return images, labels

    def step(self) -> None:
        if self.feed is not None:
            self.images, self.labels = self.feed.next()
        scale = self.precision["loss_scale"]
        with autograd.record():
            losses = []
            for images, labels in zip(self.images, self.labels):
                logits = self.net(images)
                if self.spec.precision in ("fp16", "bf16"):
                    logits = mx.nd.amp_cast(logits, dtype="float32")  # the loss in float32
                losses.append(self.loss_fn(logits, labels))
            scaled = [loss * scale for loss in losses] if scale != 1.0 else losses
        autograd.backward(scaled)
        self.trainer.step(self.step_scale)
        self._losses = losses

    def loss(self) -> float:
        if not self._losses:
            return float("nan")
        return sum(float(loss.mean().asscalar()) for loss in self._losses) / len(self._losses)

    def describe(self) -> Dict[str, Any]:
        features = mx.runtime.Features()
        gpu = self.contexts[0].device_type == "gpu"
        fp16 = self.precision["dtype"] == "float16"
        settings = policy.settings(
            trainable_parameters=self.parameters,
            optimizer_impl="gluon" + ("-multi_precision" if fp16 else ""),
            precision=self.spec.precision,
            loss_scaling="static {:g}".format(self.precision["loss_scale"]) if fp16 else None,
            tf32=gpu and os.environ.get("NVIDIA_TF32_OVERRIDE") != "0", layout=conv_layout(self.net),
            compiler=None if self.hybridize == "off" else "hybridize", threads=None,
            contexts=[str(ctx) for ctx in self.contexts],
            hybridize={"static": "static_alloc, static_shape", "plain": "hybridize()",
                       "off": None}[self.hybridize],
            dtype=self.precision["dtype"],
            amp_target_dtype=self.precision["amp"],
            kvstore=self.kvstore if self.distribution == "kvstore" else None,
            update_on_kvstore=getattr(self.trainer, "_update_on_kvstore", None),
            numpy_version=np.__version__,
            features=sorted(f for f in ("MKLDNN", "CUDA", "CUDNN", "NCCL", "TENSORRT")
                            if features.is_enabled(f)),
            nvidia_tf32_override=os.environ.get("NVIDIA_TF32_OVERRIDE"))
        if not gpu and policy.cpu_precision_note(self.spec.precision, "cpu"):
            settings["note"] = policy.cpu_precision_note(self.spec.precision, "cpu", "AMP", "MXNet")
        return self.record(settings)


def setup(spec: RunSpec, runtime: Optional[MXNetRuntime] = None) -> Trainer:
    return MXNetTrainer(spec, runtime or start(spec))
