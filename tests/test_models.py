"""`--model` on the host: the networks' figures, the matrix axis and its image sizes, ResNet-50's
run ids and spec hashes unchanged, the report's model column, references per network, and the
user errors. The frameworks' own builds of the networks: tests/backends/test_models.py."""
import pytest

from backends import networks
from backends.protocol import RunSpec
from compare import frameworks
from compare.matrix import Matrix
from compare.reporting import comparator, references, report, tables
from tests.helpers import main_exit, windowed

# torchvision's trainable-parameter counts and its published "GFLOPS" (multiply-adds per image at
# the native size) for resnet50, resnet152, inception_v3 (aux_logits=False) and vgg16
TORCHVISION = {"resnet50": (25557032, 4.09), "resnet152": (60192808, 11.51),
               "inception3": (23834568, 5.71), "vgg16": (138357544, 15.47)}
TIMM_INCEPTION_V4 = 42679816  # timm's inception_v4, 1000 classes


def test_the_layer_tables_count_the_references_parameters_and_multiply_adds():
    summary = networks.summary()
    for name, (parameters, gmacs) in TORCHVISION.items():
        assert summary[name]["parameters"] == parameters, name
        assert round(summary[name]["macs"] / 1e9, 2) == gmacs, name
    assert summary["inception4"]["parameters"] == TIMM_INCEPTION_V4
    # VGG-16's adaptive pooling keeps the classifier (and the count) at any image size
    assert networks.tally("vgg16", 64).parameters == TORCHVISION["vgg16"][0]
    assert {n: networks.smallest_size(n) for n in networks.names()} == {
        "resnet50": 32, "resnet152": 32, "inception3": 75, "inception4": 75, "vgg16": 32}


def test_pooling_matrix_is_pytorchs_adaptive_average_pooling():
    assert networks.pooling_matrix(2, 2) == [[1.0, 0.0], [0.0, 1.0]]
    assert networks.pooling_matrix(2, 3) == [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]  # windows overlap
    assert networks.pooling_matrix(3, 1) == [[1.0], [1.0], [1.0]]  # smaller input: replicated


