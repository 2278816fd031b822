"""PyTorch's time-to-accuracy trainer (docs/accuracy.md): the throughput trainer's model,
precision, DDP and compilation, with the recipe's optimizer and loss (backends/recipe.py), the
train feed of data.py over DIR/train and the shared evaluation over DIR/val.

Imported only inside the backend's environment (it needs torch). The example every framework's
accuracy trainer follows: set-up reads no image; the train and val pipelines start at the first
step() and evaluate(), after run_start.
"""
import copy
import dataclasses
from typing import Any, Dict, Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .. import dataset as ds
from .. import options, recipe
from ..pipelines import accuracy_data as ad
from ..protocol import RunSpec, Unsupported
from ..trainer import Trainer
from . import OPTIONS
from .data import _pixels_to_device, make_feed
from .runtime import TorchRuntime, start
from .train import SGD_IMPL, TorchTrainer


class AccuracyTrainer(TorchTrainer):
    """steps_per_epoch, set_learning_rate, step, evaluate, warm_up (backends/accuracy.py calls
    them); sync, barrier, loss, describe and close are the throughput trainer's."""

    def __init__(self, spec: RunSpec, runtime: TorchRuntime):
        if options.value(OPTIONS, spec.options, "cuda_graphs"):
            raise Unsupported("cuda_graphs replays one static batch; a time-to-accuracy run "
                              "trains on DIR/train (eager steps)")
        # the model and its synthetic batch (warm_up's) from the throughput trainer, seeded with
        # the run's seed; no feed yet: run_start comes before any image is read
        super().__init__(dataclasses.replace(spec, seed=spec.run_seed, data="synthetic",
                                             target_accuracy=None), runtime)
        self.spec = spec
        self.train_part, self.val_part = ad.parts(spec.data)
        self.train_part.check_labels(spec.num_classes)
        self.optimizer = torch.optim.SGD(self._groups(), lr=0.0, momentum=recipe.MOMENTUM,
                                         **SGD_IMPL[self.optimizer_impl])
        self.val = None  # the ValLoader, made by the first evaluate()

    def _groups(self):
        """The recipe's weight decay on conv and dense weights only (recipe.decays)."""
        decay, plain = [], []
        for p in self.model.parameters():
            (decay if recipe.decays(p.shape) else plain).append(p)
        return [{"params": decay, "weight_decay": recipe.WEIGHT_DECAY},
                {"params": plain, "weight_decay": 0.0}]

    def steps_per_epoch(self) -> int:
        return int(self.train_part.manifest["images"]) // self.spec.global_batch

    def set_learning_rate(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _objective(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with torch.autocast(self.device.type, dtype=self.amp_dtype or torch.float32,
                            enabled=self.amp_dtype is not None):
            logits = self.model(images)
        return F.cross_entropy(logits.float(), labels, label_smoothing=recipe.LABEL_SMOOTHING)

    def _train_step(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self._objective(images, labels)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self._loss = loss.detach()

    def step(self) -> None:
        if self.feed is None:  # the first step, after run_start: the loader starts here
            self.feed = make_feed(dataclasses.replace(self.spec, seed=self.spec.run_seed),
                                  self.runtime)
        self._train_step(*self.feed.next())

    def _val_loader(self) -> ad.ValLoader:
        if self.val is None:
            files = ad.val_files(self.train_part, self.val_part)
            batches = ad.eval_batches(len(files), self.world, self.spec.batch_size)
            mine = ad.shard(files, self.rank, self.world, batches, self.spec.batch_size)
            workers = ds.loader_workers(self.spec, options.value(OPTIONS, self.spec.options,
                                                                 "loader_workers"))[0]
            self.val = ad.ValLoader(mine, self.spec.batch_size, self.spec.image_size, workers)
            self.to_device = _pixels_to_device(self.device, self.channels_last)
        return self.val

    @torch.no_grad()
    def _correct(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with torch.autocast(self.device.type, dtype=self.amp_dtype or torch.float32,
                            enabled=self.amp_dtype is not None):
            logits = self.model(images)
        return (logits.argmax(1) == labels).sum()

    def evaluate(self) -> Tuple[int, int]:
        loader = self._val_loader()
        self.model.eval()
        correct = torch.zeros((), dtype=torch.int64, device=self.device)
        try:
            for pixels, labels in loader:
                images, labels, _ = self.to_device((torch.from_numpy(pixels),
                                                    torch.from_numpy(labels).long()))
                correct += self._correct(images, labels)
        finally:
            self.model.train()
        counts = torch.stack([correct, torch.tensor(loader.images, device=self.device)])
        if self.world > 1:
            dist.all_reduce(counts)
        return int(counts[0]), int(counts[1])

    def warm_up(self) -> None:
        """A train step and an eval step on the synthetic batch (cuDNN autotuning, torch.compile,
        lazy allocations), then the model, optimizer and loss scale put back as they were."""
        saved = (copy.deepcopy(self.model.state_dict()), copy.deepcopy(self.optimizer.state_dict()),
                 copy.deepcopy(self.scaler.state_dict()) if self.scaler is not None else None)
        self.set_learning_rate(0.0)
        self._train_step(self.images, self.labels)
        self.model.eval()
        self._correct(self.images, self.labels)
        self.model.train()
        self.sync()
        self.model.load_state_dict(saved[0])
        self.optimizer.load_state_dict(saved[1])
        if self.scaler is not None:
            self.scaler.load_state_dict(saved[2])
        self._loss = None

    def describe(self) -> Dict[str, Any]:
        out = super().describe()
        out["settings"].update(loss="cross-entropy, label smoothing {:g}".format(
            recipe.LABEL_SMOOTHING), weight_decay=recipe.WEIGHT_DECAY,
            weight_decay_on=recipe.WEIGHT_DECAY_ON, eval_pipeline="accuracy_data.ValLoader "
            "(Pillow centre crops in threads) -> torch, model.eval()")
        return out

    def close(self) -> None:
        if self.val is not None:
            self.val.close()
        super().close()


def setup(spec: RunSpec, runtime: Optional[TorchRuntime] = None) -> Trainer:
    """The accuracy trainer of an accuracy spec (backends/harness.py calls this module's setup
    instead of train.py's when spec.kind is accuracy)."""
    return AccuracyTrainer(spec, runtime or start(spec))
