"""JAX's time-to-accuracy trainer (docs/accuracy.md): the throughput trainer's precision, model,
mesh and jitted step (step.local_step), with the recipe's optimizer and loss
(backends/recipe.py), the train feed of data.py over DIR/train and the shared evaluation over
DIR/val. The learning rate is an argument of the compiled step (set every step, never a
recompilation): optax.inject_hyperparams keeps it in the optimizer state, and the step writes
the rate it is given there before the update.

Imported only inside the backend's environment, after flags.prepare() (as train.py).
"""
import dataclasses
import time
from functools import partial
from typing import Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from .. import dataset as ds
from .. import options, recipe
from ..pipelines import accuracy_data as ad
from ..protocol import RunSpec
from ..trainer import Trainer
from . import OPTIONS, step
from .data import make_feed, normaliser
from .models import build, count
from .runtime import AXIS, JaxRuntime, start
from .train import JaxTrainer, resolve_precision


def optimizer() -> optax.GradientTransformation:
    """The recipe's SGD: weight decay (L2 on the gradient) on conv and dense weights only, then
    momentum; the learning rate a hyper-parameter in the state (0 until the loop sets it)."""
    def sgd(learning_rate):
        mask = partial(jax.tree_util.tree_map, lambda p: recipe.decays(p.shape))
        return optax.chain(optax.add_decayed_weights(recipe.WEIGHT_DECAY, mask=mask),
                           optax.sgd(learning_rate, momentum=recipe.MOMENTUM))
    return optax.inject_hyperparams(sgd)(learning_rate=0.0)


def smoothed(logits, labels):
    """Per-example cross-entropy against (1 - e) one-hot + e / K (recipe.LABEL_SMOOTHING)."""
    target = optax.smooth_labels(jax.nn.one_hot(labels, logits.shape[-1]), recipe.LABEL_SMOOTHING)
    return optax.softmax_cross_entropy(logits, target)


def _with_rate(local, state: step.TrainState, images, labels, lr):
    """step.local_step at learning rate `lr` (a traced scalar: one program for every rate)."""
    opt = state.opt_state
    opt = opt._replace(hyperparams=dict(opt.hyperparams, learning_rate=lr))
    return local(state._replace(opt_state=opt), images, labels)


def _correct(model, params, batch_stats, images, labels):
    """One device's count of correct top-1 predictions (running BN statistics), shape (1,)."""
    stats = jax.tree_util.tree_map(lambda x: x[0], batch_stats)
    logits = model.apply({"params": params, "batch_stats": stats}, images, train=False)
    return jnp.sum(jnp.argmax(logits, -1) == labels, dtype=jnp.int32)[None]


def build_steps(model, tx, mesh, state, donate: bool, static_scale, flat: bool):
    """(train step(state, images, labels, lr), eval step(params, batch_stats, images, labels)),
    jitted over the mesh as step.build does for throughput."""
    several = mesh.size > 1
    local = partial(step.local_step, model, tx, AXIS if several else None, static_scale,
                    flat and several, objective=smoothed)
    train, evaluate = partial(_with_rate, local), partial(_correct, model)
    if several:
        specs = step.state_specs(state)
        train = step._shard_map(train, mesh, in_specs=(specs, P(AXIS), P(AXIS), P()),
                                out_specs=(specs, P(AXIS)))
        evaluate = step._shard_map(evaluate, mesh, in_specs=(P(), P(AXIS), P(AXIS), P(AXIS)),
                                   out_specs=P(AXIS))
    return jax.jit(train, donate_argnums=(0,) if donate else ()), jax.jit(evaluate)


