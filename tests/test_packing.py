"""Packing: cells side by side on disjoint cores (GPUs on a GPU machine), the greedy schedule,
`--plan`, and that Ctrl-C, timeouts, the campaign lock and resume work with several cells in
flight. `compare` runs as a process with a fake framework interpreter (`--python caffe2=FAKE`:
the real harness, a trainer that sleeps) that holds its cells while a file exists."""
import json
import os
import signal
import sys
import time

import pytest

from backends.protocol import RunResult, RunSpec
from compare import resources, scheduler
from tests.helpers import (
    ANSWERS,
    compare,
    failing_python,
    kill_leftovers,
    processes_of,
    start_compare,
    wait_for,
    write_python,
)

# the real harness with a trainer that only sleeps; cells of the precisions in HANG hold in their
# steps while the file HOLD exists
FAKE = '''#!{python}
import os, sys, time
''' + ANSWERS + '''from backends import harness


class Held(harness.Trainer):
    def __init__(self, spec):
        self.spec = spec

    def step(self):
        while self.spec.precision in {hang!r} and os.path.exists({hold!r}):
            time.sleep(0.05)
        time.sleep(0.002)

    def describe(self):
        return {{"framework_version": "fake 1.0", "device_name": harness.cpu_name()}}


sys.exit(harness.main(Held, sys.argv[-2:]))
'''
CELLS = ["run", "--frameworks", "caffe2", "--precision", "fp32,bf16", "--device", "cpu",
         "--executor", "local", "--batch-size", "4", "--image-size", "32", "--steps", "20",
         "--warmup", "1", "--windows", "4"]
IDS = {"caffe2-fp32-w1-b4-s32-r0", "caffe2-bf16-w1-b4-s32-r0"}
TWO_CORES = {"COMPARE_OVERSUBSCRIBE": "1"}  # --concurrency 2 needs 2 cores; CI has exactly 2


def _fake(tmp_path, hang=(), hold=None):
    return write_python(tmp_path / "fake-python", FAKE.format(
        python=sys.executable, hang=tuple(hang), hold=str(hold or tmp_path / "no-such-file")))


def _results(root):
    return {p.stem: json.loads(p.read_text()) for p in (root / "results").glob("*.json")}


@pytest.fixture
def campaign(tmp_path):
    root = tmp_path / "campaign"
    yield root
    kill_leftovers(root)


def _spec(gpus, precision="fp32", fw="caffe2"):
    return RunSpec(fw, {"caffe2": "caffe2_torch"}.get(fw, fw), gpus=gpus, device="cuda",
                   precision=precision, batch_size=256)


# --- where cells go ------------------------------------------------------------------------------

def test_cores_split_by_numa_node_and_each_gpu_takes_cores_of_its_own_node(tmp_path):
    nodes = tmp_path / "devices" / "system" / "node"
    for n, cpus in ((0, "0-3,8-11"), (1, "4-7,12-15")):
        (nodes / "node{}".format(n)).mkdir(parents=True)
        (nodes / "node{}".format(n) / "cpulist").write_text(cpus + "\n")
    pci = tmp_path / "bus" / "pci" / "devices"
    for bus, node in (("0000:18:00.0", 0), ("0000:3b:00.0", 0), ("0000:86:00.0", 1),
                      ("0000:af:00.0", 1)):
        (pci / bus).mkdir(parents=True)
        (pci / bus / "numa_node").write_text("{}\n".format(node))
    by_node = resources.numa_nodes(range(16), tmp_path)
    assert by_node == {0: [0, 1, 2, 3, 8, 9, 10, 11], 1: [4, 5, 6, 7, 12, 13, 14, 15]}
    assert resources.gpu_node("00000000:86:00.0", tmp_path) == 1
    assert resources.gpu_node("00000000:99:00.0", tmp_path) is None
    gpus = ["0", "1", "2", "3"]
    of = {g: resources.gpu_node(b, tmp_path) for g, b in zip(gpus, ["00000000:18:00.0", "00000000:3B:00.0",
                                                                    "00000000:86:00.0", "00000000:AF:00.0"])}
    blocks = resources.gpu_cores(gpus, of, by_node)
    assert [resources.cpuset(blocks[g]) for g in gpus] == ["0-3", "8-11", "4-7", "12-15"]
    # a GPU whose node the machine does not say: every core in node order, split evenly
    blocks = resources.gpu_cores(gpus, dict(of, **{"3": None}), by_node)
    assert [resources.cpuset(blocks[g]) for g in gpus] == ["0-3", "8-11", "4-7", "12-15"]
    assert resources.numa_nodes([0, 1], tmp_path / "none") == {0: [0, 1]}


