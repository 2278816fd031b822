"""The jitted train step: forward, backward, gradient all-reduce, SGD momentum, loss scaling.

Every device runs `local_step` on its own slice of the batch (`shard_map` over the mesh axis
"data"): batch norm sees the local batch only (as DDP and Horovod do) unless the model was built
with axis_name (SyncBN), and the gradients are averaged across devices once (`lax.pmean`).
The BN running statistics stay per device, as DDP keeps them per process: they carry a leading
axis of one entry per device. fp16 uses a dynamic loss scale kept in Flax's DynamicScale (PyTorch
GradScaler's defaults: 2**16, x2 after 2000 finite steps, x0.5 on overflow), checked with one
reduction over all gradients (`all_finite`); a step whose gradients are not finite is skipped
with `jnp.where`, on the device, without a host sync. A static scale is a switch.
"""
from functools import partial
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax
from flax.training.dynamic_scale import DynamicScale
from jax import lax
from jax.flatten_util import ravel_pytree
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from .models import init
from .runtime import AXIS


class TrainState(NamedTuple):
    params: Any  # float32 master weights, replicated
    batch_stats: Any  # BN running statistics, one set per device (leading axis)
    opt_state: Any  # SGD momentum buffers, replicated
    dynamic_scale: Any = None  # flax DynamicScale (fp16), else None


def local_step(model, tx, axis_name: Optional[str], static_scale: Optional[float],
               flat: bool, state: TrainState, images, labels, objective=None):
    """One device's step. Returns (new state, this device's loss with a leading axis of 1).

    static_scale: multiply the loss by it and divide the gradients (no overflow check).
    flat: differentiate with respect to one vector of all parameters, so that the gradient
    all-reduce is a single collective over one contiguous buffer instead of XLA's ~35 combined
    ones (bench/allreduce_jax.py: one 102 MB buffer 0.9 ms, the tree of 161 arrays far slower).
    objective(logits, labels) -> per-example losses (default: cross-entropy; time to accuracy
    passes the recipe's label smoothing)."""
    stats = jax.tree_util.tree_map(lambda x: x[0], state.batch_stats)
    params, unravel = state.params, None
    if flat:
        params, unravel = ravel_pytree(state.params)

    def loss_fn(params):
        if unravel is not None:
            params = unravel(params)
        logits, updates = model.apply({"params": params, "batch_stats": stats}, images,
                                      train=True, mutable=["batch_stats"])
        loss = (objective or optax.softmax_cross_entropy_with_integer_labels)(
            logits.astype(jnp.float32), labels).mean()
        # .get: a network without batch norm (VGG-16) has no statistics to update
        return loss * (static_scale or 1.0), (loss, updates.get("batch_stats", {}))

    finite, scale = None, state.dynamic_scale
    if scale is not None:
        (_, (loss, new_stats)), grads = jax.value_and_grad(
            lambda p: _scaled(loss_fn(p), scale.scale), has_aux=True)(params)
    else:
        (_, (loss, new_stats)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    if axis_name is not None:
        grads = lax.pmean(grads, axis_name)  # the step's one gradient all-reduce
    if scale is not None:
        grads = jax.tree_util.tree_map(lambda g: g / scale.scale, grads)
        finite = all_finite(grads)
        scale = next_scale(scale, finite)
    elif static_scale:
        grads = jax.tree_util.tree_map(lambda g: g / static_scale, grads)
    if unravel is not None:
        grads = unravel(grads)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    if finite is not None:
        keep = partial(jnp.where, finite)  # an overflowed step changes nothing but the scale
        params = jax.tree_util.tree_map(keep, params, state.params)
        opt_state = jax.tree_util.tree_map(keep, opt_state, state.opt_state)
    new_stats = jax.tree_util.tree_map(lambda x: x[None], new_stats)
    return TrainState(params, new_stats, opt_state, scale), loss[None]


def _scaled(out, scale):
    """loss_fn's (loss, aux) with the loss multiplied by the dynamic scale."""
    return out[0] * scale, out[1]


def all_finite(tree):
    """Whether every element of every array is finite: one reduction over the arrays joined,
    where Flax's DynamicScale reduces each of ResNet-50's 161 arrays on its own and chains the
    answers. On an H200 (fp16, b256) that moved compare's step from 0.966 to 0.975 of the plain
    Flax loop; most of what is left is the scaling itself (BENCHMARKS.md, "The fp16 loss scale
    taken apart")."""
    leaves = jax.tree_util.tree_leaves(tree)
    return jnp.all(jnp.isfinite(jnp.concatenate([jnp.ravel(x) for x in leaves])))


def next_scale(scale: DynamicScale, finite) -> DynamicScale:
    """Flax's (and PyTorch GradScaler's) rule: after `growth_interval` finite steps in a row the
    scale grows by `growth_factor`; an overflowed step multiplies it by `backoff_factor` and
    restarts the count."""
    grow = scale.fin_steps == scale.growth_interval
    bigger = jnp.minimum(scale.scale * scale.growth_factor, jnp.finfo(jnp.float32).max)
    smaller = scale.scale * scale.backoff_factor
    if scale.minimum_scale is not None:
        smaller = jnp.maximum(smaller, scale.minimum_scale)
    return scale.replace(
        scale=jnp.where(finite, jnp.where(grow, bigger, scale.scale), smaller),
        fin_steps=jnp.where(grow | ~finite, 0, scale.fin_steps + 1))


def _shard_map(f, mesh, in_specs, out_specs):
    """shard_map without the replication check: with it, jax differentiates the replicated
    params through an implicit broadcast whose transpose is a psum (a second all-reduce)."""
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    from jax.experimental.shard_map import shard_map  # jax < 0.6
    return shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)


