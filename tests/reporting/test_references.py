"""Published references: listing, measured beside published with the ratio, the user's own CSVs."""
import pytest

from backends.protocol import RunSpec
from compare.errors import UserError
from compare.reporting import comparator, references, tables
from tests.helpers import fixed_results, main_exit, result


def test_list_references(capsys):
    code, out, _ = main_exit(["list", "references"], capsys)
    assert code == 0
    assert out.splitlines()[0].split()[:2] == ["a6000_tf_cnn_benchmarks", "188"]  # every network's
    assert "(resnet50 36, inception3 32, vgg16 32, nasnet 32, resnet152 28, inception4 28)" in out
    assert "r740_v100_resnet50_speedup" in out


def test_measured_beside_published():
    _, ref = references.load("a6000_tf_cnn_benchmarks")
    table = references.compare(comparator.cells(fixed_results()), ref)
    tf8 = table[(table.framework == "tf") & (table.precision == "fp16") & (table.gpus == 8)].iloc[0]
    assert tf8.published_images_per_sec == 8816.47 and tf8.ratio == pytest.approx(1.0)
    assert tf8.published_speedup == 7.222 and tf8.speedup_ratio == pytest.approx(1.0, abs=1e-4)
    c2 = table[(table.framework == "caffe2") & (table.precision == "fp16") & (table.gpus == 1)].iloc[0]
    assert c2.ratio == pytest.approx(1300.0 / 1220.76)
    text = tables.markdown([references.table("a6000_tf_cnn_benchmarks", table)])
    assert "| TensorFlow (+Horovod) | fp16 | 256 | 8 | 8816.47 | 8816.47 | 1.00× ±0.00 | 7.222 | 7.222 | " \
           "1.00× ±0.00 |" in text


def test_speedup_only_reference_matches_on_framework():
    _, ref = references.load("r740_v100_resnet50_speedup")
    assert set(ref.framework) == {"caffe2", "mxnet", "tf"}  # tf_horovod read as the alias of tf
    # R740, 3x V100: Caffe2 2.61x (FP32); Horovod+TF 2.12x (FP32)
    runs = [result("caffe2", "fp32", 1, 100.0), result("caffe2", "fp32", 3, 261.0),
            result("tf", "fp32", 1, 100.0), result("tf", "fp32", 3, 250.0)]
    table = references.compare(comparator.cells(runs), ref)
    three = {r.framework: r for _, r in table[table.gpus == 3].iterrows()}
    assert three["caffe2"].published_speedup == 2.61
    assert three["caffe2"].speedup_ratio == pytest.approx(1.0)
    assert three["tf"].speedup_ratio == pytest.approx(2.5 / 2.12)
    assert table[table.gpus == 1].published_speedup.tolist() == [None, None]


def test_figures_of_other_data_are_named_and_their_images_per_sec_not_held_against():
    # the R740 study trained on its blog series' data set (ImageNet): its speedups are shown beside
    # synthetic cells, with a note; the A6000's synthetic images/sec are not set against real data
    _, r740 = references.load("r740_v100_resnet50_speedup")
    assert set(r740.data) == {"real"}
    runs = [result("caffe2", "fp32", 1, 100.0), result("caffe2", "fp32", 3, 261.0)]
    text = tables.markdown([references.table("r740", references.compare(comparator.cells(runs), r740))])
    assert "| PyTorch (Caffe2) | fp32 | 256 | 3 | 261.00 | — | — | 2.610 | 2.610 | 1.00× ±0.01 |" in text
    assert "The reference's figures are of real data, these cells' of synthetic: images/sec are " \
           "not held against figures of other data" in text
    _, a6000 = references.load("a6000_tf_cnn_benchmarks")
    real = [r for r in fixed_results() if r.spec["framework"] == "tf" and r.spec["precision"] == "fp16"]
    for r in real:
        spec = RunSpec.from_dict(r.spec)
        spec.data = "/imagenet"
        r.spec = spec.to_dict()
    table = references.compare(comparator.cells(real), a6000)
    text = tables.markdown([references.table("a6000", table)])
    assert "| TensorFlow (+Horovod) | fp16 | 256 | 8 | 8816.47 | 8816.47 | other data | 7.222 | " \
           "7.222 | 1.00× ±0.00 |" in text


