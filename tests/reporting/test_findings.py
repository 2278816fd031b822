"""'What the numbers say' claims only what the intervals support: a single quick CPU run per cell
is called smoke and ranks nothing; clearly separated repeats are stated as a difference."""
from compare.reporting import comparator, findings, report, tables
from tests.helpers import windowed


def _runs(framework, figures, gpus=1, precision="fp32"):
    """One CPU run per figure (repeats), each with three windows around it."""
    return [windowed(framework, precision, gpus, [x - 1.0, x, x + 1.0], repeat=i, device="cpu",
                     batch=32, image=64) for i, x in enumerate(figures)]


def _summary(results):
    cells = comparator.cells(results)
    return report.build(cells).summary.lines, tables.markdown(report.build(cells).sections())


def test_one_quick_cpu_run_per_cell_is_smoke_not_a_ranking():
    # --quick, --repeats 1: PyTorch looks twice as fast as TensorFlow, but each cell is one run
    lines, text = _summary(_runs("tf", [10.0]) + _runs("caffe2", [20.0]) + _runs("mxnet", [15.0])
                           + _runs("tf", [18.0], gpus=2) + _runs("caffe2", [30.0], gpus=2))
    assert lines == [findings.SMOKE]
    assert "## What the numbers say\n\n- Smoke numbers, not a ranking: every cell is a single run on a CPU" in text
    for claim in ("Fastest", "faster", "slower", "as fast as", "versus"):
        assert not any(claim in line for line in lines)
    assert "| PyTorch (Caffe2) | fp32 | 32 | 64 | 20.00 | 30.00 (1.500 ±" in text  # the tables stay


def test_clearly_separated_repeats_are_a_finding():
    lines, _ = _summary(_runs("tf", [100.0, 101.0, 102.0]) + _runs("caffe2", [150.0, 151.0, 152.0]))
    assert lines[0].startswith("Fastest: PyTorch (Caffe2) at fp32, batch 32, on 1 worker (CPU): 151.0 ±")
    assert lines[0].endswith(" images/sec.")
    assert lines[1] == "PyTorch (Caffe2) versus TensorFlow (+Horovod) at equal settings: faster in 1 setting (1.50×)."


def test_overlapping_repeats_are_within_noise():
    lines, _ = _summary(_runs("tf", [100.0, 110.0, 95.0]) + _runs("caffe2", [102.0, 98.0, 108.0]))
    assert lines[0].startswith("Fastest: PyTorch (Caffe2) at fp32, batch 32, on 1 worker (CPU): 102.0 ±")
    assert "; within noise of TensorFlow (+Horovod) at fp32, batch 32, on 1 worker (CPU) (±" in lines[0]
    assert lines[1].startswith("PyTorch (Caffe2) and TensorFlow (+Horovod) are within noise of each "
                               "other at equal settings (±")
    assert not any("faster" in line or "slower" in line for line in lines)


def test_a_precision_gain_inside_its_interval_is_not_claimed():
    lines, _ = _summary(_runs("caffe2", [100.0, 101.0, 102.0]) +
                        _runs("caffe2", [100.5, 103.0, 99.0], precision="bf16") +
                        _runs("tf", [100.0, 101.0, 102.0]) + _runs("tf", [180.0, 181.0, 182.0], precision="bf16"))
    gains = [line for line in lines if "than fp32" in line or "of fp32" in line]
    assert gains[0].startswith("PyTorch (Caffe2): bf16 is within noise of fp32 (±")
    assert gains[1].startswith("TensorFlow (+Horovod): bf16 is 79 % faster than fp32 (±")


EMULATED = ("bf16 autocast on a CPU without bf16 instructions (neither avx512_bf16 nor amx_bf16, and "
            "no AVX-512): PyTorch emulates it, so its figure and its gain over fp32 measure the "
            "emulation, not bf16 hardware")


def _noted(runs, note, key="note"):
    for r in runs:
        r.settings = dict(r.settings or {}, **{key: note})
    return runs


def test_a_gain_from_an_emulated_precision_is_marked_and_its_note_listed():
    # the main job on a CPU without AVX-512: PyTorch's bf16 about 24x slower than its fp32
    results = _runs("caffe2", [28.0, 28.5, 29.0]) + _runs("caffe2", [27.0, 28.0, 28.2], gpus=2) + \
        _noted(_runs("caffe2", [1.15, 1.17, 1.2], precision="bf16"), EMULATED) + \
        _noted(_runs("caffe2", [1.1, 1.12, 1.14], gpus=2, precision="bf16"), EMULATED)
    lines, text = _summary(results)
    gain = next(line for line in lines if "than fp32" in line)
    assert gain.startswith("PyTorch (Caffe2): bf16 is 96 % slower than fp32 (±")
    assert gain.endswith(" than fp32 (±2.9 %). Note: {}.".format(EMULATED))
    assert "| PyTorch (Caffe2) | bf16 | 32 | 64 | -95.9% ±2.9% (note) | -96.0% ±2.9% (note) |" in text
    assert report.NOTED in text
    assert "## Notes on cells\n\n| framework | precision | batch | image | N | note |\n" in text
    assert "| PyTorch (Caffe2) | bf16 | 32 | 64 | 1, 2 | {} |".format(EMULATED) in text


