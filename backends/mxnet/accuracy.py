"""MXNet's time-to-accuracy trainer (docs/accuracy.md): the throughput trainer's Gluon model,
precision, hybridized graph and kvstore over this process's contexts, with the recipe's optimizer
and loss (backends/recipe.py), the ImageRecordIter feed of data.py over DIR/train (RecordIO) and
the shared evaluation over DIR/val (accuracy_data.ValLoader).

Imported only inside the backend's environment (it needs mxnet). As PyTorch's trainer: set-up
reads no image; the train and val pipelines start at the first step() and evaluate(), after
run_start. One process drives every context: each context evaluates its slice of every val batch
with its own batch-norm statistics, and the counts are summed over the contexts.
"""
import dataclasses
import os
import shutil
import tempfile
from typing import Any, Dict, Optional, Tuple

import mxnet as mx
import numpy as np
from mxnet import gluon

from .. import dataset as ds
from .. import options, recipe
from ..pipelines import accuracy_data as ad
from ..protocol import RunSpec
from . import OPTIONS
from .data import make_feed
from .runtime import MXNetRuntime, start
from .train import MXNetTrainer


class RecipeSGD(mx.optimizer.Optimizer):
    """The recipe's SGD, torch.optim.SGD's update: buf = momentum * buf + g + wd * w (wd on
    weights of 2+ dimensions only), w -= lr * buf. MXNet's own SGD keeps the rate inside the
    momentum (m = momentum * m - lr * (g + wd * w), w += m): the same steps at a constant rate,
    not under a rate that changes every step.

    It runs MXNet's one fused op per weight (sgd_mom_update) all the same: its state m is
    -lr * buf, and with the momentum of each step scaled by lr / (this weight's previous rate),
    m' = 0.9 (lr / lr_prev) m - lr g = -lr (0.9 buf + g) = -lr buf', PyTorch's step (the same
    update in NDArray ops took 2.7x longer on ResNet-50). Every rate must be > 0 (the recipe's
    are; warm_up's 0 is undone). fp16 weights get float32 master copies (multi_precision)."""

    def __init__(self, momentum: float = recipe.MOMENTUM, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.previous = {}  # (device, index) -> the rate of that weight's previous update

    def create_state(self, index, weight):
        return mx.nd.zeros(weight.shape, weight.context, dtype=weight.dtype)

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr, key = self._get_lr(index), (weight.context.device_id, index)
        before = self.previous.get(key)  # None: the first update, the state is still zero
        self.previous[key] = lr
        mx.nd.sgd_mom_update(weight, grad, state, out=weight, lr=lr,
                             momentum=self.momentum * lr / before if before else 0.0,
                             wd=recipe.WEIGHT_DECAY if recipe.decays(weight.shape) else 0.0,
                             rescale_grad=self.rescale_grad)


def smoothed_loss(num_classes: int):
    """(logits, labels) -> per-image softmax cross-entropy against (1 - e) one-hot + e / K."""
    e, dense = recipe.LABEL_SMOOTHING, gluon.loss.SoftmaxCrossEntropyLoss(sparse_label=False)

    def loss(logits, labels):
        return dense(logits, mx.nd.one_hot(labels, num_classes) * (1.0 - e) + e / num_classes)
    return loss


class AccuracyTrainer(MXNetTrainer):
    """steps_per_epoch, set_learning_rate, step, evaluate, warm_up (backends/accuracy.py calls
    them); sync, loss and close are the throughput trainer's."""

    def __init__(self, spec: RunSpec, runtime: MXNetRuntime):
        # the model and its synthetic batches (warm_up's) from the throughput trainer, seeded
        # with the run's seed; no feed yet: run_start comes before any image is read
        super().__init__(dataclasses.replace(spec, seed=spec.run_seed, data="synthetic",
                                             target_accuracy=None), runtime)
        self.spec = spec
        self.train_part, self.val_part = ad.parts(spec.data)
        self.train_part.check_labels(spec.num_classes)
        self.loss_fn = smoothed_loss(spec.num_classes)
        self.val = None  # type: Optional[ad.ValLoader]

    def _make_trainer(self, params) -> gluon.Trainer:
        """The recipe's SGD; the kvstore sums the gradients of the contexts and each context
        applies the update (update_on_kvstore=False: warm_up can put the state back)."""
        self.distribution = self.runtime.distribution
        sgd = RecipeSGD(learning_rate=0.0, multi_precision=self.precision["dtype"] == "float16")
        return gluon.Trainer(params, sgd, kvstore=self.kvstore, update_on_kvstore=False)

    def steps_per_epoch(self) -> int:
        return int(self.train_part.manifest["images"]) // self.spec.global_batch

    def set_learning_rate(self, lr: float) -> None:
        self.trainer.set_learning_rate(lr)

    def step(self) -> None:
        if self.feed is None:  # the first step, after run_start: the iterator starts here
            self.feed = make_feed(dataclasses.replace(self.spec, seed=self.spec.run_seed),
                                  self.runtime)
        super().step()

    def _val_loader(self) -> ad.ValLoader:
        """One process: every image of val, in batches of all the contexts' rows."""
        if self.val is None:
            batch = self.spec.batch_size * len(self.contexts)
            files = ad.val_files(self.train_part, self.val_part)
            mine = ad.shard(files, 0, 1, ad.eval_batches(len(files), 1, batch), batch)
            workers = ds.loader_workers(self.spec, options.value(OPTIONS, self.spec.options,
                                                                 "loader_workers"))[0]
            self.val = ad.ValLoader(mine, batch, self.spec.image_size,
                                    workers * len(self.contexts))
        return self.val

    def _correct(self, pixels: mx.nd.NDArray, labels: mx.nd.NDArray) -> mx.nd.NDArray:
        """Top-1 hits of one context's slice (uint8 NHWC), the net in inference mode (outside
        autograd.record: batch norm's running statistics); PAD_LABEL rows never hit."""
        ctx = pixels.context
        mean = mx.nd.array([255.0 * m for m in ds.MEAN], ctx=ctx).reshape((1, 1, 1, 3))
        std = mx.nd.array([255.0 * s for s in ds.STD], ctx=ctx).reshape((1, 1, 1, 3))
        x = mx.nd.broadcast_div(mx.nd.broadcast_sub(pixels.astype("float32"), mean), std)
        if self.layout == "NCHW":
            x = mx.nd.transpose(x, axes=(0, 3, 1, 2))
        logits = self.net(x.astype(self.precision["dtype"]))
        return (mx.nd.argmax(logits, axis=1).astype("float32") == labels).sum()

    def _counts(self, pixels: np.ndarray, labels: np.ndarray):
        """Hits of one process batch, one NDArray per context (no host sync)."""
        images = gluon.utils.split_and_load(mx.nd.array(pixels, dtype="uint8"), self.contexts)
        truth = gluon.utils.split_and_load(mx.nd.array(labels, dtype="float32"), self.contexts)
        return [self._correct(x, y) for x, y in zip(images, truth)]

    def evaluate(self) -> Tuple[int, int]:
        loader = self._val_loader()
        hits = []
        for pixels, labels in loader:
            hits += self._counts(pixels, labels)
        correct = sum(int(h.asscalar()) for h in hits)  # summed over the contexts
        return correct, loader.images

    def warm_up(self) -> None:
        """A train step and an evaluation batch on synthetic batches of the real shapes (the
        hybridized graphs, the kvstore, oneDNN's primitives), then every parameter (weights,
        batch-norm statistics, on every context) and the optimizer's state (momentum, fp16
        master copies, update counts) put back as they were."""
        params = list(self.net.collect_params().values())
        saved = [[data.copy() for data in p.list_data()] for p in params]
        folder = tempfile.mkdtemp(prefix="compare-mxnet-warmup-")
        try:
            states = os.path.join(folder, "trainer.states")
            self.trainer.save_states(states)  # before the first update: no momentum yet
            self.set_learning_rate(0.0)
            super().step()
            rows = self.spec.batch_size * len(self.contexts)
            size = self.spec.image_size
            self._counts(np.zeros((rows, size, size, 3), np.uint8), np.zeros((rows,), np.int32))
            mx.nd.waitall()
            for param, copies in zip(params, saved):
                for data, copy in zip(param.list_data(), copies):
                    copy.copyto(data)  # in place: the hybridized graph keeps its arrays
            self.trainer.load_states(states)
            mx.nd.waitall()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self._losses = []

    def describe(self) -> Dict[str, Any]:
        out = super().describe()
        out["settings"].update(
            optimizer_impl="gluon RecipeSGD (torch.optim.SGD's update: w -= lr * buf)",
            loss="cross-entropy, label smoothing {:g}".format(recipe.LABEL_SMOOTHING),
            weight_decay=recipe.WEIGHT_DECAY, weight_decay_on=recipe.WEIGHT_DECAY_ON,
            eval_pipeline="accuracy_data.ValLoader (Pillow centre crops in threads) -> mxnet, "
                          "net outside autograd.record (inference)")
        return out

    def close(self) -> None:
        if self.val is not None:
            self.val.close()
        super().close()


def setup(spec: RunSpec, runtime: Optional[MXNetRuntime] = None) -> AccuracyTrainer:
    """The accuracy trainer of an accuracy spec (backends/harness.py calls this module's setup
    instead of train.py's when spec.kind is accuracy)."""
    return AccuracyTrainer(spec, runtime or start(spec))