def test_user_reference_csv(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPARE_CACHE", str(tmp_path))
    (tmp_path / "references").mkdir()
    (tmp_path / "references" / "my_v100.csv").write_text(
        "framework,precision,gpus,batch_size,images_per_sec,gpu\npytorch,fp16,2,256,2000,V100\n")
    assert "my_v100" in references.available()
    _, ref = references.load("my_v100")
    table = references.compare(comparator.cells(fixed_results()), ref)
    hit = table[table.published_images_per_sec.notna()]
    assert list(zip(hit.framework, hit.gpus)) == [("caffe2", 2)]
    assert hit.ratio.iloc[0] == pytest.approx(2450.0 / 2000.0)


def test_bad_references_name_the_fix(tmp_path):
    with pytest.raises(UserError, match="unknown reference 'nope'; choose from a6000_tf_cnn"):
        references.load("nope")
    bad = tmp_path / "bad.csv"
    bad.write_text("precision,gpus\nfp32,1\n")
    with pytest.raises(UserError, match="needs columns precision, gpus and one of images_per_sec, "
                                        "speedup_published"):
        references.load(str(bad))


def test_report_command_with_reference_and_html(tmp_path, capsys):
    from compare.store import Campaign
    from tests.helpers import MACHINE
    c = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    for r in fixed_results():
        c.save_result(r)
    code, out, err = main_exit(["report", str(c.root), "--reference", "a6000_tf_cnn_benchmarks",
                            "--format", "html,md", "--baseline", "pytorch"], capsys)
    assert code == 0, err
    assert "## Measured versus published: a6000_tf_cnn_benchmarks (a6000)" in out
    assert "img/s ÷ img/s of PyTorch (Caffe2)" in out
    assert "wrote {}".format(c.root / "report" / "report.html") in err
    assert (c.root / "report" / "report.html").read_text().count("data:image/png;base64,") == 4
    code, _, err = main_exit(["report", str(c.root), "--reference", "nope"], capsys)
    assert code == 2 and err.startswith("compare: error: unknown reference 'nope'; choose from")


def test_a_reference_beside_a_campaign_without_results_yet_is_a_report_not_an_internal_error(
        tmp_path, capsys):
    """A campaign planned but not run yet (or whose results were all left out): `compare report
    --reference` says no results yet and writes its files (it raised AttributeError: exit 70)."""
    from backends.protocol import RunSpec
    from compare.store import Campaign
    from tests.helpers import MACHINE
    c = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    c.plan([RunSpec.from_dict(result("caffe2", "fp32", 1, 100.0).spec)])
    c.unlock()
    code, out, err = main_exit(["report", str(c.root), "--reference", "a6000_tf_cnn_benchmarks",
                                "--format", "md,csv,html"], capsys)
    assert code == 0, err
    assert "No results yet." in out and "Not run yet" in out
    assert "Measured versus published" not in out


def test_a_user_reference_with_a_gpu_cell_left_empty_is_listed(tmp_path, monkeypatch, capsys):
    """One row names its GPU, the other leaves it empty (no GPU named): `compare list references`
    lists the reference (sorting the names beside None raised TypeError: exit 70)."""
    monkeypatch.setenv("COMPARE_CACHE", str(tmp_path))
    (tmp_path / "references").mkdir()
    (tmp_path / "references" / "mixed.csv").write_text(
        "gpu,precision,gpus,images_per_sec\nV100,fp16,1,1000\n,fp16,2,1900\n")
    code, out, err = main_exit(["list", "references"], capsys)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("mixed "))
    assert "gpu: V100" in line