def test_cells_without_a_note_have_no_notes_table_and_no_mark():
    lines, text = _summary(_runs("caffe2", [28.0, 28.5, 29.0]) +
                           _runs("caffe2", [40.0, 41.0, 42.0], precision="bf16"))
    assert "Notes on cells" not in text and "(note)" not in text
    assert not any("Note:" in line for line in lines)


def test_a_distribution_note_is_listed_but_does_not_mark_the_precision_gain():
    one_process = "horovodrun found no gloo: the 2 workers ran as one process with 2 replicas"
    results = _runs("tf", [10.0, 10.5, 11.0]) + _noted(_runs("tf", [18.0, 18.5, 19.0], gpus=2),
                                                       one_process, "distribution_note")
    _, text = _summary(results)
    assert "| TensorFlow (+Horovod) | fp32 | 32 | 64 | 2 | {} |".format(one_process) in text
    assert "(note)" not in text


def test_the_scaling_and_gain_of_each_batch_are_their_own_sentences():
    """--batch-size 64,256: batch 64 scales 1.5× on 2 GPUs, batch 256 1.95×; fp16 gains 20 % at
    batch 64, 80 % at 256. Each batch gets its own sentence, naming it; none is given for both."""
    def runs(precision, batch, gpus, figure):
        return [windowed("tf", precision, gpus, [figure - 1.0, figure, figure + 1.0], repeat=i,
                         batch=batch) for i in range(3)]
    results = []
    for batch, scale, gain in ((64, 1.5, 1.2), (256, 1.95, 1.8)):
        for gpus in (1, 2):
            figure = 1000.0 * (scale if gpus == 2 else 1.0)
            results += runs("fp32", batch, gpus, figure) + runs("fp16", batch, gpus, figure * gain)
    lines, _ = _summary(results)
    scaling = sorted(line for line in lines if "as fast as on one" in line)
    assert [line.split(" is ")[0] for line in scaling] == [
        "TensorFlow (+Horovod) (fp16, batch 256) on 2 GPUs", "TensorFlow (+Horovod) (fp16, batch 64) on 2 GPUs",
        "TensorFlow (+Horovod) (fp32, batch 256) on 2 GPUs", "TensorFlow (+Horovod) (fp32, batch 64) on 2 GPUs"]
    assert any(line.startswith("TensorFlow (+Horovod) (fp32, batch 64) on 2 GPUs is 1.50× as fast")
               for line in scaling)
    gains = sorted(line for line in lines if "than fp32" in line)
    assert [line.split(" (±")[0] for line in gains] == [
        "TensorFlow (+Horovod): fp16 at batch 256 is 80 % faster than fp32",
        "TensorFlow (+Horovod): fp16 at batch 64 is 20 % faster than fp32"]


def test_a_gain_within_noise_names_its_cells_by_nodes_and_gpus():
    """--nodes 1,2 --gpus 1,2: fp16 gains 80 % on 1 node × 1 GPU and 1 × 2, none on 2 nodes × 1
    GPU and 2 × 2; the cells within noise are named 2×1 and 2×2, not 'N=2, N=4' beside a 1×2."""
    results = []
    for nodes, gpus, gain in ((1, 1, 1.8), (1, 2, 1.8), (2, 1, 1.0), (2, 2, 1.0)):
        for precision, figure in (("fp32", 1000.0 * nodes * gpus), ("fp16", 1000.0 * nodes * gpus * gain)):
            results += [windowed("tf", precision, gpus, [figure - 1.0, figure, figure + 1.0], repeat=i,
                                 nodes=nodes) for i in range(3)]
    lines, _ = _summary(results)
    gain = next(line for line in lines if "than fp32" in line)
    assert "; within noise of fp32 at N=2×1, N=2×2 (±" in gain, gain


def test_each_image_size_gets_its_own_sentence_and_says_which_it_is():
    """Image sizes 224 and 112 of one framework and precision are two cells that scale and gain
    on their own: a sentence each, naming its size (one sentence for the two hid one of them)."""
    def runs(gpus, precision, image, figure):
        return [windowed("caffe2", precision, gpus, [figure - 1.0, figure, figure + 1.0],
                         repeat=i, image=image) for i in range(3)]
    results = (runs(1, "fp32", 224, 100.0) + runs(2, "fp32", 224, 200.0)
               + runs(1, "fp32", 112, 300.0) + runs(2, "fp32", 112, 450.0)
               + runs(1, "fp16", 224, 180.0) + runs(1, "fp16", 112, 300.0))
    lines, _ = _summary(results)
    assert "PyTorch (Caffe2) (fp32, image 224) on 2 GPUs is 2.00× as fast as on one GPU (±0.02): " \
        "100% scaling efficiency." in lines
    assert "PyTorch (Caffe2) (fp32, image 112) on 2 GPUs is 1.50× as fast as on one GPU (±0.00): " \
        "75% scaling efficiency." in lines
    assert any(x.startswith("PyTorch (Caffe2): fp16 at image 224 is 80 % faster than fp32") for x in lines)
    assert any(x.startswith("PyTorch (Caffe2): fp16 at image 112 is within noise of fp32") for x in lines)
    assert lines[0].startswith("Fastest: PyTorch (Caffe2) at fp32, batch 256, image 112, on 2 GPUs:")