def test_a_cpu_pool_gives_each_worker_a_core_and_pins_only_when_cells_share_the_machine():
    pool = resources.core_pool(2, cores=[0, 1], nodes={0: [0, 1]})
    assert (pool.units, pool.pin, pool.need(1), pool.need(2), pool.need(3)) == (
        ["cores0", "cores1"], True, 1, 2, 2)
    assert pool.slot(["cores1"]).cores == (1,)
    serial = resources.core_pool(1, cores=[0, 1], nodes={0: [0, 1]})
    assert (serial.pin, serial.need(2), serial.slot(serial.units).cores) == (False, 1, ())
    assert resources.Slot(("2", "3"), (8, 9)).env() == {"CUDA_VISIBLE_DEVICES": "2,3",
                                                        "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_the_greedy_schedule_fills_free_gpus_in_sweep_order_and_two_gpu_cells_wait_for_two():
    specs = [_spec(g, p) for p in ("fp32", "fp16") for g in (1, 2)]
    pool = resources.Pool(["0", "1"], {"0": [0, 1], "1": [2, 3]}, gpu=True, pin=True)
    seconds = {"fp32": 60.0, "fp16": 30.0}
    items = scheduler.plan(specs, pool, 2, lambda s: seconds[s.precision] * s.gpus)
    got = [(it.spec.run_id, it.slot.gpus, resources.cpuset(it.slot.cores), it.start, it.end)
           for it in items]
    assert got == [("caffe2-fp32-g1-b256-s224-r0", ("0",), "0-1", 0.0, 60.0),
                   ("caffe2-fp16-g1-b256-s224-r0", ("1",), "2-3", 0.0, 30.0),
                   ("caffe2-fp32-g2-b256-s224-r0", ("0", "1"), "0-3", 60.0, 180.0),
                   ("caffe2-fp16-g2-b256-s224-r0", ("0", "1"), "0-3", 180.0, 240.0)]
    serial = scheduler.plan(specs, pool, 1, lambda s: seconds[s.precision] * s.gpus)
    assert [it.spec.run_id for it in serial] == [s.run_id for s in specs]
    assert serial[-1].end == 60 + 120 + 30 + 60


def test_the_repeats_of_an_auto_cell_wait_for_the_first_to_find_their_batch():
    # three repeats of a tuned cell on two free GPUs: r1 does not search a batch of its own beside
    # r0 (the search is once for all repeats: batchsearch.run_auto); once r0 has ended, r1 and r2
    # run side by side at its batch. A batch already found (an earlier session's) waits for none
    from dataclasses import replace
    auto = replace(_spec(1, "fp16"), batch_auto=True, mode="tuned")
    specs = [replace(auto, repeat=r) for r in range(3)] + [_spec(1, "fp32")]
    pool = resources.Pool(["0", "1"], {"0": [0, 1], "1": [2, 3]}, gpu=True, pin=True)
    items = scheduler.plan(specs, pool, 2, lambda s: 60.0)
    assert [(it.spec.run_id, it.start) for it in items] == [
        ("caffe2-fp16-g1-bauto-s224-tuned-r0", 0.0), ("caffe2-fp32-g1-b256-s224-r0", 0.0),
        ("caffe2-fp16-g1-bauto-s224-tuned-r1", 60.0), ("caffe2-fp16-g1-bauto-s224-tuned-r2", 60.0)]
    known = scheduler.plan(specs, pool, 2, lambda s: 60.0, known={auto.spec_hash})
    assert [it.start for it in known] == [0.0, 0.0, 60.0, 60.0]  # r0 and r1 at once
    assert known[1].spec.run_id == "caffe2-fp16-g1-bauto-s224-tuned-r1"
    started, searched = [], {}

    def run_cell(executor, spec, slot):
        started.append((spec.run_id, dict(searched)))
        searched[spec.spec_hash] = 512 if spec.batch_auto else None
        return RunResult(spec.run_id, "failed", spec.to_dict())
    with scheduler.Lanes(lambda: type("E", (), {"close": lambda self: None})(), pool, 2) as lanes:
        ran = [spec.run_id for spec, _ in lanes.run(specs[:3], run_cell, known=searched)]
    assert started[0] == ("caffe2-fp16-g1-bauto-s224-tuned-r0", {})
    assert all(found == {auto.spec_hash: 512} for _, found in started[1:]) and len(ran) == 3


def test_a_spec_that_takes_a_freed_specs_id_gets_its_own_hash():
    # the placer caches each auto cell's hash by id(spec); CPython reuses the id of a freed
    # object, so an entry must be checked to be the very spec asked about
    from dataclasses import replace
    fp16 = replace(_spec(1, "fp16"), batch_auto=True, mode="tuned")
    bf16 = replace(fp16, precision="bf16")
    placer = scheduler.Placer(resources.Pool(["0"], {"0": [0]}, gpu=True, pin=True), 1)
    assert placer._hash(fp16) == fp16.spec_hash
    placer.hashes[id(bf16)] = placer.hashes.pop(id(fp16))  # as if bf16 lived where fp16 did
    assert placer._hash(bf16) == bf16.spec_hash != fp16.spec_hash


def test_the_sixteen_cell_study_on_eight_gpus_never_shares_a_gpu():
    specs = [_spec(g, p, fw) for fw in ("caffe2", "jax") for p in ("fp32", "tf32", "fp16", "bf16")
             for g in (1, 2)]
    pool = resources.planned_gpus(8)
    items = scheduler.plan(specs, pool, 8, lambda s: 40.0)
    assert sorted(it.spec.run_id for it in items) == sorted(s.run_id for s in specs)
    for a in items:
        for b in items:
            if a is not b and a.start < b.end and b.start < a.end:
                assert not set(a.slot.gpus) & set(b.slot.gpus), (a, b)
    assert max(it.end for it in items) == 120.0  # 24 GPU-cells of 40 s on 8 GPUs: 3 rounds


def test_the_scheduler_asks_the_executor_for_its_pool(monkeypatch):
    """Local: this machine's cores. Slurm: the node of the allocation compare runs in (its cells
    steps, Slurm picks their cores), else one batch job after the other. --plan-gpus: its GPUs."""
    from compare import executors, frameworks
    ctx = executors.Context([frameworks.get("caffe2")], "cpu")
    for key, value in {"SLURM_JOB_ID": "77", "SLURM_CPUS_ON_NODE": "4", "SLURM_JOB_NUM_NODES": "1"}.items():
        monkeypatch.setenv(key, value)
    slurm, local = executors.load("slurm"), executors.load("local")
    pool, at_once = scheduler.pool_for(slurm, ctx, [1], 2)
    assert (pool.units, at_once, pool.assigned_by, pool.pin) == (["cores0", "cores1"], 2, "slurm", False)
    assert [pool.slot([u]).cpus for u in pool.units] == [2, 2]
    monkeypatch.delenv("SLURM_JOB_ID")
    pool, at_once = scheduler.pool_for(slurm, ctx, [1], 2)
    assert (pool.units, at_once) == (["all"], 1)
    pool, at_once = scheduler.pool_for(local, ctx, [1], 2)
    assert pool.assigned_by == "compare" and at_once == len(pool.units) == min(2, len(resources.allowed_cores()))
    pool, at_once = scheduler.pool_for(slurm, ctx, [1, 2], None, planned=8)
    assert (pool.units, at_once, pool.gpu) == ([str(i) for i in range(8)], 8, True)


def test_fewer_cells_than_the_concurrency_take_the_cores_an_idle_slot_would_keep(monkeypatch, tmp_path):
    # --concurrency 2 with one cell pinned it to one core of two, the other idle all the sweep
    from compare import executors, frameworks
    from compare.stages import plan as planning
    from compare.study import build
    ctx, local = executors.Context([frameworks.get("caffe2")], "cpu"), executors.load("local")
    monkeypatch.setattr(resources, "allowed_cores", lambda: list(range(6)))
    monkeypatch.setattr(resources, "numa_nodes", lambda cores, sys_root=None: {0: list(cores)})
    pool, at_once = scheduler.pool_for(local, ctx, [1], 2, cells=1)
    (item,) = scheduler.plan([_spec(1)], pool, at_once, lambda s: 60.0)
    assert (at_once, pool.pin, item.slot.cores, item.slot.cpus) == (1, False, (), 6)  # every core
    pool, at_once = scheduler.pool_for(local, ctx, [1], 3, cells=2)  # 3 blocks of 2: one idle
    items = scheduler.plan([_spec(1), _spec(1, "bf16")], pool, at_once, lambda s: 60.0)
    assert [(resources.cpuset(it.slot.cores), it.start) for it in items] == [("0-2", 0), ("3-5", 0)]
    pool, at_once = scheduler.pool_for(local, ctx, [1], 2, cells=5)  # more cells: as it was
    assert (len(pool.units), at_once, pool.pin) == (2, 2, True)
    pool, at_once = scheduler.pool_for(local, ctx, [1, 2], None, planned=8, cells=1)  # GPUs, auto
    assert (at_once, pool.pin) == (1, False)
    monkeypatch.undo()
    plan = planning.make(build(dict(frameworks="caffe2", gpus="1", precision="fp32", device="cpu",
                                    batch_size="4", executor="local", concurrency="2")))
    assert (len(plan.cells), plan.concurrency, plan.pool.slot(plan.pool.units).cores) == (1, 1, ())
    assert planning.schedule(plan, plan.cells, tmp_path)[0].startswith(
        "plan: 1 cell on {} core{}, up to 1 at once (--concurrency 2, for 1 cell); ".format(
            len(resources.allowed_cores()), "s" * (len(resources.allowed_cores()) > 1)))


def test_a_container_gets_its_slot_gpus_and_cores_and_the_compile_cache(tmp_path, monkeypatch):
    pytest.importorskip("docker", reason="the docker package (host extra)")
    from compare.executors import docker as dx
    monkeypatch.setenv("COMPARE_CACHE", str(tmp_path))
    kw = dx.run_kwargs(_spec(1), "sha256:abc", ["python"], tmp_path / "spec.json", tmp_path,
                       {}, ["1"], None, -1, cpus="16-31")
    dx._mount_compile_cache(kw)
    assert kw["device_requests"][0]["DeviceIDs"] == ["1"] and kw["cpuset_cpus"] == "16-31"
    assert kw["volumes"][str(tmp_path / "compile")] == {"bind": dx.COMPILE_CACHE_IN, "mode": "rw"}
    assert kw["environment"]["COMPARE_COMPILE_CACHE"] == dx.COMPILE_CACHE_IN


def test_the_report_gives_the_study_wall_time_gpu_hours_and_duty_cycle_beside_the_serial_estimate():
    from compare.reporting import timeline as report_phases
    from tests.helpers import result
    cells = []
    # two 1-GPU cells side by side for 100 s, then a 2-GPU cell alone for 50 s; 10 s timed each
    for precision, gpus, start, end in (("fp32", 1, 0, 100), ("fp16", 1, 0, 100), ("fp32", 2, 100, 150)):
        r = result("caffe2", precision, gpus, 1000.0)
        r.phases = {"cell_start": start, "timed_start": end - 20, "timed_end": end - 10, "cell_end": end}
        cells.append(r)
    s = report_phases.study(cells, machine_gpus=2)
    assert (s["wall_s"], s["serial_s"], s["at_once"]) == (150, 250, 2)
    assert s["held_gpu_h"] * 3600 == pytest.approx(300) and s["used_gpu_h"] * 3600 == pytest.approx(300)
    assert s["timed_gpu_h"] * 3600 == pytest.approx(40) and s["duty"] == pytest.approx(40 / 300)
    assert s["duty_serial"] == pytest.approx(40 / 500)
    assert report_phases.study_lines(s) == [
        "Study: 2:30 wall for 3 cells (4:10 one after the other, the serial estimate; 1.67× by "
        "running up to 2 at once).",
        "GPU time: 2 GPUs × 2:30 = 0.083 GPU-hours held, 0.083 used by cells, 0.011 timed: a duty "
        "cycle of 13.3% (serially 0.139 GPU-hours held, 8.0%)."]
    one = report_phases.study([cells[0]], machine_gpus=1)  # one GPU: no plural
    assert report_phases.study_lines(one)[1].startswith("GPU time: 1 GPU × 1:40 = 0.028 GPU-hours")


def test_a_study_of_cells_one_after_the_other_says_one_cell_at_a_time_as_the_plan_does():
    # was "(1:40 one after the other, the serial estimate; 1.00× by running up to 1 at once)",
    # where nothing ran at once; the plan says "estimate: 0:52 wall, one cell at a time"
    from compare.reporting import timeline as report_phases
    from tests.helpers import result
    cells = []
    for precision, start, end in (("fp32", 0, 60), ("fp16", 60, 100)):
        r = result("caffe2", precision, 1, 1000.0)
        r.phases = {"cell_start": start, "timed_start": end - 20, "timed_end": end - 10, "cell_end": end}
        cells.append(r)
    lines = report_phases.study_lines(report_phases.study(cells))
    assert lines == ["Study: 1:40 wall for 2 cells, one cell at a time."]


def test_the_study_counts_runs_and_cells_as_the_plan_does():
    # timeline counted cells with a regex of its own; it counts them as store.counted does
    from compare.reporting import timeline as report_phases
    from tests.helpers import result
    runs = []
    for repeat, start, end in ((0, 0, 60), (1, 60, 100), (2, 100, 130)):
        r = result("caffe2", "fp32", 1, 1000.0, repeat=repeat)
        r.phases = {"cell_start": start, "timed_start": end - 20, "timed_end": end - 10, "cell_end": end}
        runs.append(r)
    assert report_phases.study_lines(report_phases.study(runs)) == [
        "Study: 2:10 wall for 3 runs of 1 cell, one run at a time."]


def test_a_packed_figure_beyond_its_serial_interval_is_flagged(tmp_path):
    from compare.reporting import packing, tables
    from tests.helpers import machine_of, save_campaign, windowed
    packed = [windowed("caffe2", "fp16", 1, [6000, 6010, 5990, 6005]),
              windowed("caffe2", "bf16", 1, [4300, 4310, 4290, 4305])]
    for r, other in zip(packed, reversed(packed)):
        r.environment["placement"] = {"beside": [other.run_id]}
        r.spec_hash = RunSpec.from_dict(r.spec).spec_hash
    serial = [windowed("caffe2", "fp16", 1, [6020, 5995, 6010, 6000]),
              windowed("caffe2", "bf16", 1, [4700, 4710, 4690, 4705])]
    for r in serial:
        r.spec_hash = RunSpec.from_dict(r.spec).spec_hash
    machine = machine_of(serial)  # the machine they ran on
    save_campaign(tmp_path / "serial", serial, machine=machine)
    root = save_campaign(tmp_path / "packed", packed, machine=machine)
    text = tables.markdown(packing.sections(packed, root, machine))
    rows = [line for line in text.splitlines() if line.startswith("| caffe2-")]
    assert [row.split(" | ")[-1] for row in rows] == ["within noise |", "worse |"]
    assert "**Warning: caffe2-bf16-g1-b256-s224-r0: packed ÷ serial = 0.915 ±0.003 (worse): " \
           "packing changed this figure beyond its interval**" in text
    assert packing.sections(serial, tmp_path / "serial", machine) == []  # nothing ran packed


# --- compare run --concurrency, on a CPU -----------------------------------------------------------

def test_two_cells_packed_give_the_results_of_a_serial_sweep_on_cores_of_their_own(tmp_path):
    fake = _fake(tmp_path)
    serial = compare(CELLS + ["--python", "caffe2={}".format(fake), "--results", tmp_path / "s",
                              "--concurrency", "1"])
    packed = compare(CELLS + ["--python", "caffe2={}".format(fake), "--results", tmp_path / "p",
                              "--concurrency", "2"], env=TWO_CORES)
    assert serial.returncode == packed.returncode == 0, packed.stderr
    assert "2 to run, up to 2 at once on 2 blocks of cores (each pinned to its cores)" in packed.stderr
    a, b = _results(tmp_path / "s"), _results(tmp_path / "p")
    assert set(a) == set(b) == IDS
    assert {r["status"] for r in list(a.values()) + list(b.values())} == {"ok"}
    placed = {k: r["environment"]["placement"] for k, r in b.items()}
    cores = {k: set(resources.cpulist(p["cores"])) for k, p in placed.items()}
    fp32, bf16 = cores["caffe2-fp32-w1-b4-s32-r0"], cores["caffe2-bf16-w1-b4-s32-r0"]
    assert fp32 and bf16 and not fp32 & bf16
    for k, r in b.items():  # what the backend itself was allowed, and whom it ran beside
        assert resources.cpulist(r["environment"]["cpu_affinity"]) == sorted(cores[k])
        assert placed[k]["beside"] == sorted(IDS - {k}) and placed[k]["concurrency"] == 2
    assert all(r["environment"]["placement"]["beside"] == [] for r in a.values())
    assert all(r["environment"]["placement"]["pinned"] is False for r in a.values())
    assert "Study: " in packed.stdout and "by running up to 2 at once" in packed.stdout


def test_ctrl_c_with_two_cells_in_flight_stops_both_and_resume_runs_them(tmp_path, campaign):
    hold = tmp_path / "hold"
    hold.write_text("")
    fake = _fake(tmp_path, hang=("fp32", "bf16"), hold=hold)
    argv = CELLS + ["--python", "caffe2={}".format(fake), "--results", campaign, "--concurrency", "2"]
    proc = start_compare(argv, env=TWO_CORES)
    assert wait_for(lambda: len(processes_of(campaign, "COMPARE_ATTEMPT=")) >= 2, 60), \
        "two cells never ran at once"
    second = compare(argv + ["--resume"], env=TWO_CORES)
    assert second.returncode == 2 and "another `compare run` (PID {}) is running this " \
        "campaign".format(proc.pid) in second.stderr
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "compare: interrupted (SIGINT): 0 cells recorded, 2 not run; resume with: " in err
    assert _results(campaign) == {}
    time.sleep(3)
    assert processes_of(campaign) == []
    hold.unlink()
    resumed = compare(argv + ["--resume"], env=TWO_CORES)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert {k: r["status"] for k, r in _results(campaign).items()} == {k: "ok" for k in IDS}


def test_a_timeout_beside_a_running_cell_ends_only_that_cell(tmp_path, campaign):
    hold = tmp_path / "hold"
    hold.write_text("")
    fake = _fake(tmp_path, hang=("bf16",), hold=hold)
    done = compare(CELLS + ["--python", "caffe2={}".format(fake), "--results", campaign,
                            "--concurrency", "2", "--timeout", "8"], env=TWO_CORES)
    assert done.returncode == 1, done.stderr[-2000:]  # a cell timed out: a failed run
    results = _results(campaign)
    assert (results["caffe2-bf16-w1-b4-s32-r0"]["status"],
            results["caffe2-bf16-w1-b4-s32-r0"]["reason"]) == ("timeout", "killed after the 8 s timeout")
    assert results["caffe2-fp32-w1-b4-s32-r0"]["status"] == "ok"
    assert results["caffe2-fp32-w1-b4-s32-r0"]["environment"]["placement"]["beside"] == [
        "caffe2-bf16-w1-b4-s32-r0"]
    assert processes_of(campaign) == []


# a stand-in for nvidia-smi: a machine of two H200s (GPU_BUSY: the compute apps it lists)
NVIDIA_SMI = """#!/bin/sh
case "$*" in
  *index,name,memory.total,driver_version*) printf '0, NVIDIA H200, 143771, 580.1\\n1, NVIDIA H200, 143771, 580.1\\n' ;;
  *index,pci.bus_id,uuid*) printf '0, 00000000:18:00.0, GPU-a\\n1, 00000000:3B:00.0, GPU-b\\n' ;;
  *query-compute-apps*) printf "$GPU_BUSY" ;;
  *) echo "| NVIDIA-SMI 580.1   Driver Version: 580.1   CUDA Version: 13.0 |" ;;
esac
"""


def _two_gpus(tmp_path, busy=""):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(NVIDIA_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    return {"PATH": "{}:{}".format(bin_dir, os.environ["PATH"]), "GPU_BUSY": busy}


def test_on_two_gpus_the_one_gpu_cells_run_at_once_each_on_its_own_gpu_and_cores(tmp_path, campaign):
    env = _two_gpus(tmp_path)
    fake = _fake(tmp_path)
    done = compare(["run", "--frameworks", "caffe2", "--gpus", "1,2", "--precision", "fp32,bf16",
                    "--device", "cuda", "--executor", "local", "--python", "caffe2={}".format(fake),
                    "--batch-size", "4", "--steps", "20", "--warmup", "1", "--windows", "2",
                    "--results", campaign], env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "4 to run, up to 2 at once on GPUs 0,1 (each pinned to its cores)" in done.stderr
    got = {k: (r["environment"]["env"].get("CUDA_VISIBLE_DEVICES"),
               r["environment"]["placement"]["gpus"], len(r["environment"]["placement"]["beside"]))
           for k, r in _results(campaign).items()}
    assert got == {"caffe2-fp32-g1-b4-s224-r0": ("0", ["0"], 1),
                   "caffe2-bf16-g1-b4-s224-r0": ("1", ["1"], 1),
                   "caffe2-fp32-g2-b4-s224-r0": ("0,1", ["0", "1"], 0),
                   "caffe2-bf16-g2-b4-s224-r0": ("0,1", ["0", "1"], 0)}
    one = [r for k, r in _results(campaign).items() if "-g1-" in k]
    cores = [set(resources.cpulist(r["environment"]["cpu_affinity"])) for r in one]
    assert not cores[0] & cores[1]
    assert "GPU time: 2 GPUs × " in done.stdout


def test_a_gpu_another_process_computes_on_is_left_out_of_the_pool(tmp_path):
    env = _two_gpus(tmp_path, busy="GPU-b\\n")
    out = compare(["run", "--frameworks", "caffe2", "--precision", "fp32,bf16", "--device", "cuda",
                   "--gpus", "1", "--plan", "--plan-from", tmp_path], env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1] == "note: GPU 1 left out: another process computes on it"
    assert [line.split()[2] for line in out.stdout.splitlines()[3:5]] == ["0", "0"]
    out = compare(["run", "--frameworks", "caffe2", "--gpus", "2", "--device", "cuda", "--plan",
                   "--plan-from", tmp_path], env=env)
    assert out.stdout.splitlines()[1] == ("note: GPU 1 in use by another process, but the sweep "
                                          "needs 2 GPUs: kept in the pool")


# --- compare run --plan ----------------------------------------------------------------------------

def test_plan_prints_the_schedule_and_its_estimate_from_earlier_cell_times(tmp_path):
    from tests.helpers import timed_campaign
    timed_campaign(tmp_path / "runs" / "old", (("fp32", 1, 70.0), ("fp32", 2, 80.0), ("fp16", 1, 30.0)))
    out = compare(["run", "--frameworks", "caffe2", "--gpus", "1,2", "--precision", "fp32,fp16",
                   "--batch-size", "256", "--plan", "--plan-gpus", "2", "--plan-from",
                   tmp_path / "runs", "--python", "caffe2={}".format(failing_python(tmp_path))])
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:6] == [
        "plan: 4 cells on 2 GPUs, up to 2 at once (--concurrency auto); cell times from 3 earlier "
        "runs in 1 campaign under {}".format(tmp_path / "runs"),
        "   start      end  GPUs  cores       time  cell",
        "    0:00     1:10  0     -          =70 s  caffe2-fp32-g1-b256-s224-r0",
        "    0:00     0:30  1     -          =30 s  caffe2-fp16-g1-b256-s224-r0",
        "    1:10     2:30  0,1   -          =80 s  caffe2-fp32-g2-b256-s224-r0",
        "    2:30     3:40  0,1   -          ?70 s  caffe2-fp16-g2-b256-s224-r0"]
    # the 2-GPU fp16 cell never ran: the median of the framework's cells (a guess, marked ?)
    assert out.stdout.splitlines()[6] == ("estimate: 3:40 wall, against 4:10 one cell at a time "
                                          "(1.14× faster); 2 GPUs held 0.12 GPU-hours")
    assert [p.parent.name for p in tmp_path.rglob("campaign.json")] == ["old"]  # nothing created


def test_the_plans_columns_stay_aligned_for_cells_of_four_and_eight_gpus(tmp_path):
    # "0,1,2,3" overflowed the GPUs column (5 wide) and pushed its row's time and cell right
    out = compare(["run", "--frameworks", "caffe2", "--gpus", "1,4,8", "--precision", "fp32",
                   "--batch-size", "256", "--plan", "--plan-gpus", "8", "--plan-from", tmp_path,
                   "--python", "caffe2={}".format(failing_python(tmp_path))])
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1:5] == [
        "   start      end  GPUs            cores       time  cell",
        "    0:00     1:00  0               -          ?60 s  caffe2-fp32-g1-b256-s224-r0",
        "    0:00     1:00  1,2,3,4         -          ?60 s  caffe2-fp32-g4-b256-s224-r0",
        "    1:00     2:00  0,1,2,3,4,5,6,7 -          ?60 s  caffe2-fp32-g8-b256-s224-r0"]


def test_plan_warns_of_cells_estimated_beyond_the_timeout(tmp_path):
    """--timeout 60 beside cells that took 70 and 80 s: the plan said they would end at 1:10 and
    2:30 while each would be stopped at 60 s and recorded timeout. A guess (?) is not held
    against it."""
    from tests.helpers import timed_campaign
    timed_campaign(tmp_path / "runs" / "old", (("fp32", 1, 70.0), ("fp32", 2, 80.0)))
    argv = ["run", "--frameworks", "caffe2", "--gpus", "1,2", "--precision", "fp32,fp16",
            "--batch-size", "256", "--plan", "--plan-gpus", "2", "--plan-from", tmp_path / "runs",
            "--python", "caffe2={}".format(failing_python(tmp_path))]
    out = compare(argv + ["--timeout", "60"])
    assert out.returncode == 0, out.stderr
    assert ("warning: 2 cells estimated beyond --timeout 60 s (the longest, "
            "caffe2-fp32-g2-b256-s224-r0: 80 s): a run is stopped there and recorded timeout; give "
            "a larger --timeout") in out.stdout.splitlines()
    out = compare(argv + ["--timeout", "75"])
    assert "warning: 1 cell estimated beyond --timeout 75 s (the longest, caffe2-fp32-g2-b256-s224-r0:" \
        in out.stdout
    assert "warning" not in compare(argv).stdout  # 1800 s


def test_plan_reads_the_campaigns_beside_results_and_refuses_what_the_run_would(tmp_path):
    """--plan --results DIR/new estimated from results/ under the working folder while the run
    itself reads DIR's campaigns; and it planned into a folder the run then refused (exit 2)."""
    from tests.helpers import timed_campaign
    timed_campaign(tmp_path / "runs" / "old", (("fp32", 1, 70.0),))
    argv = ["run", "--frameworks", "caffe2", "--batch-size", "256", "--plan", "--plan-gpus", "1",
            "--python", "caffe2={}".format(failing_python(tmp_path)), "--results"]
    out = compare(argv + [tmp_path / "runs" / "new"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].endswith("cell times from 1 earlier run in 1 campaign under "
                                               "{}".format(tmp_path / "runs"))
    assert "=70 s  caffe2-fp32-g1-b256-s224-r0" in out.stdout
    assert "; 1 GPU held 0.04 GPU-hours" in out.stdout  # not "1 GPUs"
    assert not (tmp_path / "runs" / "new").exists()
    out = compare(argv + [tmp_path / "runs" / "old"])
    assert (out.returncode, out.stdout, out.stderr) == (2, "", "compare: error: --results {}: already "
                                                           "holds a campaign; add --resume to continue "
                                                           "it, or give a new folder\n".format(
                                                               tmp_path / "runs" / "old"))
    (tmp_path / "file").write_text("x")
    out = compare(argv + [tmp_path / "file"])
    assert (out.returncode, out.stderr) == (2, "compare: error: --results {}: is a file, not a "
                                               "folder; give a folder path\n".format(tmp_path / "file"))


@pytest.mark.parametrize("args,message", [
    (["--concurrency", "0"], "compare: error: --concurrency '0': give auto or a count of cells at once >= 1\n"),
    (["--concurrency", str(os.cpu_count() + 1)], "compare: error: --concurrency {1}: on CPU each "
     "cell needs a core of its own and there are {0}; give 1 to {0} (or set "
     "COMPARE_OVERSUBSCRIBE=1)\n".format(os.cpu_count(), os.cpu_count() + 1)),
    (["--plan-gpus", "8"], "compare: error: --plan-gpus belongs to --plan (print the schedule and "
                           "exit); add --plan\n"),
    (["--plan", "--plan-from", "/no/such/folder"], "compare: error: --plan-from /no/such/folder: no "
     "such folder; give the folder that holds earlier campaigns (default results)\n"),
    (["--plan", "--plan-gpus", "4"], "compare: error: --plan-gpus 4: plans the study on GPUs, and "
                                     "--device cpu runs it on the CPU; leave one of them out\n"),
])
def test_bad_packing_flags_are_one_line(args, message):
    out = compare(["run", "--frameworks", "caffe2", "--device", "cpu"] + args)
    assert (out.returncode, out.stderr) == (2, message)


# --- with real frameworks (marked backend) ---------------------------------------------------------

TINY = ["--batch-size", "4", "--image-size", "32", "--steps", "2", "--warmup", "1", "--windows", "1",
        "--device", "cpu", "--executor", "local"]


@pytest.mark.backend
def test_pytorch_cells_packed_two_at_once_run_on_their_own_cores(tmp_path):
    """The real backend in a packed sweep (the fake one above compares it with a serial sweep)."""
    packed = compare(["run", "--frameworks", "caffe2", "--precision", "fp32,bf16", "--results",
                      tmp_path / "p", "--concurrency", "2"] + TINY, env=TWO_CORES, timeout=900)
    assert packed.returncode == 0, packed.stderr[-3000:]
    b = _results(tmp_path / "p")
    assert {k: r["status"] for k, r in b.items()} == {k: "ok" for k in IDS}, [
        r["reason"] for r in b.values()]
    cores = [set(resources.cpulist(r["environment"]["cpu_affinity"])) for r in b.values()]
    assert not cores[0] & cores[1]
    assert [r["settings"]["threads"] for r in b.values()] == [len(c) for c in cores]  # torch's own


@pytest.mark.backend
def test_a_repeated_jax_cell_takes_its_compiled_step_from_the_persistent_cache(tmp_path):
    argv = ["run", "--frameworks", "jax"] + TINY
    env = {"COMPARE_COMPILE_CACHE": str(tmp_path / "cache")}
    found = []
    for name in ("cold", "warm"):
        done = compare(argv + ["--results", tmp_path / name], env=env, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        (r,) = _results(tmp_path / name).values()
        assert r["status"] == "ok", r["reason"]
        found.append((r["environment"]["compile_cache"]["jax"], r["settings"]["compile_s"]))
    (cold, cold_s), (warm, warm_s) = found
    assert cold["dir"] == warm["dir"] and cold["dir"].startswith(str(tmp_path / "cache" / "jax"))
    assert (cold["state"], warm["state"]) == ("miss", "hit")
    assert warm["hits"] == cold["misses"] > 0  # every compilation of the first run, found again
    assert warm_s < cold_s


def test_a_cell_that_built_its_environment_reads_neither_negative_launch_nor_the_build():
    # the README's main job printed "-0.0" in the launch column of cells whose environment was
    # built in their launch: the build is timed apart, a few ms longer than the launch marks
    from compare.reporting import timeline as report_phases
    from tests.helpers import result
    r = result("caffe2", "fp32", 1, 1000.0)
    r.phases = {"cell_start": 0.0, "launched": 33.30, "timed_start": 40.0, "timed_end": 50.0,
                "cell_end": 51.0}
    r.environment = {"env_build_s": 33.34}
    row = report_phases.rows([r])[0]
    assert row["launch"] == 0.0 and "{:.1f}".format(row["launch"]) == "0.0"
    # nor is the build the cell's time: the set-up line says it once (TF's read 202.9 s, 171.3 of it
    # the build, beside 71.5 s for its 2-worker cell)
    assert row["cell"] == pytest.approx(51.0 - 33.34)
