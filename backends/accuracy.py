"""The one time-to-accuracy loop every framework uses (docs/accuracy.md), as harness.measure is
for throughput: initialisation, epochs, evaluations, the stop at the target, the MLPerf log.

Standard library only, Python >= 3.8. Time to train is MLPerf's: from run_start (after set-up
and the trainer's warm_up, before the first training data is touched) to run_stop; both are
log events, and the result records the very milliseconds the log says, so a score computed
from the logs equals one computed from the results. Initialisation (set-up) and compilation
(warm_up) are recorded beside it. Only rank 0 writes the log (beside its result file).
"""
import math
import os
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import mllog, phases, recipe
from .pipelines import accuracy_data
from .protocol import RunSpec, Unsupported


class Run:
    """One accuracy run: `begin()` before the trainer is set up (init_start), `measure(trainer)`
    to train it to the target, `outcome()` for the result's status and reason."""

    def __init__(self, spec: RunSpec, log_path: Optional[str]):
        self.spec, self.log_path = spec, log_path
        self.log = mllog.Logger(log_path)
        self.init_start = self.log.start("init_start")
        self.reached, self.best = False, None  # type: Tuple[bool, Optional[float]]
        self.diverged = None  # type: Optional[str]
        self.eval_images = 0  # every image of val/, what each evaluation must count

    def outcome(self) -> Tuple[str, Optional[str]]:
        """ok when the target was reached; else not_converged, saying the best accuracy."""
        if self.reached:
            return "ok", None
        best = "none" if self.best is None else "{:.4f}".format(self.best)
        epochs = self.spec.max_epochs
        why = self.diverged or "{} epoch{} trained".format(epochs, "s" if epochs != 1 else "")
        return "not_converged", "target accuracy {:g} not reached: best top-1 {} ({})".format(
            self.spec.target_accuracy, best, why)

    def _submission(self, trainer, train_images: int, eval_images: int, rec: Dict[str, Any]):
        """The MLPerf log's description of the run (open division ResNet), logged in init."""
        spec, log = self.spec, self.log
        runtime = getattr(trainer, "runtime", None)
        device = (runtime.describe().get("device_name") if runtime is not None else None) \
            or spec.device
        for key, value in (("submission_org", "compare"),
                           ("submission_platform", "{}x {}".format(spec.world_size, device)),
                           ("submission_division", "open"), ("submission_status", "research"),
                           ("submission_benchmark", "resnet"), ("cache_clear", False),
                           ("number_of_nodes", spec.nodes), ("accelerators_per_node", spec.gpus),
                           ("seed", spec.run_seed), ("train_samples", train_images),
                           ("eval_samples", eval_images)):
            log.event(key, value)
        for key, value in recipe.mllog_hyperparameters(rec).items():
            log.event(key, value)

    def measure(self, trainer, inject: Callable[[RunSpec, str, int], None]) -> Dict[str, Any]:
        """Warm up (inside init), then train epoch by epoch until the target or max_epochs,
        evaluating every eval_every epochs and after the last. Returns the result's fields."""
        spec = self.spec
        inject(spec, "setup", trainer.rank)
        train, val = accuracy_data.parts(spec.data)
        train_images, eval_images = int(train.manifest["images"]), len(accuracy_data.val_files(
            train, val))
        self.eval_images = eval_images
        spe = int(trainer.steps_per_epoch())
        if spe < 1:  # no step an epoch: nothing would train, and the run would read as a model
            # that did not learn (or, its loss never set, one that diverged); a rerun is the same
            raise Unsupported(
                "{} holds {} training image{}, fewer than the global batch of {} ({} x {} "
                "worker{}): an epoch would be no step; give a --batch-size of at most {}, or a "
                "folder with more images".format(
                    train.manifest.get("class_root") or train.root, train_images,
                    "" if train_images == 1 else "s", spec.global_batch, spec.batch_size,
                    spec.world_size, "" if spec.world_size == 1 else "s",
                    max(1, train_images // spec.world_size)))
        rec = recipe.record(spec.global_batch, spe, spec.max_epochs, spec.image_size)
        self._submission(trainer, train_images, eval_images, rec)
        started = time.perf_counter()
        trainer.warm_up()  # compilation and autotuning: initialisation, not time to train
        trainer.sync()
        compile_s = time.perf_counter() - started
        trainer.barrier()
        phases.mark("warmup_done")
        inject(spec, "timed", trainer.rank)
        init_stop = self.log.end("init_stop")
        run_start = self.log.start("run_start", time_ms=init_stop)
        phases.mark("timed_start", run_start / 1e3)
        try:
            trained = self._train(trainer, spe, run_start)
        except BaseException:
            self.log.end("run_stop", metadata={"status": "aborted"})
            self.log.close()
            raise
        run_stop = self.log.end("run_stop", metadata={
            "status": "success" if self.reached else "aborted"})
        phases.mark("timed_end", run_stop / 1e3)
        self.log.close()
        return self._fields(trained, rec, spe, train_images, eval_images, compile_s,
                            init_stop, run_start, run_stop)

    def _train(self, trainer, spe: int, run_start: int) -> Dict[str, List]:
        """The epochs: the recipe's rate before every step, an evaluation every eval_every
        epochs and after the last; stops at the target or when the loss is not finite."""
        spec, log = self.spec, self.log
        out = {"evals": [], "epoch_images_per_sec": [], "epoch_loss": [], "train_s": []}
        step, first_loss = 0, None
        for epoch in range(1, spec.max_epochs + 1):
            if (epoch - 1) % spec.eval_every == 0:
                log.start("block_start", metadata={"first_epoch_num": epoch, "epoch_count": min(
                    spec.eval_every, spec.max_epochs - epoch + 1)})
            log.start("epoch_start", metadata={"epoch_num": epoch})
            t0 = time.perf_counter()
            for _ in range(spe):
                trainer.set_learning_rate(recipe.learning_rate(step, spe, spec.global_batch,
                                                               spec.max_epochs))
                trainer.step()
                step += 1
                if first_loss is None:
                    first_loss = trainer.loss()
            trainer.sync()
            seconds = time.perf_counter() - t0
            log.end("epoch_stop", metadata={"epoch_num": epoch})
            loss = trainer.loss()
            out["train_s"].append(seconds)
            out["epoch_images_per_sec"].append(spe * spec.global_batch / seconds)
            out["epoch_loss"].append(loss if math.isfinite(loss) else None)
            out["epochs"], out["first_loss"] = epoch, first_loss
            if not math.isfinite(loss):
                self.diverged = "the training loss was {} after epoch {}".format(loss, epoch)
            if epoch % spec.eval_every == 0 or epoch == spec.max_epochs or self.diverged:
                self._evaluate(trainer, epoch, run_start, out)
                log.end("block_stop", metadata={"first_epoch_num": epoch - (
                    epoch - 1) % spec.eval_every})
            if self.reached or self.diverged:
                break
        return out

    def _evaluate(self, trainer, epoch: int, run_start: int, out: Dict[str, List]) -> None:
        self.log.start("eval_start", metadata={"epoch_num": epoch})
        correct, total = trainer.evaluate()
        if int(total) != self.eval_images:  # a partial set's top-1 is not the run's accuracy
            raise RuntimeError("the evaluation after epoch {} counted {} images, not the {} of "
                               "val/: top-1 must be over every image of val/ "
                               "(backends/pipelines/accuracy_data.py)".format(
                                   epoch, int(total), self.eval_images))
        top1 = float(correct) / max(1, int(total))
        self.log.event("eval_accuracy", top1, metadata={"epoch_num": epoch})
        done = self.log.end("eval_stop", metadata={"epoch_num": epoch})
        out["evals"].append({"epoch": epoch, "accuracy": top1, "correct": int(correct),
                             "total": int(total), "time_s": (done - run_start) / 1e3})
        self.best = top1 if self.best is None else max(self.best, top1)
        if top1 >= self.spec.target_accuracy:
            self.reached = True

    def _fields(self, trained: Dict[str, Any], rec: Dict[str, Any], spe: int, train_images: int,
                eval_images: int, compile_s: float, init_stop: int, run_start: int,
                run_stop: int) -> Dict[str, Any]:
        spec, epochs = self.spec, trained.get("epochs", 0)
        images = epochs * spe * spec.global_batch
        train_s = sum(trained["train_s"])
        time_to_train = (run_stop - run_start) / 1e3
        accuracy = {
            "target": spec.target_accuracy, "reached": self.reached, "best": self.best,
            "epochs": epochs, "epochs_to_target": epochs if self.reached else None,
            "time_to_train_s": time_to_train, "init_s": (init_stop - self.init_start) / 1e3,
            "compile_s": compile_s, "evals": trained["evals"],
            "epoch_images_per_sec": trained["epoch_images_per_sec"],
            "epoch_loss": trained["epoch_loss"], "train_images": train_images,
            "eval_images": eval_images, "images_trained": images, "steps_per_epoch": spe,
            "seed": spec.run_seed, "recipe": rec,
            "mllog": os.path.basename(self.log_path) if self.log_path else None,
            "run_start_ms": run_start, "run_stop_ms": run_stop}
        last_loss = trained["epoch_loss"][-1] if trained["epoch_loss"] else None
        first = trained.get("first_loss")
        return {
            "images_per_sec": images / train_s if train_s > 0 else None,
            "timed_steps": epochs * spe, "wall_time_s": time_to_train,
            "step_time_ms": 1000.0 * train_s / max(1, epochs * spe),
            "global_batch": spec.global_batch, "accuracy": accuracy, "final_loss": last_loss,
            "first_loss": first if first is not None and math.isfinite(first) else None}


def begin(spec: RunSpec, result_path: str, rank: int) -> Run:
    """Before the trainer is set up: init_start, in `mlperf.log` beside the result file on rank 0
    (the other ranks log nothing)."""
    path = os.path.join(os.path.dirname(os.path.abspath(result_path)), mllog.FILE_NAME)
    return Run(spec, path if rank == 0 else None)
