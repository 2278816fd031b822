"""TensorFlow's time-to-accuracy trainer (docs/accuracy.md): the throughput trainer's Keras
model, precision, Horovod or tf.distribute strategy and compiled step, with the recipe's
optimizer and loss (backends/recipe.py), the tf.data feed of data.py over DIR/train (TFRecord)
and the shared evaluation over DIR/val (accuracy_data.ValLoader).

Imported only inside the backend's environment (it needs tensorflow). As PyTorch's trainer: set-up
reads no image; the train and val pipelines start at the first step() and evaluate(), after
run_start. The learning rate is the optimizer's variable, assigned before every step: the
compiled step reads it, so a new rate retraces nothing (settings record the step's traces).
"""
import dataclasses
import os
import shutil
import tempfile
from typing import Any, Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from .. import dataset as ds
from .. import options, recipe
from ..pipelines import accuracy_data as ad
from ..protocol import RunSpec
from . import OPTIONS
from .data import make_feed
from .runtime import MIRRORED, TFRuntime, keras_version, start
from .step import build_step
from .train import TFTrainer, make_optimizer


class RecipeSGD(tf.keras.optimizers.SGD):
    """The recipe's SGD, torch.optim.SGD's update: buf = momentum * buf + g + wd * w (wd on
    weights of 2+ dimensions only), w -= lr * buf. Keras' own SGD keeps the rate inside the
    momentum (m = momentum * m - lr * g, w += m): the same steps at a constant rate, not under a
    rate that changes every step. Runs after the gradients are averaged over the workers
    (apply_gradients), so the decay is added once, as in PyTorch and JAX."""

    def update_step(self, gradient, variable, learning_rate=None):
        rate = self.learning_rate if learning_rate is None else learning_rate  # Keras 3 passes it
        if recipe.decays(variable.shape):
            gradient = gradient + recipe.WEIGHT_DECAY * tf.convert_to_tensor(variable)
        buf = self._buffer(variable)
        buf.assign(self.momentum * tf.convert_to_tensor(buf) + gradient)
        variable.assign_sub(tf.cast(rate, variable.dtype) * tf.convert_to_tensor(buf))

    def _buffer(self, variable):
        """The momentum slot of `variable` (SGD.build made one per variable)."""
        if hasattr(self, "_get_variable_index"):  # Keras 3
            return self.momentums[self._get_variable_index(variable)]
        return self.momentums[self._index_dict[self._var_key(variable)]]


def smoothed_loss(num_classes: int):
    """(labels, logits) -> mean softmax cross-entropy against (1 - e) one-hot + e / K."""
    e = recipe.LABEL_SMOOTHING

    def loss(labels, logits):
        target = tf.one_hot(labels, num_classes) * (1.0 - e) + e / num_classes
        return tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(
            labels=target, logits=tf.cast(logits, tf.float32)))
    return loss