def state_specs(state: TrainState) -> TrainState:
    """Partition specs of the state: everything replicated but the per-device BN statistics."""
    return TrainState(P(), P(AXIS), P(), None if state.dynamic_scale is None else P())


def build(model, tx, mesh, state: TrainState, donate: bool = True,
          static_scale: Optional[float] = None, flat: bool = False):
    """The jitted step(state, images, labels) -> (state, per-device losses) over `mesh`:
    shard_map over its devices; with one device, a plain jit without any collective."""
    if mesh.size > 1:
        specs = state_specs(state)
        fn = _shard_map(partial(local_step, model, tx, AXIS, static_scale, flat), mesh,
                        in_specs=(specs, P(AXIS), P(AXIS)), out_specs=(specs, P(AXIS)))
    else:
        fn = partial(local_step, model, tx, None, static_scale, False)
    return jax.jit(fn, donate_argnums=(0,) if donate else ())


def initial_state(model, tx, key, image_size: int, mesh, dynamic_scale: bool) -> TrainState:
    """Parameters and optimizer state created on the devices, replicated; BN statistics one set
    per device. Jitted, so every process of a job computes the same values (no broadcast)."""
    world = mesh.size

    def make(key):
        variables = init(model, key, image_size)
        params = variables["params"]
        stats = jax.tree_util.tree_map(
            lambda x: jnp.broadcast_to(x, (world,) + x.shape), variables.get("batch_stats", {}))
        scale = DynamicScale(fin_steps=jnp.int32(0), scale=jnp.float32(2.0 ** 16)) \
            if dynamic_scale else None
        return TrainState(params, stats, tx.init(params), scale)
    shapes = jax.eval_shape(make, key)
    return jax.jit(make, out_shardings=shardings(mesh, shapes))(key)


def shardings(mesh, state_shapes: TrainState) -> TrainState:
    """NamedShardings for every leaf of a state (for the jitted initialisation)."""
    specs = state_specs(state_shapes)

    def fill(spec, subtree):
        return jax.tree_util.tree_map(lambda _: NamedSharding(mesh, spec), subtree)
    return TrainState(*(None if sub is None else fill(spec, sub)
                        for spec, sub in zip(specs, state_shapes)))
