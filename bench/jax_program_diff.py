"""Compare's JAX training step against the plain Flax loop's (bench/flax_loop.py), as programs:
the ops of the lowered StableHLO, the precision attributes of every convolution and dot, and the
top-level instructions of the compiled HLO (each one a kernel on a GPU). Runs on a CPU:

    JAX_PLATFORMS=cpu python3 bench/jax_program_diff.py --precision fp32 [--batch-size 8 --image-size 64]

Issue 35 asked where JAX's fp32 gap to the plain loop (0.96) comes from; candidates in the
program were the flat-parameter all-reduce transform, the BN implementation, the matmul
precision, the dtype of the loss and the donated buffers. This prints what differs.
"""
import argparse
import collections
import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flax_loop  # noqa: E402  (the plain loop's step)

from backends.jax import step as ours  # noqa: E402  (compare's)
from backends.jax.models import build, init  # noqa: E402
from backends.jax.train import PRECISIONS  # noqa: E402


def programs(precision: str, batch: int, size: int):
    """(compare's lowered step, the plain loop's), at `precision`, as JaxTrainer builds them."""
    dtype, matmul, _ = PRECISIONS[precision]
    jax.config.update("jax_default_matmul_precision", matmul)
    model, tx, key = build("resnet50", dtype=dtype), optax.sgd(0.01, momentum=0.9), jax.random.PRNGKey(1)
    images = jax.random.normal(key, (batch, size, size, 3), jnp.float32)
    labels = jax.random.randint(key, (batch,), 0, 1000)
    mesh = Mesh(np.array(jax.devices()[:1]), (ours.AXIS,))
    state = ours.initial_state(model, tx, key, size, mesh, precision == "fp16")
    sharded = NamedSharding(mesh, P(ours.AXIS))
    mine = ours.build(model, tx, mesh, state, True, None, False).lower(
        state, jax.device_put(images, sharded), jax.device_put(labels, sharded))
    variables = jax.jit(lambda k: init(model, k, size))(key)
    params, stats = variables["params"], variables["batch_stats"]
    plain = flax_loop.plain_step(model, tx).lower(params, stats, tx.init(params), images, labels)
    return mine, plain


def counted(pattern: str, text: str) -> collections.Counter:
    return collections.Counter(re.findall(pattern, text))


def entry(compiled: str) -> collections.Counter:
    """The compiled program's top-level instructions by opcode."""
    body = compiled[compiled.index("ENTRY"):]
    return counted(r"= [^=]*? ([a-z][a-z-]*)\(", body[:body.index("\n}\n")])


def differ(a: collections.Counter, b: collections.Counter) -> dict:
    return {k: a[k] - b[k] for k in sorted(set(a) | set(b)) if a[k] != b[k]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--image-size", type=int, default=64)
    a = ap.parse_args()
    mine, plain = programs(a.precision, a.batch_size, a.image_size)
    ops = r"(?:stablehlo|mhlo|chlo)\.([a-z_]+)"
    precision = r"precision = \[[^\]]*\]|precision_config = [^,)]*"
    print("lowered ops, compare's minus the loop's:", differ(counted(ops, mine.as_text()),
                                                           counted(ops, plain.as_text())))
    print("precision attributes, compare's minus the loop's:",
          differ(counted(precision, mine.as_text()), counted(precision, plain.as_text())) or "none")
    print("precision attributes (compare's):", dict(counted(precision, mine.as_text())))
    print("compiled top-level instructions, compare's minus the loop's:",
          differ(entry(mine.compile().as_text()), entry(plain.compile().as_text())))


if __name__ == "__main__":
    main()
