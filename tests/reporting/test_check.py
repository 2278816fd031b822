"""`compare check`: exit 0 when every comparable cell reaches reference × (1 − tolerance), else 1
with the cells that fall short; bad input is one line and exit 2."""
import pytest

from tests.helpers import main_exit, result, save_campaign, windowed

WINDOWS = [990.0, 1005.0, 1000.0, 1012.0, 996.0]  # one run: 1000.6 img/s


@pytest.fixture
def campaign(tmp_path):
    return save_campaign(tmp_path / "c", [windowed("tf", "fp32", 1, WINDOWS),
                                          windowed("tf", "fp32", 2, [2 * w for w in WINDOWS]),
                                          result("tf", "bf16", 1, status="unsupported",
                                                 reason="bf16 needs compute capability 8.0+",
                                                 device_name="NVIDIA H200")])


def _reference(tmp_path, text):
    path = tmp_path / "ref.csv"
    path.write_text(text)
    return str(path)


def test_every_cell_at_or_above_the_floor_passes(campaign, tmp_path, capsys):
    # 2 GPUs: 2001.2 against 2100 x (1 - 5 %) = 1995; bf16 is unsupported: listed, does not decide
    ref = _reference(tmp_path, "gpu,framework,precision,gpus,batch_size,images_per_sec\n"
                               "H200,tf,fp32,1,256,1000\nH200,tf,fp32,2,256,2100\nH200,tf,bf16,1,256,1500\n")
    code, out, err = main_exit(["check", str(campaign), "--reference", ref], capsys)
    assert code == 0, err
    assert "PASS: every comparable cell is at or above the reference less its tolerance. 2 pass, " \
           "0 fall short, 1 not comparable (of 3 figures" in out
    assert "| TensorFlow (+Horovod) | fp32 | 256 | 2 | img/s | 2001.20 | 2100.00 | 0.95× ±0.01 | 5% | pass |" in out
    assert "| TensorFlow (+Horovod) | bf16 | 256 | 1 | img/s | unsupported | 1500.00 | — | 5% | not " \
           "comparable: unsupported (bf16 needs compute capability 8.0+) |" in out


def test_a_cell_below_the_floor_fails_and_is_listed(campaign, tmp_path, capsys):
    ref = _reference(tmp_path, "gpu,framework,precision,gpus,images_per_sec\nH200,tf,fp32,1,1000\n"
                               "H200,tf,fp32,2,2200\n")
    code, out, _ = main_exit(["check", str(campaign), "--reference", ref, "--tolerance", "5%"], capsys)
    assert code == 1
    assert "FAIL: 1 pass, 1 falls short, 0 not comparable" in out
    short = out.split("## Cells that fall short")[1]
    assert short.count("| TensorFlow (+Horovod) |") == 1
    assert "| 2 | img/s | 2001.20 | 2200.00 | 0.91× ±0.01 | 5% | falls short: below 2090.00 |" in short
    code, _, _ = main_exit(["check", str(campaign), "--reference", ref, "--tolerance", "10%"], capsys)
    assert code == 0  # 2200 x 0.9 = 1980


def test_a_reference_row_carries_its_own_tolerance(campaign, tmp_path, capsys):
    ref = _reference(tmp_path, "gpu,framework,precision,gpus,images_per_sec,tolerance\n"
                               "H200,tf,fp32,1,1020,1%\nH200,tf,fp32,2,2040,\n")
    code, out, _ = main_exit(["check", str(campaign), "--reference", ref], capsys)
    assert code == 1  # 1000.6 < 1020 x 0.99; the 2-GPU row has none: --tolerance 5 % -> pass
    assert "| 1 | img/s | 1000.60 | 1020.00 | 0.98× ±0.01 | 1% | falls short: below 1009.80 |" in out
    assert "| 2 | img/s | 2001.20 | 2040.00 | 0.98× ±0.01 | 5% | pass |" in out


def test_a_failed_cell_with_a_reference_figure_falls_short(tmp_path, capsys):
    c = save_campaign(tmp_path / "c", [result("tf", "fp32", 1, status="oom", reason="OOM when allocating")])
    ref = _reference(tmp_path, "gpu,precision,gpus,images_per_sec\nRTX A6000,fp32,1,500\n")
    code, out, _ = main_exit(["check", str(c), "--reference", ref], capsys)
    assert code == 1 and "falls short: no figure: oom (OOM when allocating) |" in out


