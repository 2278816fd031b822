"""The networks this backend trains, by name (backends/networks.py lists them): name -> Flax
module class (num_classes, dtype, axis_name); `init` gives any of them PyTorch's initial values
(each class's `initial` rule), `count` and `layers` read them back for the record and the tests.
"""
from functools import partial
from typing import Any, Dict, List

import jax
import jax.numpy as jnp
from flax import linen as nn

from .. import networks
from ..protocol import Unsupported
from .inception import Inception3, Inception4
from .resnet import ResNet50, ResNet152
from .vgg import VGG16

MODELS = {"resnet50": ResNet50, "resnet152": ResNet152, "inception3": Inception3,
          "inception4": Inception4, "vgg16": VGG16}


def build(name: str, num_classes: int = 1000, dtype: Any = jnp.float32, axis_name=None):
    """The network called `name`; Unsupported (a recorded result) with the reason otherwise.
    axis_name: BN statistics over every device on that mesh axis (SyncBN)."""
    if name not in MODELS:
        raise Unsupported(networks.why_not(name))
    return MODELS[name](num_classes=num_classes, dtype=dtype, axis_name=axis_name)


def init(model: nn.Module, key, image_size: int = 224) -> Dict[str, Any]:
    """{'params': ...} (and 'batch_stats' where the model has batch norm) with PyTorch's initial
    values (the model's `initial` rule), for NHWC images.

    Flax gives the structure (traced, not run); the values are cut from one normal and one
    uniform vector: XLA compiles one random-number kernel per variable otherwise, which takes
    ~15 s on a small CPU. Jit-able; float32 throughout.
    """
    x = jnp.zeros((1, image_size, image_size, 3), jnp.float32)
    shapes = jax.eval_shape(partial(model.init, train=False), key, x)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(shapes)
    fc_in = shapes["params"]["fc"]["kernel"].shape[0]
    specs = [model.initial(tuple(k.key for k in path), leaf.shape, fc_in) for path, leaf in leaves]
    sizes = {kind: sum(int(leaf.size) for (_, leaf), (k, _) in zip(leaves, specs) if k == kind)
             for kind in ("normal", "uniform")}
    k_normal, k_uniform = jax.random.split(key)
    pools = {"normal": jax.random.normal(k_normal, (sizes["normal"],), jnp.float32),
             "uniform": jax.random.uniform(k_uniform, (sizes["uniform"],), jnp.float32, -1.0, 1.0)}
    used = {"normal": 0, "uniform": 0}
    values = []
    for (_, leaf), (kind, scale) in zip(leaves, specs):
        if kind == "constant":
            values.append(jnp.full(leaf.shape, scale, jnp.float32))
            continue
        start, used[kind] = used[kind], used[kind] + int(leaf.size)
        values.append(pools[kind][start:used[kind]].reshape(leaf.shape) * scale)
    return jax.tree_util.tree_unflatten(treedef, values)


def count(tree) -> int:
    return sum(int(leaf.size) for leaf in jax.tree_util.tree_leaves(tree))


def layers(model: nn.Module, variables, image_size: int = 64) -> List[Dict[str, Any]]:
    """Every conv, BN and dense layer in call order: path, stride (convs: input / output size),
    and its trainable shapes in PyTorch's convention (OIHW kernels, (out, in) dense weights)."""
    found = []

    def record(next_fun, args, kwargs, context):
        out = next_fun(*args, **kwargs)
        module = context.module
        if context.method_name == "__call__" and isinstance(module, (nn.Conv, nn.BatchNorm, nn.Dense)):
            entry = {"path": "/".join(module.path), "kind": type(module).__name__}
            if isinstance(module, nn.Conv):
                entry["stride"] = args[0].shape[1] // out.shape[1]
                entry["kernel"] = list(module.variables["params"]["kernel"].shape)  # HWIO
            found.append(entry)
        return out

    x = jnp.zeros((1, image_size, image_size, 3), jnp.float32)
    with nn.intercept_methods(record):
        jax.eval_shape(lambda v: model.apply(v, x, train=False), variables)
    params = variables["params"]
    for entry in found:
        node = params
        for part in entry["path"].split("/"):
            node = node[part]
        entry["shapes"] = _torch_shapes(entry["kind"], node)
    return found


def _torch_shapes(kind: str, params) -> List[List[int]]:
    if kind == "Conv":
        h, w, i, o = params["kernel"].shape
        return [[o, i, h, w]] + ([list(params["bias"].shape)] if "bias" in params else [])
    if kind == "Dense":
        i, o = params["kernel"].shape
        return [[o, i], list(params["bias"].shape)]
    return [list(params["scale"].shape), list(params["bias"].shape)]
