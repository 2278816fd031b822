"""A plain Flax training loop of the same ResNet-50, and compare's own JAX step timed the same way:
the yardstick of issue 23 ("JAX through compare at >= 0.98 x a plain Flax loop").

No harness, no subprocess per cell: one process, one device, the step compiled ahead of time,
`--warmup` steps, then `--steps` steps timed with one sync at the end (or every `--sync-every`
steps, on the whole state, as compare's harness does between its windows). Prints one JSON line
per precision x variant: img/s, compile seconds, and a fingerprint of the compiled program (a hash
of its optimized HLO, which holds the algorithms autotuning picked) with the cuDNN convolution
algorithm ids it uses.

Variants (--variants, comma list):
  plain    jit of forward, backward, optax SGD momentum; no loss scaling; sync once at the end
  jitcall  the same step called through jax.jit's own dispatch instead of the compiled object
  windows  plain, synced every --sync-every steps on the whole state (compare's windows)
  ours     compare's step (backends/jax/step.py: dynamic loss scale in fp16, per-device BN axis)
  ours1    compare's step with a static loss scale of 1 (no scaling: plain's arithmetic)
  ours128  compare's step with a static loss scale of 128 (a scale XLA cannot fold away)
  nocheck  compare's dynamic scale with step.all_finite a constant True (no check, no select:
           what the scaling alone costs)
  losscheck compare's dynamic scale checking one small gradient array only (the select and the
           scale's update kept, the reduction over the gradients gone: what that reduction costs)
  sumcheck compare's dynamic scale with the check as one sum per gradient array, added up (XLA
           may fuse each sum into the kernel that makes its gradient)
  flat     compare's dynamic scale differentiating with respect to one vector of all parameters
           (step.local_step's flat=True, as across devices): the gradients are one array, so the
           unscaling and the check are one kernel
Each line also counts the compiled program's kernels (the entry computation's fusions,
custom calls and other launches), so two variants' programs can be told apart.

    python bench/flax_loop.py --precision fp32,tf32,bf16,fp16 --batch-size 256 --variants plain,ours
"""
import argparse
import json
import os
import sys
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from backends.jax import step as ours  # noqa: E402  (compare's step)
from backends.jax.models import build, init  # noqa: E402  (the network only)
from backends.jax.train import PRECISIONS, program_fingerprint  # noqa: E402


def plain_step(model, tx):
    def train_step(params, stats, opt_state, images, labels):
        def loss_fn(p):
            logits, upd = model.apply({"params": p, "batch_stats": stats}, images, train=True,
                                      mutable=["batch_stats"])
            loss = optax.softmax_cross_entropy_with_integer_labels(
                logits.astype(jnp.float32), labels).mean()
            return loss, upd["batch_stats"]
        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_stats, opt_state, loss
    return jax.jit(train_step, donate_argnums=(0, 1, 2))


def fingerprint(compiled) -> dict:
    """As compare's JAX results record it (train.program_fingerprint)."""
    facts = program_fingerprint(compiled.as_text())
    return {"fingerprint": facts["program_fingerprint"], "conv_algorithms": facts["conv_algorithms"]}


OURS = ("ours", "ours1", "ours128", "nocheck", "losscheck", "sumcheck", "flat")  # compare's step


def kernels(text: str) -> int:
    """Instructions of the optimized program's ENTRY computation that launch work on the device
    (not parameters, tuples, bitcasts or constants)."""
    entry = text[text.index("\nENTRY "):]
    entry = entry[:entry.index("\n}")]
    idle = ("parameter(", "tuple(", "get-tuple-element(", "bitcast(", "constant(")
    return sum(1 for line in entry.splitlines()[1:] if "=" in line
               and not any(" " + w in line for w in idle))


