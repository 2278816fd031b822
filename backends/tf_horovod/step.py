"""The compiled training step: forward, loss, backward, gradient averaging, SGD update.

One `tf.function` per run. With `xla` the forward and backward pass are compiled by XLA
(`jit_compile=True`); the Horovod allreduce and the update stay outside, where Horovod's ops run.
Loss scaling (fp16) works with the Keras 2 and the Keras 3 LossScaleOptimizer.
"""
import tensorflow as tf

from .runtime import MIRRORED, allreduce_name, keras_version


def _loss_fn(labels, logits):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=tf.cast(logits, tf.float32)))


def _scale(optimizer, loss):
    if hasattr(optimizer, "get_scaled_loss"):  # Keras 2 LossScaleOptimizer
        return optimizer.get_scaled_loss(loss)
    if hasattr(optimizer, "scale_loss"):  # Keras 3 LossScaleOptimizer
        return optimizer.scale_loss(loss)
    return loss


def _unscale(optimizer, grads):
    # Keras 3's LossScaleOptimizer unscales inside apply_gradients; Keras 2's needs asking
    if hasattr(optimizer, "get_unscaled_gradients"):
        return optimizer.get_unscaled_gradients(grads)
    return grads


def _gradients_fn(trainer, loss_fn):
    """(images, labels) -> (loss, scaled gradients): the part XLA may compile."""
    model, optimizer, divisor = trainer.model, trainer.optimizer, 1.0
    if trainer.distribution in MIRRORED:
        # Keras sums gradients over replicas: scale each replica's mean loss by 1/replicas
        divisor = float(trainer.strategy.num_replicas_in_sync)

    def gradients(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
            scaled = _scale(optimizer, loss / divisor)
        return loss, tape.gradient(scaled, model.trainable_variables)

    if trainer.xla:
        return tf.function(gradients, jit_compile=True)
    return gradients


def _keras3(trainer) -> bool:
    return keras_version().startswith("3")


def build_step(trainer, loss_fn=_loss_fn):
    """Return (step function, how gradients are averaged) for the trainer's distribution.
    loss_fn(labels, logits) -> mean loss (time to accuracy's has label smoothing: accuracy.py)."""
    model, optimizer, hvd = trainer.model, trainer.optimizer, trainer.hvd
    variables = model.trainable_variables
    gradients = _gradients_fn(trainer, loss_fn)

    def apply(grads):
        optimizer.apply_gradients(zip(_unscale(optimizer, grads), variables))

    if trainer.distribution in MIRRORED:
        strategy = trainer.strategy

        def replica_step(images, labels):
            loss, grads = gradients(images, labels)
            apply(grads)  # all-reduces across replicas inside apply_gradients
            return loss

        @tf.function
        def mirrored_step(images, labels):
            losses = strategy.run(replica_step, args=(images, labels))
            return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

        # MultiWorkerMirroredStrategy names its collective by communication options (train.py)
        ops = trainer.cross_device_ops if trainer.distribution == "multiworker" else \
            allreduce_name(strategy)
        return mirrored_step, "{} {}".format(trainer.strategy_name, ops)
    if hvd is None:
        @tf.function(jit_compile=trainer.xla)
        def single_step(images, labels):
            loss, grads = gradients(images, labels)
            apply(grads)
            return loss

        return single_step, None
    if trainer.xla or _keras3(trainer):
        # DistributedGradientTape cannot wrap an XLA-compiled tape, nor Keras 3 variables
        @tf.function
        def grouped_step(images, labels):
            loss, grads = gradients(images, labels)
            apply(hvd.grouped_allreduce(grads, op=hvd.Average))
            return loss

        return grouped_step, "horovod grouped_allreduce"

    @tf.function
    def tape_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
            scaled = _scale(optimizer, loss)
        tape = hvd.DistributedGradientTape(tape)
        apply(tape.gradient(scaled, variables))
        return loss

    return tape_step, "horovod DistributedGradientTape"
