"""Rules that used to be written in several places, each now defined once: a second copy that
drifts fails here. Out of memory (the harness's exception check and the host's stderr scan) and
the GPUs CUDA_VISIBLE_DEVICES names (host pool, docker, telemetry, JAX) live in
backends/contract/rules.py."""
import re

import pytest

from backends import harness, telemetry
from backends.contract import is_oom, oom_line, visible_gpus
from compare import resources
from compare.executors import docker, results
from tests.helpers import ROOT

# what each framework prints or raises when memory runs out (from real runs: tests/executors/
# test_collect.py has the stderr around them)
OOM_FORMS = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 139 GiB)",
    "mxnet.base.MXNetError: Check failed: e == cudaSuccess (2 vs. 0) : cudaMalloc retry failed: "
    "out of memory",
    "failed to alloc 4294967296 bytes on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    "MemoryError: Unable to allocate 3.00 GiB for an array",
    "InternalError: Failed copying input tensor to GPU:0 in order to run _EagerConst: Dst tensor "
    "is not initialized.",
    "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate "
    "memory: you tried to allocate 6422528000 bytes",
    "ResourceExhaustedError: OOM when allocating tensor with shape[256,64,112,112]",
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
    "allocate 8.00GiB",
    "terminate called after throwing an instance of 'std::bad_alloc'",
]
NOT_OOM = [
    "W bfc_allocator.cc:296] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.13GiB "
    "with freed_by_count=0. The caller indicates that this is not a failure, but this may mean "
    "that there could be performance gains if more memory were available.",
    "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED",
    "ValueError: bad shape (256, 3, 224)",
]


def test_the_harness_and_the_host_classify_out_of_memory_with_one_rule():
    assert harness.is_oom is is_oom and results.oom_line is oom_line
    for form in OOM_FORMS:
        assert is_oom(RuntimeError(form)), form
        assert oom_line("I starting\n" + form + "\nI done") == form
    for form in NOT_OOM:
        assert not is_oom(RuntimeError(form)), form
        assert oom_line(form) is None
    class OutOfMemoryError(RuntimeError):  # the exception's type alone says it (torch's)
        pass
    assert is_oom(OutOfMemoryError("")) and is_oom(MemoryError())


@pytest.mark.parametrize("value,ids", [("2, 3", ["2", "3"]), ("GPU-ab12,GPU-cd34", ["GPU-ab12", "GPU-cd34"]),
                                       ("", []), (None, None)])
def test_every_reader_of_cuda_visible_devices_reads_it_one_way(monkeypatch, value, ids):
    if value is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert visible_gpus() == ids
    assert docker.gpu_ids(1) == (ids[:1] if ids else None)
    numbered = ids is not None and ids and all(i.isdigit() for i in ids)
    assert telemetry.visible_indices(2) == ([int(i) for i in ids] if numbered else [0, 1])


def test_no_module_parses_cuda_visible_devices_itself():
    """The variable is split in backends/contract/rules.py only; elsewhere it is set or recorded."""
    rules = ROOT / "backends" / "contract" / "rules.py"
    found = [str(p.relative_to(ROOT)) for package in ("compare", "backends")
             for p in sorted((ROOT / package).rglob("*.py")) if p != rules and
             re.search(r"CUDA_VISIBLE_DEVICES[^\n]*\.split\(", p.read_text())]
    assert found == []
    assert resources.visible_gpus is visible_gpus


def _with_cell_time(r):
    r.phases = {"cell_start": 100.0, "cell_end": 160.0}
    return r