class AccuracyTrainer(TFTrainer):
    """steps_per_epoch, set_learning_rate, step, evaluate, warm_up (backends/accuracy.py calls
    them); sync, barrier, loss and close are the throughput trainer's."""

    def __init__(self, spec: RunSpec, runtime: TFRuntime):
        # the model and its synthetic batch (warm_up's) from the throughput trainer, seeded with
        # the run's seed; no feed yet: run_start comes before any image is read
        super().__init__(dataclasses.replace(spec, seed=spec.run_seed, data="synthetic",
                                             target_accuracy=None), runtime)
        self.spec = spec
        self.train_part, self.val_part = ad.parts(spec.data)
        self.train_part.check_labels(spec.num_classes)
        with self.strategy.scope():  # the momentum slots now: warm_up saves and restores them
            self.optimizer.build(self.model.trainable_variables)
        self.val = None  # type: Optional[ad.ValLoader]
        # on a CPU, TF's graph remapper fuses each convolution with its inference-mode batch
        # norm into a oneDNN kernel that ran ResNet-50's eval batch 8x slower than the same graph
        # unfused (4.6 s against 0.6 s, 16 images of 32x32, tensorflow 2.15.1 on 2 EPYC cores);
        # XLA, which compiles without that fusion, ran it in 0.15 s: the evaluation is compiled.
        # Not inside a strategy's replicas: XLA there reads replica 1's variables from device 0
        # (TF's "tf.Variable on a different device" known issue) and fails
        self.eval_xla = (self.xla or not self.gpus) and self.distribution not in MIRRORED
        self._counts = self._build_counts()

    def _make_optimizer(self):
        return make_optimizer(0.0, recipe.MOMENTUM, self.xla, self.policy == "mixed_float16",
                              sgd=RecipeSGD)

    def _build_step(self):
        fn, self.allreduce = build_step(self, smoothed_loss(self.spec.num_classes))
        return fn

    def steps_per_epoch(self) -> int:
        return int(self.train_part.manifest["images"]) // self.spec.global_batch

    def set_learning_rate(self, lr: float) -> None:
        self.optimizer.learning_rate = lr  # assigns the optimizer's variable (Keras' setter)

    def step(self) -> None:
        if self.feed is None:  # the first step, after run_start: the pipeline starts here
            self.feed = make_feed(dataclasses.replace(self.spec, seed=self.spec.run_seed),
                                  self.runtime)
        super().step()

    def _eval_share(self) -> Tuple[int, int, int]:
        """(rank, processes, images per process batch) of the evaluation: each Horovod or
        multi-worker process its share of val; one mirrored process the batches of all its
        replicas, split over them."""
        if self.distribution in ("horovod", "multiworker"):
            return self.rank, self.world, self.spec.batch_size
        if self.distribution == "mirrored":
            return 0, 1, self.spec.batch_size * self.world
        return 0, 1, self.spec.batch_size

    def _build_counts(self):
        """(uint8 NHWC images, labels) -> int32 [correct, counted] of one batch, the model in
        inference mode (batch norm's moving statistics); summed over a strategy's replicas."""
        model = self.model
        mean, std = tf.constant(ds.MEAN) * 255.0, tf.constant(ds.STD) * 255.0
        channels_first = self.data_format == "channels_first"

        def counts(images, labels):
            x = (tf.cast(images, tf.float32) - mean) / std
            if channels_first:
                x = tf.transpose(x, [0, 3, 1, 2])
            predicted = tf.argmax(model(x, training=False), axis=1, output_type=tf.int32)
            hits = tf.cast(tf.equal(predicted, labels), tf.int32)  # PAD_LABEL never equals
            return tf.stack([tf.reduce_sum(hits),
                             tf.reduce_sum(tf.cast(labels != ad.PAD_LABEL, tf.int32))])

        if self.eval_xla:
            counts = tf.function(counts, jit_compile=True)
        if self.distribution not in MIRRORED:
            return tf.function(counts)
        strategy = self.strategy

        @tf.function
        def replicated(images, labels):
            return strategy.reduce(tf.distribute.ReduceOp.SUM,
                                   strategy.run(counts, args=(images, labels)), axis=None)
        return replicated

    def _batch(self, images: np.ndarray, labels: np.ndarray):
        """A process's evaluation batch as the count function takes it: under a strategy, each
        of this process's replicas its slice, made on its device."""
        if self.distribution not in MIRRORED:
            return tf.constant(images), tf.constant(labels)
        devices, per = self.strategy.extended.worker_devices, self.spec.batch_size

        def slice_of(ctx):
            local = ctx.replica_id_in_sync_group % len(devices)
            with tf.device(devices[local]):
                rows = slice(local * per, (local + 1) * per)
                return tf.constant(images[rows]), tf.constant(labels[rows])
        values = self.strategy.experimental_distribute_values_from_function(slice_of)
        return values[0], values[1]

    def _val_loader(self) -> ad.ValLoader:
        if self.val is None:
            rank, processes, batch = self._eval_share()
            files = ad.val_files(self.train_part, self.val_part)
            batches = ad.eval_batches(len(files), processes, batch)
            mine = ad.shard(files, rank, processes, batches, batch)
            workers = ds.loader_workers(self.spec, options.value(OPTIONS, self.spec.options,
                                                                 "loader_workers"))[0]
            replicas = self.world if self.distribution == "mirrored" else 1  # one process's
            self.val = ad.ValLoader(mine, batch, self.spec.image_size, workers * replicas)
        return self.val

    def evaluate(self) -> Tuple[int, int]:
        total = tf.zeros((2,), tf.int32)
        for pixels, labels in self._val_loader():
            total = total + self._counts(*self._batch(pixels, labels))
        if self.hvd is not None:  # a strategy's reduce already summed over its workers
            total = self.hvd.allreduce(total, op=self.hvd.Sum, name="compare_eval_counts")
        correct, counted = (int(x) for x in total.numpy())
        return correct, counted

    def warm_up(self) -> None:
        """A train step and an evaluation batch on synthetic batches of the real shapes (tracing,
        XLA, oneDNN and cuDNN autotuning), then every variable of the model (weights, batch-norm
        statistics) and of the optimizer (momentum, iterations, loss scale) put back as it was,
        through a checkpoint in a temporary folder."""
        checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer)
        folder = tempfile.mkdtemp(prefix="compare-tf-warmup-")
        try:
            saved = checkpoint.write(os.path.join(folder, "state"))
            self.set_learning_rate(0.0)
            self._train_step(self.images, self.labels).numpy()
            _, _, batch = self._eval_share()
            size = self.spec.image_size
            self._counts(*self._batch(np.zeros((batch, size, size, 3), np.uint8),
                                      np.zeros((batch,), np.int32))).numpy()
            self.sync()
            checkpoint.read(saved).assert_consumed()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self._loss = None

    def describe(self) -> Dict[str, Any]:
        out = super().describe()
        traces = getattr(self._train_step, "experimental_get_tracing_count", lambda: None)()
        out["settings"].update(
            optimizer_impl="keras RecipeSGD (torch.optim.SGD's update: w -= lr * buf)",
            loss="cross-entropy, label smoothing {:g}".format(recipe.LABEL_SMOOTHING),
            weight_decay=recipe.WEIGHT_DECAY, weight_decay_on=recipe.WEIGHT_DECAY_ON,
            learning_rate_variable="the optimizer's, assigned before every step",
            train_step_traces=traces, keras_version=keras_version(),
            eval_compiler="xla" if self.eval_xla else None,
            eval_pipeline="accuracy_data.ValLoader (Pillow centre crops in threads) -> tf, "
                          "model(training=False)")
        return out

    def close(self) -> None:
        if self.val is not None:
            self.val.close()
        super().close()


def setup(spec: RunSpec, runtime: Optional[TFRuntime] = None) -> AccuracyTrainer:
    """The accuracy trainer of an accuracy spec (backends/harness.py calls this module's setup
    instead of train.py's when spec.kind is accuracy)."""
    return AccuracyTrainer(spec, runtime or start(spec))