class AccuracyTrainer(JaxTrainer):
    """steps_per_epoch, set_learning_rate, step, evaluate, warm_up (backends/accuracy.py calls
    them); sync, loss, describe (settings) and close are the throughput trainer's."""

    def __init__(self, spec: RunSpec, runtime: JaxRuntime):  # all of it: no throughput step
        self.spec, self.runtime, self.member = spec, runtime, runtime.member
        self.xla_flags_added = runtime.xla_flags_added
        self.sync_bn = options.value(OPTIONS, spec.options, "sync_bn")
        self.donate = options.value(OPTIONS, spec.options, "donate")
        self.flat = options.value(OPTIONS, spec.options, "flat_allreduce")
        self.rank, self.devices, self.mesh = runtime.rank, runtime.devices, runtime.mesh
        self.world, self.distribution = len(self.devices), runtime.distribution
        self.precision = resolve_precision(spec.precision, spec.device, self.devices[0],
                                           options.value(OPTIONS, spec.options, "loss_scale"))
        self.train_part, self.val_part = ad.parts(spec.data)
        self.train_part.check_labels(spec.num_classes)
        self.model = build(spec.model, spec.num_classes, self.precision["dtype"],
                           AXIS if self.sync_bn and self.world > 1 else None)
        self.tx = optimizer()
        key = jax.random.PRNGKey(spec.run_seed)
        self.state = step.initial_state(self.model, self.tx, key, spec.image_size, self.mesh,
                                        self.precision["loss_scaling"] == "dynamic")
        self.parameters = count(self.state.params)
        self.running_statistics = count(self.state.batch_stats) // self.world
        self.train_fn, self.eval_fn = build_steps(self.model, self.tx, self.mesh, self.state,
                                                  self.donate, self.precision["static_scale"],
                                                  self.flat)
        self.sharding = NamedSharding(self.mesh, P(AXIS))
        self._step = self._eval = None  # compiled by warm_up()
        self.compile_s, self.lr = 0.0, jnp.float32(0.0)
        self._losses, self.feed, self.val = None, None, None

    def steps_per_epoch(self) -> int:
        return int(self.train_part.manifest["images"]) // self.spec.global_batch

    def set_learning_rate(self, lr: float) -> None:
        self.lr = np.float32(lr)

    def warm_up(self) -> None:
        """Compile the train and eval steps ahead of time for the shapes the feeds give
        (nothing runs: the state is untouched)."""
        started = time.perf_counter()
        spec = self.spec
        images = jax.ShapeDtypeStruct((spec.global_batch, spec.image_size, spec.image_size, 3),
                                      jnp.float32, sharding=self.sharding)
        labels = jax.ShapeDtypeStruct((spec.global_batch,), jnp.int32, sharding=self.sharding)
        self._step = self.train_fn.lower(self.state, images, labels, self.lr).compile()
        self._eval = self.eval_fn.lower(self.state.params, self.state.batch_stats, images,
                                        labels).compile()
        self.compile_s = time.perf_counter() - started

    def step(self) -> None:
        if self.feed is None:  # the first step, after run_start: the loader starts here
            self.feed = make_feed(dataclasses.replace(self.spec, seed=self.spec.run_seed),
                                  self.runtime)
        images, labels = self.feed.next()
        self.state, self._losses = self._step(self.state, images, labels, self.lr)  # async

    def _val_loader(self) -> ad.ValLoader:
        if self.val is None:
            spec, processes = self.spec, jax.process_count()
            files = ad.val_files(self.train_part, self.val_part)
            batch = spec.batch_size * len(self.mesh.local_devices)  # this process's share
            batches = ad.eval_batches(len(files), processes, batch)
            workers = ds.loader_workers(spec, options.value(OPTIONS, spec.options,
                                                            "loader_workers"))[0]
            self.val = ad.ValLoader(ad.shard(files, jax.process_index(), processes, batches,
                                             batch), batch, spec.image_size, workers)
            self.normalise = normaliser(self.sharding)
        return self.val

    def evaluate(self) -> Tuple[int, int]:
        loader = self._val_loader()
        total = None
        for pixels, labels in loader:
            x, y = jax.make_array_from_process_local_data(self.sharding, (pixels, labels))
            out = self._eval(self.state.params, self.state.batch_stats, self.normalise(x), y)
            total = out if total is None else total + out
        mine = sum(int(np.asarray(s.data).sum()) for s in total.addressable_shards)
        counts = np.array([mine, loader.images], np.int64)
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils
            counts = np.asarray(multihost_utils.process_allgather(counts)).reshape(-1, 2).sum(0)
        return int(counts[0]), int(counts[1])

    def settings(self):
        out = super().settings()
        out.update(optimizer_impl="optax.inject_hyperparams(add_decayed_weights + sgd)",
                   loss="cross-entropy, label smoothing {:g}".format(recipe.LABEL_SMOOTHING),
                   weight_decay=recipe.WEIGHT_DECAY, weight_decay_on=recipe.WEIGHT_DECAY_ON,
                   eval_pipeline="accuracy_data.ValLoader (Pillow centre crops in threads) -> "
                   "jax.make_array_from_process_local_data")
        return out

    def close(self) -> None:
        if self.val is not None:
            self.val.close()
        super().close()


def setup(spec: RunSpec, runtime: Optional[JaxRuntime] = None) -> Trainer:
    """The accuracy trainer of an accuracy spec (backends/harness.py calls this module's setup
    instead of train.py's when spec.kind is accuracy)."""
    return AccuracyTrainer(spec, runtime or start(spec))
