"""The one training recipe of every time-to-accuracy run (docs/accuracy.md), declared once.

Standard library only, Python >= 3.8. Every framework's accuracy trainer reads its numbers here
and calls `learning_rate()` before every step; `record()` is what each result and MLPerf log
holds, so a test can check that the four frameworks trained with the same numbers.

    optimizer      SGD with momentum 0.9 (heavy ball, no Nesterov, no dampening), weight decay
                   as an L2 term added to the gradient before the momentum (PyTorch's SGD
                   weight_decay; optax.add_decayed_weights before optax.sgd), on the weights of
                   convolutions and dense layers only: not on batch-norm scale and shift, not on
                   biases (a parameter is decayed when it has 2 or more dimensions)
    learning rate  peak = BASE_LR x global batch / REFERENCE_BATCH (Goyal et al.'s linear
                   scaling), reached by a linear warm-up over WARMUP_EPOCHS from 0, then a
                   polynomial decay of power DECAY_POWER to END_LR at the end of max_epochs
                   (MLPerf's ResNet SGD schedule); set by the loop before every step
    loss           softmax cross-entropy with label smoothing LABEL_SMOOTHING over the model's
                   outputs (target (1 - e) one-hot + e / K)
    batch          spec.batch_size images per worker (GPU, or CPU worker process); the global
                   batch is that times the world size; the last partial batch of a pass over
                   train/ rolls over into the next pass (no image is dropped)
    training data  random-resized crop (area AREA of the image, aspect RATIO, torchvision's
                   rule), horizontal flip with probability 1/2, ImageNet mean/std
    evaluation     every image of val/: shorter side resized to image_size / EVAL_CROP_FRACTION,
                   centre crop of image_size, ImageNet mean/std; top-1 over all of them
"""
from typing import Any, Dict

from .dataset import AREA, MEAN, RATIO, STD

OPTIMIZER = "sgd"
MOMENTUM = 0.9
WEIGHT_DECAY = 5e-5  # on conv and dense weights only (2+ dimensions)
WEIGHT_DECAY_ON = "conv and dense weights (parameters of 2+ dimensions); not batch norm, not biases"
BASE_LR = 0.5  # per REFERENCE_BATCH images of the global batch
REFERENCE_BATCH = 256
WARMUP_EPOCHS = 0.5
END_LR = 1e-4
DECAY_POWER = 2.0
LABEL_SMOOTHING = 0.1
FLIP = 0.5
EVAL_CROP_FRACTION = 0.875  # ImageNet's 224 of 256
NAME = "compare-tta-1"  # changes whenever a number above does


def peak_learning_rate(global_batch: int) -> float:
    """The rate at the end of the warm-up: BASE_LR scaled linearly by the global batch."""
    return BASE_LR * global_batch / REFERENCE_BATCH


def learning_rate(step: int, steps_per_epoch: int, global_batch: int, max_epochs: int) -> float:
    """The rate of training step `step` (0-based, counted over the whole run): linear warm-up to
    the peak over WARMUP_EPOCHS, then polynomial decay to END_LR at the end of max_epochs.
    Every framework calls this, so their schedules are the same numbers."""
    if steps_per_epoch < 1 or max_epochs < 1:
        raise ValueError("steps_per_epoch and max_epochs must be >= 1")
    peak = peak_learning_rate(global_batch)
    total, warmup = steps_per_epoch * max_epochs, warmup_steps(steps_per_epoch, max_epochs)
    if step < warmup:
        return peak * (step + 1) / warmup
    decay_steps = max(1, total - warmup)
    left = max(0.0, 1.0 - (step - warmup) / decay_steps)
    return END_LR + (peak - END_LR) * left ** DECAY_POWER


def warmup_steps(steps_per_epoch: int, max_epochs: int) -> int:
    """Steps of the linear warm-up (at most the whole run)."""
    return min(steps_per_epoch * max_epochs, int(round(WARMUP_EPOCHS * steps_per_epoch)))


def eval_resize(image_size: int) -> int:
    """The shorter side an evaluation image is resized to before its centre crop."""
    return int(round(image_size / EVAL_CROP_FRACTION))


def decays(shape) -> bool:
    """Whether a parameter of this shape gets weight decay (conv kernels and dense weights)."""
    return len(tuple(shape)) >= 2


def record(global_batch: int, steps_per_epoch: int, max_epochs: int,
           image_size: int) -> Dict[str, Any]:
    """The recipe as one run used it: what each result's accuracy['recipe'] holds."""
    warmup = warmup_steps(steps_per_epoch, max_epochs)
    return {
        "name": NAME, "optimizer": OPTIMIZER, "momentum": MOMENTUM, "nesterov": False,
        "weight_decay": WEIGHT_DECAY, "weight_decay_on": WEIGHT_DECAY_ON,
        "base_learning_rate": BASE_LR, "reference_batch": REFERENCE_BATCH,
        "global_batch": global_batch, "peak_learning_rate": peak_learning_rate(global_batch),
        "warmup_epochs": WARMUP_EPOCHS,
        "warmup_steps": warmup, "decay": "polynomial", "decay_power": DECAY_POWER,
        "end_learning_rate": END_LR, "decay_steps": max(1, steps_per_epoch * max_epochs - warmup),
        "steps_per_epoch": steps_per_epoch, "max_epochs": max_epochs,
        "label_smoothing": LABEL_SMOOTHING,
        "train_augmentation": "random-resized crop (area {:g}-{:g}, aspect {:.4g}-{:.4g}), "
                              "horizontal flip p={:g}, ImageNet mean/std".format(
                                  AREA[0], AREA[1], RATIO[0], RATIO[1], FLIP),
        "crop_area": list(AREA), "crop_ratio": list(RATIO),
        "eval": "resize shorter side to {}, centre crop {}, ImageNet mean/std, every image of "
                "val/".format(eval_resize(image_size), image_size),
        "eval_resize": eval_resize(image_size), "mean": list(MEAN), "std": list(STD),
    }


def mllog_hyperparameters(record: Dict[str, Any]) -> Dict[str, Any]:
    """The recipe under MLPerf's key names (its ResNet SGD rules), for the MLPerf log."""
    return {
        "global_batch_size": record["global_batch"], "opt_name": OPTIMIZER,
        "sgd_opt_base_learning_rate": record["peak_learning_rate"],
        "sgd_opt_end_learning_rate": END_LR,
        "sgd_opt_learning_rate_decay_poly_power": DECAY_POWER,
        "sgd_opt_learning_rate_decay_steps": record["decay_steps"],
        "sgd_opt_weight_decay": WEIGHT_DECAY, "sgd_opt_momentum": MOMENTUM,
        # the warm-up the run had: WARMUP_EPOCHS rounded to whole steps (0 with one step an epoch)
        "opt_learning_rate_warmup_epochs": record["warmup_steps"] / record["steps_per_epoch"],
        "label_smoothing": LABEL_SMOOTHING, "gradient_accumulation_steps": 1,
    }
