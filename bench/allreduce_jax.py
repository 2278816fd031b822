"""How long the gradient all-reduce of JAX's 2-GPU step takes on its own.

The same pmean the training step does (backends/jax/step.py), over ResNet-50's gradient tree
(161 float32 arrays, 25.6 M values, 102 MB), outside any training step: no backward pass to
overlap with. Also one flat buffer of the same size (one collective instead of XLA's combined
ones) and the tree in bf16 (half the bytes). Prints one JSON line per case: milliseconds per
all-reduce (median of 5 rounds of 50), and what that is in a step of `--step-ms`.

    python bench/allreduce_jax.py --step-ms 37.9
"""
import argparse
import json
import os
import sys
from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from medians import ms_per_call  # noqa: E402  (bench/, this script's folder)

from backends.jax.models import init  # noqa: E402
from backends.jax.resnet import ResNet50  # noqa: E402  (the network only)
from backends.jax.step import _shard_map  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--step-ms", type=float, default=0.0, help="a 1-GPU step, for the share")
    a = ap.parse_args()
    devices = jax.devices()
    mesh = Mesh(devices, ("d",))
    params = jax.jit(partial(init, ResNet50()))(jax.random.PRNGKey(0))["params"]
    leaves = jax.tree_util.tree_leaves(params)
    nbytes = sum(x.size * 4 for x in leaves)

    def allreduce(tree):
        return jax.tree_util.tree_map(lambda g: jax.lax.pmean(g, "d"), tree)
    reduce = jax.jit(_shard_map(allreduce, mesh, in_specs=(P(),), out_specs=P()))
    flat = jnp.concatenate([x.ravel() for x in leaves])
    half = jax.tree_util.tree_map(lambda x: x.astype(jnp.bfloat16), params)
    cases = [("gradient tree, float32", params, nbytes),
             ("one flat buffer, float32", flat, nbytes),
             ("gradient tree, bf16", half, nbytes // 2)]
    for name, arg, size in cases:
        ms = ms_per_call(partial(reduce, arg), jax.block_until_ready)
        row = {"devices": len(devices), "case": name, "arrays": len(jax.tree_util.tree_leaves(arg)),
               "MB": round(size / 1e6, 1), "ms": round(ms, 3),
               "algbw_GB_s": round(size / ms / 1e6, 1)}
        if a.step_ms:
            row["share_of_step"] = round(ms / a.step_ms, 4)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