def test_one_rule_says_which_machine_is_the_same_and_every_comparison_applies_it(tmp_path):
    """The same CPU model and cores, GPU models and driver; any number of GPUs. The plan's
    earlier cell times, the packing table's serial twins, history and resume ask the one rule."""
    from compare import eta as plan
    from compare import machine_record
    from compare.reporting import history, packing
    from tests.helpers import MACHINE, result, save_campaign
    more_gpus = dict(MACHINE, gpus=MACHINE["gpus"] * 2)
    new_driver = dict(MACHINE, gpus=[dict(g, driver="550.90") for g in MACHINE["gpus"]])
    fewer_cores = dict(MACHINE, cpu_count=32)
    assert machine_record.differences(MACHINE, more_gpus) == []
    assert machine_record.differences(MACHINE, new_driver) == ["driver: 535.54 vs 550.90"]
    assert machine_record.differences(MACHINE, fewer_cores) == ["cpu_count: 64 vs 32"]
    folders = {}
    for i, (name, machine) in enumerate((("a", MACHINE), ("b", more_gpus), ("c", new_driver),
                                         ("d", fewer_cores))):
        runs = [_with_cell_time(result("caffe2", "fp32", 1, ips=100.0 + i))]
        folders[name] = save_campaign(tmp_path / "all" / name, runs, machine)
    (tmp_path / "all" / "not-a-campaign").mkdir()
    (tmp_path / "all" / "notes.txt").write_text("x")
    # every reader finds the same four campaigns in the folder
    found = {c.root.name for c in history.campaigns([tmp_path / "all"])}
    assert found == {"a", "b", "c", "d"}
    # and takes only those on the same machine: a and b (more GPUs of the same model)
    _, used = plan.earlier_results(tmp_path / "all", MACHINE)
    assert used == 2
    twins = packing.serial_runs(folders["a"], MACHINE, [])
    assert sorted(where for where, _ in twins) == ["b"]


def test_a_reports_sections_are_listed_once_in_report_py(tmp_path):
    """report.md holds exactly the sections report.build lists, in its order (a half-done
    campaign with a foreign file: its own sections last); reporting/__init__.py adds none."""
    import ast

    from compare.reporting import accuracy, comparator, report
    from compare.stages.report import View
    from compare.stages.report import write as write_report
    from compare.store import Campaign
    from tests.helpers import MACHINE, fixed_results, result, save_campaign
    root = save_campaign(tmp_path / "c", fixed_results() + [result("mxnet", "fp32", 1, 500.0)], MACHINE)
    (root / "results" / "mxnet-fp32-g1-b256-s224-r0.json").unlink()  # planned, not run yet
    (root / "results" / "foreign.json").write_text("{}")
    campaign = Campaign.open(root)
    text, _, warnings = write_report(campaign, tmp_path / "out", ("md",))
    view = View.load(campaign)
    results, trained = accuracy.split(view.results)
    rep = report.build(comparator.cells(results), campaign.machine, [], (), results,
                       report.campaign_sections(view, results, trained))
    titles = [s.title for s in rep.sections() if s.title]
    assert [line[3:] for line in text.splitlines() if line.startswith("## ")] == titles
    assert titles[-2:] == ["Not run yet", "Result files left out"]
    tree = ast.parse((ROOT / "compare" / "reporting" / "__init__.py").read_text())
    built = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and
             isinstance(n.func, ast.Name) and n.func.id in ("Text", "Table")]
    assert built == []


def test_each_option_is_declared_once():
    """Options are declared in backends/contract/options.py (those several backends take), in a
    backend's __init__.py (its own) or made from its table of pipelines (pipelines/): nowhere
    else; and a key two backends take is one declaration (decode lists each one's own table)."""
    import ast

    from compare import frameworks
    allowed = {"backends/contract/options.py", "backends/pipelines/__init__.py"} | {
        "backends/{}/__init__.py".format(fw.backend) for fw in frameworks.FRAMEWORKS}
    declaring = set()
    for path in sorted((ROOT / "backends").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            f = getattr(node, "func", None)
            if isinstance(node, ast.Call) and getattr(f, "id", getattr(f, "attr", None)) == "Option":
                declaring.add(str(path.relative_to(ROOT)))
    assert declaring <= allowed, declaring - allowed
    by_key = {}
    for fw in frameworks.FRAMEWORKS:
        for o in fw.options():
            by_key.setdefault(o.key, []).append(o)
    shared = {k: v for k, v in by_key.items() if len(v) > 1}
    assert {"channels_last", "loader_workers", "cpu_decoders", "fail_at"} <= set(shared)
    assert [k for k, v in shared.items() if k != "decode" and any(o != v[0] for o in v)] == []