def setup(variant, precision, a):
    """(call(state) -> (state, loss), initial state, facts): the step of `variant`, compiled."""
    dtype, matmul, _ = PRECISIONS[precision]
    jax.config.update("jax_default_matmul_precision", matmul)
    model = build("resnet50", dtype=dtype)
    tx = optax.sgd(0.01, momentum=0.9)
    key = jax.random.PRNGKey(1234)
    shape = (a.batch_size, a.image_size, a.image_size, 3)
    images = jax.random.normal(jax.random.fold_in(key, 1), shape, jnp.float32)
    labels = jax.random.randint(jax.random.fold_in(key, 2), (a.batch_size,), 0, 1000)
    started = time.perf_counter()
    if variant in OURS:
        mesh = Mesh(np.array(jax.devices()[:1]), (ours.AXIS,))
        dynamic = precision == "fp16" and variant not in ("ours1", "ours128")
        state = ours.initial_state(model, tx, key, a.image_size, mesh, dynamic)
        static = {"ours1": 1.0, "ours128": 128.0}.get(variant)
        jitted = ours.build(model, tx, mesh, state, True, static)
        if variant == "flat":
            jitted = jax.jit(partial(ours.local_step, model, tx, None, None, True),
                             donate_argnums=(0,))
        check = ours.all_finite
        if variant == "nocheck":
            ours.all_finite = lambda tree: jnp.array(True)
        elif variant == "losscheck":  # one small gradient array instead of all of them
            ours.all_finite = lambda tree: jnp.isfinite(jax.tree_util.tree_leaves(tree)[-1]).all()
        elif variant == "sumcheck":
            ours.all_finite = lambda tree: jnp.isfinite(
                sum(jnp.sum(x) for x in jax.tree_util.tree_leaves(tree)))
        try:
            compiled = jitted.lower(state, images, labels).compile()
        finally:
            ours.all_finite = check

        def call(s):
            return compiled(s, images, labels)
    else:
        variables = jax.jit(lambda k: init(model, k, a.image_size))(key)
        params, stats = variables["params"], variables["batch_stats"]
        state = (params, stats, tx.init(params))
        jitted = plain_step(model, tx)
        compiled = jitted.lower(*state, images, labels).compile()
        run = jitted if variant == "jitcall" else compiled

        def call(s):
            *s, loss = run(*s, images, labels)
            return tuple(s), loss
    facts = dict(fingerprint(compiled), compile_s=round(time.perf_counter() - started, 2),
                 kernels=kernels(compiled.as_text()))
    return call, state, facts


def measure(call, state, a, sync_every):
    """(img/s, last loss, state): `state` is donated step by step, so the final one goes on."""
    loss = None
    for _ in range(a.warmup):
        state, loss = call(state)
    jax.block_until_ready((state, loss))
    t0 = time.perf_counter()
    for i in range(a.steps):
        state, loss = call(state)
        if sync_every and (i + 1) % sync_every == 0:
            jax.block_until_ready((state, loss))  # as the harness does at each window's end
    jax.block_until_ready(loss)
    ips = a.batch_size * a.steps / (time.perf_counter() - t0)
    return ips, float(np.asarray(loss).mean()), state


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--variants", default="plain")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--sync-every", type=int, default=6, help="windows variant: steps per window")
    a = ap.parse_args()
    for precision in a.precision.split(","):
        built = {}  # windows times the plain step: one compile for both
        for variant in a.variants.split(","):
            base = "plain" if variant == "windows" else variant
            if base not in built:
                built[base] = setup(base, precision, a)
            call, state, facts = built[base]
            ips, loss, state = measure(call, state, a, a.sync_every if variant == "windows" else 0)
            built[base] = (call, state, facts)
            print(json.dumps(dict(precision=precision, variant=variant, images_per_sec=round(ips, 2),
                                  loss=round(loss, 4), device=jax.devices()[0].device_kind,
                                  xla_flags=os.environ.get("XLA_FLAGS", ""), **facts)), flush=True)


if __name__ == "__main__":
    main()