def test_list_models(capsys):
    code, out, _ = main_exit(["list", "models"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[1].split()[:6] == ["resnet50", "ResNet-50", "v1.5", "25,557,032", "224x224", "8.18"]
    assert lines[3].split()[:5] == ["inception3", "Inception-v3", "23,834,568", "299x299", "11.43"]
    assert "torchvision inception_v3(aux_logits=False): no auxiliary head, BN with scale" in out
    assert lines[4].split()[:5] == ["inception4", "Inception-v4", "42,679,816", "299x299", "24.51"]
    assert lines[5].split()[:5] == ["vgg16", "VGG-16", "138,357,544", "224x224", "30.94"]
    assert lines[6].startswith("nasnet      NASNet-A         unsupported: nasnet is not "
                               "implemented")
    assert "GFLOPs: 2 x the multiply-adds of the convolutions and fully connected layers" in out


def _specs(models="resnet50,inception3,vgg16", quick=False, image_size=None):
    from compare import study
    from compare.matrix import image_sizes
    names = study.build({"model": models}).model
    common = {"image_size": image_size or (64 if quick else 224)}
    return Matrix([frameworks.get("caffe2")], [1], ["fp32"], [32], common=common,
                  models=names, image_sizes=image_sizes(names, image_size, quick)).specs()


def test_each_network_runs_at_its_native_size_unless_told():
    assert [(s.model, s.image_size) for s in _specs()] == [
        ("resnet50", 224), ("inception3", 299), ("vgg16", 224)]
    assert [s.image_size for s in _specs(quick=True)] == [64, 75, 64]  # a size each accepts
    assert [s.image_size for s in _specs(image_size=96)] == [96, 96, 96]


def test_resnet50_keeps_its_run_ids_and_spec_hashes():
    # the values main recorded before --model existed: old campaigns resume and compare as before
    s = RunSpec(framework="caffe2", backend="caffe2_torch", gpus=2, device="cuda", precision="fp16",
                batch_size=256)
    assert (s.run_id, s.spec_hash) == ("caffe2-fp16-g2-b256-s224-r0", "21693407e9d79ad3")
    v = RunSpec(framework="caffe2", backend="caffe2_torch", gpus=2, device="cuda", precision="fp16",
                batch_size=256, model="vgg16")
    assert v.run_id == "caffe2-vgg16-fp16-g2-b256-s224-r0" and v.spec_hash != s.spec_hash
    assert [s.run_id for s in _specs()] == ["caffe2-fp32-w1-b32-s224-r0",
                                            "caffe2-inception3-fp32-w1-b32-s299-r0",
                                            "caffe2-vgg16-fp32-w1-b32-s224-r0"]


@pytest.mark.parametrize("argv, message", [
    (["--model", "resnet18"], "compare: error: unknown model 'resnet18'; choose from resnet50, "
     "resnet152, inception3, inception4, vgg16, nasnet (`compare list models`)"),
    (["--model", "resnet50,inception3", "--image-size", "64"], "compare: error: --image-size 64: "
     "inception3 needs images of at least 75x75 px; give a larger size, or leave --image-size out "
     "(each network's native size)"),
    (["--model", " ,"], "compare: error: --model is empty; choose from resnet50, resnet152, "
     "inception3, inception4, vgg16, nasnet"),
])
def test_bad_models_are_one_line_and_exit_2(argv, message, capsys, tmp_path):
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--results", str(tmp_path / "c")]
                             + argv, capsys)
    assert (code, err.strip()) == (2, message)


def test_backends_record_an_unknown_or_unimplemented_network_with_the_reason():
    assert networks.why_not("nasnet").startswith("nasnet is not implemented: NASNet-A's searched")
    assert networks.why_not("resnet18") == ("unknown model 'resnet18'; choose from resnet50, "
                                            "resnet152, inception3, inception4, vgg16")


def _two_networks():
    """PyTorch, ResNet-50 and VGG-16 on 1 and 2 GPUs, as the A6000 seed measured them."""
    out = []
    for model, image, one, two in (("resnet50", 224, 1220.0, 2380.0), ("vgg16", 224, 554.0, 1056.0)):
        for gpus, ips in ((1, one), (2, two)):
            r = windowed("caffe2", "fp16", gpus, [ips * f for f in (0.99, 1.0, 1.01)], image=image)
            r.spec["model"] = model
            out.append(r)
    return comparator.cells(out)


def test_the_report_has_a_model_column_and_speedups_per_network():
    cells = _two_networks()
    speedup = {m: round(float(c.speedup), 3) for m, c in
               cells[cells.gpus == 2].set_index("model").iterrows()}
    assert speedup == {"resnet50": round(2380 / 1220, 3), "vgg16": round(1056 / 554, 3)}
    text = tables.markdown(report.build(cells).sections())
    assert "| framework | model | precision | batch | image | 1 GPU | 2 GPUs |" in text
    assert "| PyTorch (Caffe2) | vgg16 | fp16 | 256 | 224 | 554.00 | 1056.00 (1.906 ±" in text
    # the findings state the scaling network by network
    assert "PyTorch (Caffe2) vgg16 (fp16) on 2 GPUs is 1.91× as fast as on one GPU" in text
    assert "PyTorch (Caffe2) resnet50 (fp16) on 2 GPUs is 1.95× as fast as on one GPU" in text


def test_the_seed_reference_sits_beside_the_cells_of_the_same_network():
    _, ref = references.load("a6000_tf_cnn_benchmarks")
    table = references.compare(_two_networks(), ref)
    vgg2 = table[(table.model == "vgg16") & (table.gpus == 2)].iloc[0]
    # tf_cnn_benchmarks, vgg16, fp16, batch 256 on 2x A6000: 1056.00 (1.906)
    assert (vgg2.published_images_per_sec, vgg2.published_speedup) == (1056.00, 1.906)
    res2 = table[(table.model == "resnet50") & (table.gpus == 2)].iloc[0]
    assert (res2.published_images_per_sec, res2.published_speedup) == (2382.99, 1.952)
    text = tables.markdown([references.table("a6000_tf_cnn_benchmarks", table)])
    assert "| PyTorch (Caffe2) | vgg16 | fp16 | 256 | 2 | 1056.00 | 1056.00 | 1.00× ±" in text


def test_where_the_time_goes_names_the_network_beside_the_time_to_build_it():
    from compare.reporting import timeline as report_phases
    from tests.test_phases import _marks
    runs = []
    for model, build in (("resnet50", 2.0), ("vgg16", 9.0)):
        r = windowed("caffe2", "fp16", 1, [100.0, 101.0])
        r.spec["model"], r.phases = model, _marks(0.0, model_built=build)
        runs.append(r)
    text = tables.markdown(report_phases.sections(runs))
    assert "| framework | model | precision | batch | N | launch |" in text
    assert "| PyTorch (Caffe2) | vgg16 | fp16 | 256 | 1 | 0.5 | 0.5 | 0.5 | 0.5 | 9.0 |" in text