def test_a_speedup_only_reference_checks_the_speedup(tmp_path, capsys):
    # R740, 3x V100, Horovod+TF fp32: 2.12x published; measured 2.5x
    c = save_campaign(tmp_path / "c", [windowed("tf", "fp32", 1, [99.0, 100.0, 101.0]),
                                       windowed("tf", "fp32", 3, [249.0, 250.0, 251.0])])
    code, out, _ = main_exit(["check", str(c), "--reference", "r740_v100_resnet50_speedup"], capsys)
    assert code == 0
    assert "| TensorFlow (+Horovod) | fp32 | 256 | 3 | speedup | 2.500 | 2.120 | 1.18× ±0.03 | 5% | pass: " \
           "across hardware: NVIDIA H200 here, V100-PCIe in the reference; across data: synthetic here, " \
           "real in the reference |" in out


@pytest.mark.parametrize("args, message", [
    (["--tolerance", "abc"], "compare: error: --tolerance 'abc': give a percentage from 0% to under "
                             "100% (e.g. 5%) or a fraction (e.g. 0.05)"),
    (["--tolerance", "150%"], "compare: error: --tolerance '150%': give a percentage from 0% to under "
                              "100% (e.g. 5%) or a fraction (e.g. 0.05)"),
])
def test_bad_tolerance_is_one_line_and_exit_2(campaign, args, message, capsys):
    code, out, err = main_exit(["check", str(campaign), "--reference", "a6000_tf_cnn_benchmarks"] + args, capsys)
    assert (code, err.strip(), out) == (2, message, "")


