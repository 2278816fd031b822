"""The batch search in one process (backends/batchprobe.py) with a toy trainer: a probe out of
memory ends only itself, the last probe's trainer goes on when it is the one chosen, and a search
that finds nothing says why."""
import time

import pytest

from backends import batchprobe, harness, phases
from backends.protocol import RunSpec, Unsupported


class Toy(harness.Trainer):
    def __init__(self, spec, fits, step_s):
        if spec.batch_size > fits:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                               "{} bytes".format(spec.batch_size * 10 ** 8))
        self.spec, self.step_s = spec, step_s

    def step(self):
        time.sleep(self.step_s(self.spec.batch_size))


def _search(fits=50, step_s=lambda b: 0.01, start=32, bounds=(8, 128), **asked):
    built = []

    def setup(spec):
        built.append(spec.batch_size)
        return Toy(spec, fits, step_s)
    spec = RunSpec("caffe2", "caffe2_torch", batch_size=start, batch_auto=True, steps=4,
                   warmup_steps=1, windows=2, search=dict({"bounds": list(bounds), "budget_s": 60}, **asked))
    phases._marks.clear()
    trainer = batchprobe.in_process(spec, setup, harness.measure, harness._status)
    return spec, trainer, built, batchprobe.settings()["batch_search"]


def test_an_out_of_memory_probe_ends_only_itself_and_the_last_probe_goes_on():
    spec, trainer, built, record = _search()
    assert built == [32, 64, 48]  # one build per probe, none after: 48 was the last and fastest
    assert [(p["batch_size"], p["status"]) for p in record["probes"]] == [
        (32, "ok"), (64, "oom"), (48, "ok")]
    assert "can't allocate memory" in record["probes"][1]["reason"]
    assert (spec.batch_size, trainer.spec.batch_size, record["reused"]) == (48, 48, True)
    assert record["where"] == "in the cell's process" and record["seconds"] >= 0
    assert "batch_searched" in phases.record() and "timed_start" not in phases.record()


def test_a_start_out_of_memory_times_the_images_its_steps_were_planned_for():
    # the plan set 4 steps for a start of 64 (256 images); 64 does not fit, 48 is chosen: 6 steps
    spec, trainer, built, record = _search(start=64, bounds=(8, 64), images=4 * 64)
    assert [(p["batch_size"], p["status"]) for p in record["probes"]] == [
        (64, "oom"), (32, "ok"), (48, "ok")]
    assert (spec.batch_size, spec.steps) == (48, 6)  # the spec harness.run then measures
    assert [(p["steps"], p["warmup_steps"]) for p in record["probes"]] == [(2, 1), (4, 1), (4, 1)]
    spec, _, _, _ = _search(start=64, bounds=(8, 64))  # steps the plan did not set: its own
    assert (spec.batch_size, spec.steps) == (48, 4)


def test_a_first_probe_at_the_maximum_only_shows_the_batch_fits_and_the_cell_goes_on_with_it():
    spec, trainer, built, record = _search(start=64, bounds=(8, 64), fits=64)
    assert built == [64] and record["stopped"] == "reached the maximum, 64"
    assert [(p["batch_size"], p["steps"], p["warmup_steps"]) for p in record["probes"]] == [
        (64, 2, 1)]  # FIT: 2 timed steps, not PROBE's 4 (the cell's 4 at most)
    assert (spec.batch_size, spec.steps, record["reused"]) == (64, 4, True)


def test_a_chosen_batch_that_is_not_the_last_probe_is_built_afresh():
    # per image, batch 32 is fastest: 64 is slower, so the search stops and goes back to 32
    spec, trainer, built, record = _search(fits=10 ** 6, step_s=lambda b: 0.01 if b <= 32 else 0.05)
    assert built == [32, 64, 32]
    assert record["stopped"].startswith("batch 64 gains -")
    assert (spec.batch_size, trainer.spec.batch_size, trainer.spec.probe) == (32, 32, False)
    assert "reused" not in record


def test_a_search_where_nothing_fits_fails_with_the_first_probes_words():
    with pytest.raises(batchprobe.BatchSearchFailed, match=r"^batch search from 8: the probe at "
                       r"batch 8 ended oom: RuntimeError: DefaultCPUAllocator: can't allocate "):
        _search(fits=4, start=8)
    assert harness.is_oom(batchprobe.BatchSearchFailed("... can't allocate memory ..."))


def test_an_unsupported_cell_is_the_cells_answer_not_a_probes():
    def setup(spec):
        raise Unsupported("bf16 needs AVX-512")
    spec = RunSpec("caffe2", "caffe2_torch", batch_size=32, batch_auto=True,
                   search={"bounds": [8, 128], "budget_s": 60})
    with pytest.raises(Unsupported, match="AVX-512"):
        batchprobe.in_process(spec, setup, harness.measure, harness._status)


def test_a_cell_whose_search_ended_below_its_start_is_read_back_as_the_planned_cell(tmp_path):
    # a tuned H200 cell planned at 15 steps of 1024 that chose 512 times 30 steps: its result is
    # still the cell the campaign planned (same hash), not a spec "changed after the run"
    from dataclasses import replace

    from compare.loading import load_result
    cell = RunSpec("caffe2", "caffe2_torch", batch_size=64, batch_auto=True, steps=4,
                   warmup_steps=1, windows=2, mode="tuned")
    spec = replace(cell, search={"bounds": [8, 64], "budget_s": 60, "images": 4 * 64})
    phases._marks.clear()
    harness.run(spec, str(tmp_path / "r.json"), lambda s: Toy(s, 50, lambda b: 0.01))
    result = load_result(tmp_path / "r.json")  # validate.result: the spec re-hashed
    assert (result.status, result.spec["batch_size"], result.spec["steps"]) == ("ok", 48, 6)
    assert result.spec_hash == result.spec["spec_hash"] == cell.spec_hash


def test_a_probe_out_of_memory_in_tensorflow_words_is_recorded_with_its_own_line_first():
    """A probe's reason was the type and the message's last 500 characters: for TensorFlow's
    long graph errors its first line (the one the batch search prints) was a frame cut midway."""
    from tests.backends.test_harness import TF_OOM_LINE, TF_OOM_MESSAGE

    class ResourceExhaustedError(RuntimeError):
        pass

    class TfToy(Toy):
        def __init__(self, spec, fits, step_s):
            if spec.batch_size > fits:
                raise ResourceExhaustedError(TF_OOM_MESSAGE)
            self.spec, self.step_s = spec, step_s

    spec = RunSpec("tf", "tf_horovod", batch_size=32, batch_auto=True, steps=4, warmup_steps=1,
                   windows=2, search={"bounds": [8, 128], "budget_s": 60})
    phases._marks.clear()
    batchprobe.in_process(spec, lambda s: TfToy(s, 50, lambda b: 0.01), harness.measure,
                          harness._status)
    oom = batchprobe.settings()["batch_search"]["probes"][1]
    assert (oom["batch_size"], oom["status"]) == (64, "oom")
    assert oom["reason"].splitlines()[0] == "ResourceExhaustedError: " + TF_OOM_LINE