def test_two_references_of_one_file_name_write_two_tables_each_named_by_its_folder(tmp_path, capsys):
    """monday/ref.csv and tuesday/ref.csv: each has its own table file and its own title (both
    were `reference_ref`: the second overwrote the first's CSV, and the titles were the same)."""
    from compare.store import Campaign
    from tests.helpers import MACHINE
    c = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    for r in fixed_results():
        c.save_result(r)
    c.unlock()
    for day, figure in (("monday", 500), ("tuesday", 700)):
        (tmp_path / day).mkdir()
        (tmp_path / day / "ref.csv").write_text(
            "gpu,framework,precision,gpus,images_per_sec\nA6000,caffe2,fp32,1,{}\n".format(figure))
    code, out, err = main_exit(["report", str(c.root), "--format", "md,csv",
                                "--reference", str(tmp_path / "monday" / "ref.csv"),
                                "--reference", str(tmp_path / "tuesday" / "ref.csv")], capsys)
    assert code == 0, err
    assert "## Measured versus published: monday/ref (A6000)" in out
    assert "## Measured versus published: tuesday/ref (A6000)" in out
    tables_dir = c.root / "report" / "tables"
    assert sorted(p.name for p in tables_dir.glob("reference_*")) == ["reference_monday_ref.csv",
                                                                     "reference_tuesday_ref.csv"]
    for day, figure in (("monday", "500.00"), ("tuesday", "700.00")):
        text = (tables_dir / "reference_{}_ref.csv".format(day)).read_text()
        assert "PyTorch (Caffe2),fp32,256,1,560.00,{},".format(figure) in text


def test_a_one_row_reference_is_listed_in_the_singular(tmp_path, monkeypatch, capsys):
    # "1 rows" read wrong; the column keeps its width
    monkeypatch.setenv("COMPARE_CACHE", str(tmp_path))
    (tmp_path / "references").mkdir()
    (tmp_path / "references" / "one.csv").write_text("gpu,precision,gpus,images_per_sec\nV100,fp16,1,1000\n")
    code, out, err = main_exit(["list", "references"], capsys)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("one "))
    assert line == "one                                 1 row  (resnet50 1)  gpu: V100         figures: images_per_sec"


def test_a_cell_matched_by_two_rows_counts_once_among_the_measured_cells(tmp_path):
    """Two published figures of one cell (two GPUs' rows): two rows of the table, but the note
    counts cells: '1 of 2 measured cells', not '2 of 3' (a row is not a cell)."""
    path = tmp_path / "two.csv"
    path.write_text("gpu,precision,gpus,images_per_sec\nA6000,fp32,1,500\nV100,fp32,1,400\n")
    _, ref = references.load(str(path))
    cells = comparator.cells([result("caffe2", "fp32", 1, 520.0), result("caffe2", "fp32", 2, 900.0)])
    table = references.table("two", references.compare(cells, ref))
    assert len(table.rows) == 3
    assert "1 of 2 measured cells have a published figure" in table.notes[0]


@pytest.mark.parametrize("given,why", [
    ("{tmp}", "is a folder, not a CSV file"),
    ("{tmp}/mine.csv", "no such file"),
    ("mine.csv", "no such file"),
    ("/dev/null", "is not a regular file"),
], ids=["folder", "missing-path", "missing-csv-name", "device"])
def test_a_reference_path_that_is_no_csv_file_says_what_it_is(given, why, tmp_path, capsys):
    # each said "unknown reference '...'; choose from ..., or give the path of a CSV file"
    from compare.store import Campaign
    from tests.helpers import MACHINE
    c = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    c.save_result(result("caffe2", "fp32", 1, 100.0))
    given = given.format(tmp=tmp_path)
    names = ", ".join(references.available())
    for argv in (["report", str(c.root), "--reference", given], ["check", str(c.root), "--reference", given]):
        code, out, err = main_exit(argv, capsys)
        assert (code, out, err) == (2, "", "compare: error: --reference {}: {}; give the path of a CSV "
                                           "file, or choose from {}\n".format(given, why, names))