def test_unknown_or_unmatched_reference_is_one_line_and_exit_2(campaign, tmp_path, capsys):
    code, _, err = main_exit(["check", str(campaign), "--reference", "nope"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("compare: error: unknown reference 'nope'; choose from a6000_tf_cnn_benchmarks")
    ref = _reference(tmp_path, "precision,gpus,images_per_sec\nfp16,8,9000\n")
    code, _, err = main_exit(["check", str(campaign), "--reference", ref], capsys)
    assert code == 2
    assert err.strip() == "compare: error: reference ref: no cell of the campaign matches one of its rows " \
                          "(matched on network, precision and N, and on framework, batch and image size where it " \
                          "has them: precision: the campaign has bf16, fp32, the reference fp16; N: the campaign " \
                          "has 1, 2, the reference 8); nothing to check"
    bad = _reference(tmp_path, "precision,gpus,images_per_sec,tolerance\nfp32,1,900,lots\n")
    code, _, err = main_exit(["check", str(campaign), "--reference", bad], capsys)
    assert code == 2 and err.startswith("compare: error: reference {}: tolerance 'lots' on line 2: give a "
                                     "percentage".format(bad))


def test_a_campaign_with_planned_cells_still_to_run_fails(campaign, tmp_path, capsys):
    # a CI gate on a half-done study: the 2-GPU cell was planned, the reference covers it, it never ran
    (campaign / "results" / "tf-fp32-g2-b256-s224-r0.json").unlink()
    ref = _reference(tmp_path, "gpu,framework,precision,gpus,images_per_sec\nH200,tf,fp32,1,1000\n"
                               "H200,tf,fp32,2,2100\n")
    code, out, _ = main_exit(["check", str(campaign), "--reference", ref], capsys)
    assert code == 1
    assert "FAIL: 1 pass, 0 fall short, 0 not comparable (of 1 figure the reference has for this " \
           "campaign).\n\n1 of the campaign's 3 planned cells has no result yet: tf-fp32-g2-b256-s224-r0. A " \
           "half-done campaign does not pass; `compare run … --resume` runs it." in out


def test_planned_runs_of_repeated_cells_still_to_run_are_counted_as_runs_of_cells(tmp_path, capsys):
    """Where cells repeat, check counts runs of cells, as the report's "Not run yet" line does (it
    said "2 planned cells of the campaign have no result yet: …-r0, …-r1": two runs of one cell)."""
    root = save_campaign(tmp_path / "c", [windowed("tf", "fp32", g, [g * w for w in WINDOWS], repeat=i)
                                          for g in (1, 2) for i in (0, 1)])
    for i in (0, 1):
        (root / "results" / "tf-fp32-g2-b256-s224-r{}.json".format(i)).unlink()
    ref = _reference(tmp_path, "gpu,framework,precision,gpus,images_per_sec\nH200,tf,fp32,1,1000\n")
    code, out, _ = main_exit(["check", str(root), "--reference", ref], capsys)
    assert code == 1
    assert "\n\n2 of the campaign's 4 planned runs of 2 cells have no result yet: tf-fp32-g2-b256-s224-r0, " \
           "tf-fp32-g2-b256-s224-r1. A half-done campaign does not pass; `compare run … --resume` runs " \
           "them." in out


def test_a_campaign_with_no_result_yet_fails_without_an_empty_table(campaign, tmp_path, capsys):
    # nothing measured yet: the verdict and the cells to run, not a table header with no row under it
    for p in (campaign / "results").glob("*.json"):
        p.unlink()
    ref = _reference(tmp_path, "gpu,framework,precision,gpus,images_per_sec\nH200,tf,fp32,1,1000\n")
    code, out, _ = main_exit(["check", str(campaign), "--reference", ref], capsys)
    assert code == 1
    assert "| framework |" not in out and "|---|" not in out
    assert out.startswith("## Check against ref\n\nFAIL: 0 pass, 0 fall short, 0 not comparable (of 0 figures "
                          "the reference has for this campaign).\n\n3 of the campaign's 3 planned cells "
                          "have no result yet: ")


def test_images_per_sec_are_held_only_against_the_same_gpu_model(tmp_path, capsys):
    # an H200 PyTorch campaign against tf_cnn_benchmarks on A6000s: img/s not comparable, the
    # speedups compared across hardware and saying so
    c = save_campaign(tmp_path / "c", [windowed("caffe2", "fp16", n, [w * n for w in WINDOWS])
                                       for n in (1, 2)])
    code, out, _ = main_exit(["check", str(c), "--reference", "a6000_tf_cnn_benchmarks"], capsys)
    assert code == 0  # the 2-GPU speedup passes; the 1-GPU one is 1 = 1, not a figure that passes
    assert "PASS: every comparable cell is at or above the reference less its tolerance. 1 pass, 0 fall " \
           "short, 3 not comparable (of 4 figures" in out
    assert "| PyTorch (Caffe2) | fp16 | 256 | 1 | img/s | 1000.60 | 1220.76 | 0.82× ±0.01 | 5% | not " \
           "comparable: measured on NVIDIA H200, the reference on a6000: images/sec are held only " \
           "against the same GPU model |" in out
    assert "| PyTorch (Caffe2) | fp16 | 256 | 2 | speedup | 2.000 | 1.952 | 1.02× ±0.01 | 5% | pass: " \
           "across hardware: NVIDIA H200 here, a6000 in the reference |" in out
    ref = _reference(tmp_path, "gpu,precision,gpus,images_per_sec\nA100,fp16,1,900\n")
    code, out, _ = main_exit(["check", str(c), "--reference", ref], capsys)
    assert code == 1 and "FAIL: no comparable cell to check." in out


@pytest.mark.parametrize("gpu,device,same", [
    ("a6000", "NVIDIA RTX A6000", True), ("V100-PCIe", "Tesla V100-PCIE-16GB", True),
    ("H200", "NVIDIA H200", True), ("A100", "NVIDIA RTX A1000", False), ("V100", "NVIDIA H100", False),
    ("V100-SXM2", "Tesla V100-PCIE-16GB", False), (None, "NVIDIA H200", False),
])
def test_a_gpu_model_matches_word_for_word(gpu, device, same):
    from compare.reporting.check import same_gpu
    assert same_gpu(gpu, device) is same


HEAD = "gpu,framework,precision,gpus,images_per_sec\n"
ANY = "tf, mxnet, caffe2, jax"


@pytest.mark.parametrize("row,why", [
    ("H200,tf,fp32,1,-5", "images_per_sec '-5' on line 2 is not a figure; give a number from 1e-06 to 1e+09"),
    ("H200,tf,fp32,1,0", "images_per_sec '0' on line 2 is not a figure; give a number from 1e-06 to 1e+09"),
    ("H200,tf,fp32,1,abc", "images_per_sec 'abc' on line 2 is not a figure; give a number from 1e-06 to "
                           "1e+09"),
    ("H200,tf,fp32,1,1e400", "images_per_sec '1e400' on line 2 is not a figure; give a number from 1e-06 "
                             "to 1e+09"),
    ("H200,,fp32,1,1000", "framework is empty on line 2; give one of " + ANY + ", or leave the column "
                          "out (any framework)"),
    ("H200,nope,fp32,1,1000", "framework 'nope' on line 2: unknown framework 'nope'; choose from " + ANY),
    ("H200,tf,fp32,1,", "line 2 has no figure (images_per_sec); give one"),
], ids=["negative", "zero", "text", "1e400", "no-framework", "unknown-framework", "no-figure"])
def test_a_reference_row_that_is_not_a_figure_is_one_line_naming_file_and_line(campaign, tmp_path, capsys,
                                                                                row, why):
    ref = _reference(tmp_path, HEAD + "H200,tf,fp32,2,2000\n" + row + "\n")
    why = why.replace("line 2", "line 3")  # the first row is fine
    code, out, err = main_exit(["check", str(campaign), "--reference", ref], capsys)
    assert (code, out, err) == (2, "", "compare: error: reference {}: {}\n".format(ref, why))
    code, _, err = main_exit(["report", str(campaign), "--reference", ref], capsys)
    assert (code, err) == (2, "compare: error: reference {}: {}\n".format(ref, why))


def test_the_count_of_figures_is_singular_for_one(campaign, tmp_path, capsys):
    # "of 1 figures" read wrong; 2 and more keep the plural
    ref = _reference(tmp_path, "gpu,framework,precision,gpus,images_per_sec\nH200,tf,fp32,1,1000\n")
    code, out, err = main_exit(["check", str(campaign), "--reference", ref], capsys)
    assert code == 0, err
    assert "PASS: every comparable cell is at or above the reference less its tolerance. 1 pass, 0 fall " \
           "short, 0 not comparable (of 1 figure the reference has for this campaign).\n" in out


def test_a_bad_tolerance_in_a_reference_names_the_file_and_line(campaign, tmp_path, capsys):
    # as every other bad value of a reference: the file as given and the line, so it can be found
    ref = _reference(tmp_path, "gpu,framework,precision,gpus,images_per_sec,tolerance\n"
                               "H200,tf,fp32,1,900,3%\nH200,tf,fp32,2,1900,150%\n")
    code, out, err = main_exit(["check", str(campaign), "--reference", ref], capsys)
    assert (code, out, err) == (2, "", "compare: error: reference {}: tolerance '150%' on line 3: give a "
                                       "percentage from 0% to under 100% (e.g. 5%) or a fraction (e.g. "
                                       "0.05)\n".format(ref))


def test_a_reference_giving_one_cell_twice_is_one_line_naming_both_lines(campaign, tmp_path, capsys):
    # the same cell at 50 and 60: it would pass against one row and fall short against the other
    ref = _reference(tmp_path, HEAD + "H200,tf,fp32,1,50\nH200,tf,fp32,2,90\nA100,tf,fp32,1,40\n"
                                      "H200,tf,fp32,1,60\n")
    why = ("reference {}: lines 2 and 5 give the same cell (model resnet50, precision fp32, gpus 1, "
           "framework tf, gpu H200); give each cell once\n".format(ref))
    for command in ("check", "report"):
        code, out, err = main_exit([command, str(campaign), "--reference", ref], capsys)
        assert (code, out, err) == (2, "", "compare: error: " + why)


def test_a_cell_with_a_failed_repeat_fails_the_check(tmp_path, capsys):
    runs = [windowed("tf", "fp32", 1, WINDOWS, repeat=0), windowed("tf", "fp32", 1, WINDOWS, repeat=1),
            result("tf", "fp32", 1, status="failed", repeat=2, device_name="NVIDIA H200",
                   reason="killed by SIGKILL (exit code -9) and wrote no result")]
    c = save_campaign(tmp_path / "c", runs)
    ref = _reference(tmp_path, HEAD + "H200,tf,fp32,1,900\n")
    code, out, _ = main_exit(["check", str(c), "--reference", ref], capsys)
    assert code == 1
    assert "| TensorFlow (+Horovod) | fp32 | 256 | 1 | img/s | 1000.60 (2 of 3 runs) | 900.00 | 1.11× ±0.01 " \
           "| 5% | falls short: 1 of its 3 runs failed (r2: failed: killed by SIGKILL (exit code -9) and " \
           "wrote no result); `compare run … --resume` runs it again |" in out


def test_a_repeat_that_ran_out_of_memory_is_not_said_to_run_again_whatever_its_reason(tmp_path, capsys):
    """Before, the check looked for ': failed' in the runs' text: an oom whose reason says
    'failed to allocate' was said to be run again by --resume, which keeps an oom."""
    runs = [windowed("tf", "fp32", 1, WINDOWS, repeat=0), windowed("tf", "fp32", 1, WINDOWS, repeat=1),
            result("tf", "fp32", 1, status="oom", repeat=2, device_name="NVIDIA H200",
                   reason="cudaMalloc: failed to allocate 2.00 GiB")]
    c = save_campaign(tmp_path / "c", runs)
    ref = _reference(tmp_path, HEAD + "H200,tf,fp32,1,900\n")
    code, out, _ = main_exit(["check", str(c), "--reference", ref], capsys)
    assert code == 1
    assert "| falls short: 1 of its 3 runs failed (r2: oom: cudaMalloc: failed to allocate 2.00 GiB) |" in out


def test_a_speedup_at_one_gpu_is_not_a_pass(tmp_path, capsys):
    # one H200 against the A6000 table: img/s not comparable, and 1.000 = 1.000 checks nothing
    c = save_campaign(tmp_path / "c", [windowed("caffe2", "fp16", 1, WINDOWS)])
    code, out, _ = main_exit(["check", str(c), "--reference", "a6000_tf_cnn_benchmarks"], capsys)
    assert code == 1
    assert "FAIL: no comparable cell to check. 0 pass, 0 fall short, 2 not comparable (of 2 figures" in out
    assert "| PyTorch (Caffe2) | fp16 | 256 | 1 | speedup | 1.000 | 1.000 | 1.00× ±0.00 | 5% | not comparable: " \
           "a speedup at N = 1 is 1 by definition: nothing measured to check |" in out


def _as(r, **fields):
    """Result r as the run of another cell: its spec with `fields` changed."""
    from backends.protocol import RunSpec
    spec = RunSpec.from_dict(r.spec)
    for k, v in fields.items():
        setattr(spec, k, v)
    r.spec, r.run_id = spec.to_dict(), spec.run_id
    return r


def test_the_cells_of_each_mode_and_data_mode_are_told_apart_and_data_only_is_not_checked(tmp_path,
                                                                                          capsys):
    """Default and tuned, synthetic, real data and data-only, against one reference row of 1200:
    each row says which cell it is; the data-only cell (the input pipeline alone, no training) is
    not held against a training figure, so its 500 img/s does not fail the check, nor is the
    real-data cell held against a figure of synthetic data."""
    runs = [windowed("tf", "fp32", 1, [w * 1.3 for w in WINDOWS]),
            _as(windowed("tf", "fp32", 1, [w * 1.5 for w in WINDOWS]), mode="tuned"),
            _as(windowed("tf", "fp32", 1, [w * 1.25 for w in WINDOWS]), data="/d"),
            _as(windowed("tf", "fp32", 1, [w * 0.5 for w in WINDOWS]), data="/d", data_only=True)]
    c = save_campaign(tmp_path / "c", runs)
    ref = _reference(tmp_path, HEAD + "H200,tf,fp32,1,1200\n")
    code, out, _ = main_exit(["check", str(c), "--reference", ref], capsys)
    assert "| framework | mode | precision | batch | data | N | figure |" in out  # as the report's
    assert "| TensorFlow (+Horovod) | default | fp32 | 256 | synthetic | 1 | img/s | 1300.78 | 1200.00 |" in out
    assert "| TensorFlow (+Horovod) | tuned | fp32 | 256 | synthetic | 1 | img/s | 1500.90 |" in out
    assert "| TensorFlow (+Horovod) | default | fp32 | 256 | real | 1 | img/s | 1250.75 | 1200.00 | 1.04× ±0.01 " \
           "| 5% | not comparable: real data here, synthetic in the reference:" in out
    assert "| TensorFlow (+Horovod) | default | fp32 | 256 | data-only | 1 | img/s | 500.30 | 1200.00 | 0.417× ±0.004 " \
           "| 5% | not comparable: data-only: the input pipeline alone, no training, against a " \
           "figure of training |" in out
    assert code == 0 and "2 pass, 0 fall short, 2 not comparable" in out


def test_a_reference_row_with_an_empty_nodes_cell_matches_no_cell(campaign, tmp_path, capsys):
    """A `nodes` column with one cell left empty: that row matches no cell (as an empty batch or
    image size does), the others are checked; it raised 'cannot convert float NaN to integer'."""
    ref = _reference(tmp_path, "gpu,framework,precision,gpus,nodes,images_per_sec\n"
                               "H200,tf,fp32,1,1,1000\nH200,tf,fp32,2,,2000\n")
    code, out, err = main_exit(["check", str(campaign), "--reference", ref], capsys)
    assert code == 0, err
    assert "1 pass, 0 fall short, 0 not comparable (of 1 figure the" in out
    code, out, err = main_exit(["report", str(campaign), "--reference", ref], capsys)
    assert code == 0, err
    assert "1 of 3 measured cells have a published figure" in out


def test_a_speedup_without_its_one_gpu_figure_says_why_it_is_not_checked(tmp_path, capsys):
    """The 1-GPU cell ran out of memory, the 3-GPU cell has a figure: its speedup has nothing to
    be divided by, and the verdict says so (it said 'not comparable: ok')."""
    c = save_campaign(tmp_path / "c", [result("tf", "fp32", 1, status="oom", reason="OOM",
                                              device_name="NVIDIA H200"),
                                       windowed("tf", "fp32", 3, [249.0, 250.0, 251.0])])
    code, out, _ = main_exit(["check", str(c), "--reference", "r740_v100_resnet50_speedup"], capsys)
    assert code == 1
    assert "| TensorFlow (+Horovod) | fp32 | 256 | 3 | speedup | n/a | 2.120 | — | 5% | not comparable: " \
           "no speedup: the cell at N = 1, the same otherwise, has no figure |" in out


def test_a_cell_is_held_only_against_reference_figures_of_its_own_data_mode(tmp_path, capsys):
    """A real-data cell (--data DIR: its figure includes the input pipeline) against a reference
    of synthetic data (tf_cnn_benchmarks' default, and any reference without a `data` column) is
    not comparable, and says why; a reference row of real data holds it. A speedup (a ratio on
    one machine) may cross data modes, as it crosses hardware, and says so."""
    runs = [windowed("tf", "fp32", 1, WINDOWS), windowed("tf", "fp32", 2, [1.5 * w for w in WINDOWS]),
            _as(windowed("tf", "fp32", 1, [w * 0.5 for w in WINDOWS]), data="/d"),
            _as(windowed("tf", "fp32", 2, [w * 0.9 for w in WINDOWS]), data="/d")]
    c = save_campaign(tmp_path / "c", runs)
    synthetic = _reference(tmp_path, "gpu,framework,precision,gpus,images_per_sec,speedup_published\n"
                                     "H200,tf,fp32,1,1000,1\nH200,tf,fp32,2,1500,1.5\n")
    code, out, _ = main_exit(["check", str(c), "--reference", synthetic], capsys)
    assert code == 0 and "4 pass, 0 fall short, 4 not comparable (of 8 figures" in out
    assert "| TensorFlow (+Horovod) | fp32 | 256 | real | 1 | img/s | 500.30 | 1000.00 | 0.50× ±0.01 | 5% | " \
           "not comparable: real data here, synthetic in the reference: images/sec are held only " \
           "against figures of the same data (a reference without a data column is synthetic) |" in out
    assert "| TensorFlow (+Horovod) | fp32 | 256 | real | 2 | speedup | 1.800 | 1.500 | 1.20× ±0.01 | 5% | " \
           "pass: across data: real here, synthetic in the reference |" in out
    both = _reference(tmp_path, "gpu,framework,precision,gpus,data,images_per_sec\n"
                                "H200,tf,fp32,1,synthetic,1000\nH200,tf,fp32,1,real,600\n")
    code, out, _ = main_exit(["check", str(c), "--reference", both], capsys)
    assert code == 1 and "1 pass, 1 falls short, 2 not comparable (of 4 figures" in out
    assert "| TensorFlow (+Horovod) | fp32 | 256 | real | 1 | img/s | 500.30 | 600.00 | 0.83× ±0.01 | 5% | " \
           "falls short: below 570.00 |" in out
    assert "| TensorFlow (+Horovod) | fp32 | 256 | synthetic | 1 | img/s | 1000.60 | 600.00 | 1.67× ±0.02 | " \
           "5% | not comparable: synthetic data here, real in the reference:" in out
    bad = _reference(tmp_path, "precision,gpus,data,images_per_sec\nfp32,1,imagenet,600\n")
    code, _, err = main_exit(["check", str(c), "--reference", bad], capsys)
    assert code == 2 and err == "compare: error: reference {}: data 'imagenet' on line 2 is not a " \
                                "data mode; give synthetic or real\n".format(bad)


def _two_nodes_two_sizes_two_networks(root):
    """PyTorch fp32 on 1×2 and 2×2 GPUs at image sizes 224 and 112, and a VGG-16 cell."""
    from backends.protocol import RunSpec
    rs = [windowed("caffe2", "fp32", 2, [2 * n * k * w for w in WINDOWS], nodes=n, image=size)
          for n in (1, 2) for size, k in ((224, 1), (112, 3))]
    vgg = windowed("caffe2", "fp32", 1, WINDOWS)
    spec = RunSpec.from_dict(vgg.spec)
    spec.model = "vgg16"
    vgg.spec, vgg.run_id = spec.to_dict(), spec.run_id
    return save_campaign(root, rs + [vgg])


def test_check_rows_say_nodes_image_size_and_network_as_the_report_does(tmp_path, capsys):
    """Each row of the check names its cell: 2×2 (two nodes) apart from 2, image 112 apart from
    224, and the network where the campaign has several (as the report's table of the same
    reference shows it), even when the reference only matches ResNet-50 cells."""
    root = _two_nodes_two_sizes_two_networks(tmp_path / "c")
    ref = _reference(tmp_path, "gpu,framework,precision,gpus,nodes,images_per_sec\n"
                               "H200,caffe2,fp32,2,1,1900\nH200,caffe2,fp32,2,2,3900\n")
    code, out, err = main_exit(["check", str(root), "--reference", ref], capsys)
    assert code == 0, out + err
    assert "| framework | model | precision | batch | image | N | figure |" in out
    assert "| PyTorch (Caffe2) | resnet50 | fp32 | 256 | 112 | 2×2 | img/s | 12007.20 | 3900.00 |" in out
    assert "| PyTorch (Caffe2) | resnet50 | fp32 | 256 | 224 | 2 | img/s | 2001.20 | 1900.00 |" in out
    code, out, err = main_exit(["report", str(root), "--reference", ref, "--out",
                                str(tmp_path / "r")], capsys)
    assert code == 0, err
    table = out[out.index("## Measured versus published"):]
    assert "| framework | model | precision | batch | image | N | img/s |" in table
    assert "| PyTorch (Caffe2) | resnet50 | fp32 | 256 | 112 | 2×2 | 12007.20 | 3900.00 |" in table
    assert "| PyTorch (Caffe2) | resnet50 | fp32 | 256 | 224 | 2 | 2001.20 | 1900.00 |" in table


def test_a_reference_without_rows_says_so(campaign, tmp_path, capsys):
    """A header and no row: nothing matches because there is nothing to match, not because 'each
    field has a value in both, but no row has all of one cell's' (it has none at all)."""
    ref = _reference(tmp_path, "precision,gpus,images_per_sec\n")
    code, _, err = main_exit(["check", str(campaign), "--reference", ref], capsys)
    assert code == 2
    assert "the reference has no rows" in err and "each field has a value in both" not in err
