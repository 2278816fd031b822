"""The input pipelines as tables (backends/pipelines/): which row a run gets and why, that every
row names a maker that exists, that the options are made from the tables, and that nothing else
picks a pipeline. Host-side: no framework is imported."""
import ast

import pytest

from backends import pipelines
from backends.contract import Unsupported
from backends.contract.shared import backend
from compare import frameworks
from tests.helpers import ROOT, main_exit

TORCH = backend("caffe2_torch").PIPELINES


def _probe_fails(device_id, sample, opt):
    raise pipelines.NotAvailable("no JPEG engines on device {}".format(device_id))


def _probe_passes(device_id, sample, opt):
    return None


def _opt(**given):
    values = dict({"pipeline": "native", "decode": "auto", "nvimgcodec_api": "c"}, **given)
    return values.__getitem__


def _hw(probe):
    return pipelines.hw_row("x:y")._replace(probe="tests.test_pipelines:" + probe)


@pytest.mark.parametrize("cuda,probe,given,row,why", [
    (False, "_probe_passes", {}, "cpu", "decode=auto: no JPEG engines on a CPU run"),
    (True, "_probe_fails", {}, "cpu", "decode=auto: hardware decode unavailable: no JPEG engines on device 0"),
    (True, "_probe_passes", {}, "hw", None),
    (True, "_probe_passes", {"decode": "hw"}, "hw", None),
    (False, "_probe_passes", {"decode": "cpu"}, "cpu", "--option decode=cpu"),
    (True, "_probe_passes", {"decode": "gpu"}, "gpu", "--option decode=gpu"),
    (False, "_probe_passes", {"pipeline": "dali", "decode": "hw"}, "dali",
     "--option pipeline=dali (decode=hw not used)"),
])
def test_the_row_a_run_gets_and_why_it_is_not_the_first(cuda, probe, given, row, why):
    table = (_hw(probe),) + TORCH[1:]
    chosen, said = pipelines.choose(table, _opt(**given), cuda, 0, "a.jpg")
    assert (chosen.name, said) == (row, why)


@pytest.mark.parametrize("cuda,probe,decode,message", [
    (False, "_probe_passes", "hw", "decode=hw decodes on a GPU's JPEG engines; this run is on the cpu"),
    (False, "_probe_passes", "gpu", "decode=gpu decodes with nvJPEG on a CUDA device; this run is on the cpu"),
    (True, "_probe_fails", "hw", "decode=hw: no JPEG engines on device 0"),
])
def test_a_decode_asked_for_that_cannot_run_is_unsupported_never_a_fallback(cuda, probe, decode, message):
    table = (_hw(probe),) + TORCH[1:]
    with pytest.raises(Unsupported) as exc:
        pipelines.choose(table, _opt(decode=decode), cuda, 0, "a.jpg")
    assert str(exc.value) == message


def _defined(module: str) -> set:
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    return {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}


def test_every_row_names_a_maker_its_module_defines_and_the_options_come_from_the_table():
    for fw in frameworks.FRAMEWORKS:
        rows = fw.pipelines()
        assert rows, fw.name
        for row in rows:
            module, function = row.make.split(":")
            assert module.startswith("backends.{}.".format(fw.backend)), row
            assert function in _defined(module), row
            if row.probe:
                module, function = row.probe.split(":")
                assert function in _defined(module), row
        declared = {o.key: o for o in fw.options()}
        if len(rows) > 1:  # a choice: --option decode and --option pipeline list the table
            assert declared["decode"].choices == ("auto",) + tuple(r.name for r in rows if not r.own)
            assert declared["pipeline"].choices == ("native",) + tuple(r.name for r in rows if r.own)
        else:
            assert "decode" not in declared and "pipeline" not in declared


def test_only_the_table_picks_a_pipeline():
    """The options that pick a pipeline are read in pipelines.choose only; the host names a
    pipeline through the tables only."""
    readers = []
    for package in ("backends", "compare"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                name = getattr(node, "func", None)
                name = getattr(name, "id", getattr(name, "attr", None))
                if isinstance(node, ast.Call) and name in ("opt", "value") and any(
                        isinstance(a, ast.Constant) and a.value in ("decode", "pipeline")
                        for a in node.args):
                    readers.append(str(path.relative_to(ROOT)))
    assert sorted(set(readers)) == ["backends/pipelines/__init__.py"]
    names = {r.name for fw in frameworks.FRAMEWORKS for r in fw.pipelines()}
    data_table = (ROOT / "compare" / "reporting" / "data_table.py").read_text()
    assert not [n for n in names if '"{}"'.format(n) in data_table]


def test_list_pipelines_prints_each_backends_table_in_order(capsys):
    code, out, _ = main_exit(["list", "pipelines", "caffe2"], capsys)
    assert code == 0
    assert out.splitlines() == [
        "caffe2 (PyTorch (Caffe2)):",
        "  hw        --option decode=hw, GPUs only: the GPU's JPEG engines (nvImageCodec)",
        "  cpu       --option decode=cpu: Pillow in the loader workers",
        "  gpu       --option decode=gpu, GPUs only: nvJPEG through torchvision",
        "  dali      --option pipeline=dali: DALI (decoding on the GPU's JPEG engines; CPU "
        "operators on a CPU run)"]
    code, out, _ = main_exit(["list", "pipelines", "mxnet"], capsys)
    assert out.splitlines()[1].startswith("  recordio  its one pipeline: ImageRecordIter")


@pytest.mark.parametrize("framework", ["caffe2_torch", "jax"])
@pytest.mark.parametrize("data, device, given, before, after", [
    ("/d", "cuda", {}, None, "32"),  # decode=auto may take the JPEG engines: 32 queues
    ("/d", "cuda", {"decode": "hw"}, None, "32"),
    ("/d", "cuda", {}, "4", "4"),  # the user's own setting stays ...
    ("/d", "cuda", {"cuda_connections": 16}, "4", "16"),  # ... unless the option is given
    (None, "cuda", {}, None, None),  # synthetic data: CUDA's own default
    ("/d", "cpu", {}, None, None),
    ("/d", "cuda", {"decode": "cpu"}, None, None),
    ("/d", "cuda", {"pipeline": "dali"}, None, None),
])
def test_a_run_that_may_decode_on_the_jpeg_engines_gets_32_cuda_queues_before_its_context(
        monkeypatch, framework, data, device, given, before, after):
    """CUDA_DEVICE_MAX_CONNECTIONS, set by the backend's prepare() (before the framework makes
    its CUDA context): with 8 queues the step's stream shared one with nvImageCodec's decode
    streams (H100, 12-05: real/synthetic 0.833 -> 0.932 PyTorch, 0.783 -> 0.977 JAX at 32)."""
    import os

    from backends.contract.protocol import RunSpec
    from backends.pipelines import feed
    monkeypatch.delenv(feed.CONNECTIONS_ENV, raising=False)
    if before is not None:
        monkeypatch.setenv(feed.CONNECTIONS_ENV, before)
    monkeypatch.setattr(os, "environ", dict(os.environ))  # prepare() sets other variables too
    spec = RunSpec(framework="caffe2" if framework == "caffe2_torch" else "jax",
                   backend=framework, device=device, data=data, options=dict(given))
    backend(framework).prepare(spec)
    assert os.environ.get(feed.CONNECTIONS_ENV) == after
    assert feed.hw_feeder_settings(_opt(feeder_priority="high", switch_interval_ms=0.5))[
        "cuda_connections"] == int(after or feed.CUDA_DEFAULT_CONNECTIONS)