def test_an_empty_reference_is_said_empty_not_a_folder(tmp_path, capsys):
    # '' is Path('.'), the current folder: it said "--reference : is a folder, not a CSV file"
    with pytest.raises(UserError) as exc:
        references.resolve("")
    assert str(exc.value) == "--reference is empty; give the path of a CSV file, or choose from {}".format(
        ", ".join(references.available()))


def test_a_bad_user_reference_is_a_warning_of_the_listing_not_its_end(tmp_path, monkeypatch, capsys):
    # the listing stopped at the bad file (exit 2): the references after it were not listed
    from compare.errors import UserError
    monkeypatch.setenv("COMPARE_CACHE", str(tmp_path))
    (tmp_path / "references").mkdir()
    (tmp_path / "references" / "a_bad.csv").write_text("a,b\n1,2\n")
    (tmp_path / "references" / "b_good.csv").write_text("gpu,precision,gpus,images_per_sec\nV100,fp16,1,1000\n")
    with pytest.raises(UserError) as exc:
        references.load("a_bad")
    code, out, err = main_exit(["list", "references"], capsys)
    assert (code, err) == (0, "compare: warning: {}; left out\n".format(exc.value))
    assert [x.split()[0] for x in out.splitlines()[:-1]] == ["a6000_tf_cnn_benchmarks",
                                                          "r740_v100_resnet50_speedup", "b_good"]


@pytest.mark.parametrize("rows,line", [
    ("fp32,1,90,5\n", 2), ("fp32,1,90\nfp32,2,180,5\n", 3), ("fp32,1\n", 2),
], ids=["one-more-first", "one-more-later", "one-fewer"])
def test_a_reference_row_of_another_field_count_than_its_header_is_refused(rows, line, tmp_path):
    # a first row of one field more was read with its first field as the index: every value moved
    # one column left (precision 1, gpus 90, images_per_sec 5), compared without a word
    ref = tmp_path / "mine.csv"
    ref.write_text("precision,gpus,images_per_sec\n" + rows)
    fields = len(rows.splitlines()[-1].split(","))
    with pytest.raises(UserError) as exc:
        references.load(str(ref))
    assert str(exc.value) == ("reference {}: line {} has {} fields, its header 3; give one value per "
                              "column (an empty one: nothing between two commas)".format(ref, line, fields))


def test_a_reference_column_named_twice_is_refused(tmp_path):
    # pandas kept the second as gpus.1, unread: which of the two counts was meant went unsaid
    ref = tmp_path / "mine.csv"
    ref.write_text("precision,gpus,gpus,images_per_sec\nfp32,1,2,90\n")
    with pytest.raises(UserError) as exc:
        references.load(str(ref))
    assert str(exc.value) == "reference {}: its header names gpus twice; give each column once".format(ref)


@pytest.mark.parametrize("precision", ["fp99", ""])
def test_a_reference_precision_that_is_none_is_refused(precision, tmp_path):
    # it was kept and matched no cell, unsaid: a typo read as a reference with nothing to compare
    ref = tmp_path / "mine.csv"
    ref.write_text("precision,gpus,images_per_sec\nfp32,1,90\n{},2,180\n".format(precision))
    with pytest.raises(UserError) as exc:
        references.load(str(ref))
    assert str(exc.value) == "reference {}: precision {!r} on line 3 is not a precision; give fp32, " \
                             "tf32, fp16 or bf16".format(ref, precision)


def test_a_reference_precision_is_read_in_any_case(tmp_path):
    ref = tmp_path / "mine.csv"
    ref.write_text("precision,gpus,images_per_sec\nFP16 ,1,90\n")
    assert list(references.load(str(ref))[1].precision) == ["fp16"]
