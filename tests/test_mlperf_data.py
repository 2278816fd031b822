"""Learnable data for time to accuracy: `compare data make DIR --learnable` writes DIR/train and
DIR/val, deterministic, its classes a combination of their own; `compare data prepare` checks
both parts; a val/ naming a class train/ lacks is one line, exit 2."""
import shutil

from PIL import Image

from compare import learnable
from compare.datasets import VAL_LAYOUT
from tests.helpers import main_exit


def _make(path, capsys, *extra):
    code, out, err = main_exit(["data", "make", str(path), "--learnable", "small", "--workers",
                                "1"] + list(extra), capsys)
    assert code == 0, err
    return out


def _flatten_val(root):
    """val/ as ImageNet ships it: every JPEG in val/ itself, no class folders."""
    for jpeg in (root / "val").rglob("*.JPEG"):
        shutil.move(str(jpeg), str(root / "val" / (jpeg.parent.name + jpeg.name)))
    for sub in (root / "val").iterdir():
        if sub.is_dir():
            sub.rmdir()


def test_learnable_writes_train_and_val_in_the_imagenet_layout(tmp_path, capsys):
    out = _make(tmp_path / "a", capsys, "--classes", "3", "--images", "12")
    assert out.startswith("{}: 12 training and 3 validation JPEGs in 3 classes".format(tmp_path / "a"))
    train = sorted(p.relative_to(tmp_path / "a").as_posix() for p in (tmp_path / "a").rglob("*.JPEG"))
    assert len(train) == 15 and train[0] == "train/n00000000/00000000.JPEG"
    assert sorted({p.split("/")[0] for p in train}) == ["train", "val"]
    assert len({p.split("/")[1] for p in train if p.startswith("val/")}) == 3
    with Image.open(tmp_path / "a" / train[0]) as im:
        assert (im.format, im.size) == ("JPEG", (learnable.SIDE, learnable.SIDE))
    _make(tmp_path / "b", capsys, "--classes", "3", "--images", "12")
    assert (tmp_path / "a" / train[-1]).read_bytes() == (tmp_path / "b" / train[-1]).read_bytes()


def test_every_class_of_the_first_200_is_its_own_combination():
    assert len({learnable.attributes(k) for k in range(200)}) == 200
    assert learnable.PRESETS["small"] == (10, 48, 20) and learnable.PRESETS["large"][0] == 100


def test_an_unknown_preset_is_one_line(tmp_path, capsys):
    code, _, err = main_exit(["data", "make", str(tmp_path / "x"), "--learnable", "huge"], capsys)
    assert (code, err.strip()) == (2, "compare: error: --learnable 'huge': choose from small, large")


def test_prepare_checks_the_held_out_part_and_its_classes(tmp_path, capsys):
    _make(tmp_path / "a", capsys, "--classes", "2", "--images", "8")
    code, out, err = main_exit(["data", "prepare", str(tmp_path / "a"), "--frameworks", "caffe2"],
                               capsys)
    assert code == 0, err
    assert "held out: {}: 2 JPEGs in 2 classes".format(tmp_path / "a" / "val") in out
    assert (tmp_path / "a" / "val" / ".compare" / "manifest.json").is_file()
    shutil.move(str(tmp_path / "a" / "val" / "n00000001"), str(tmp_path / "a" / "val" / "n99"))
    code, _, err = main_exit(["data", "prepare", str(tmp_path / "a"), "--frameworks", "caffe2"],
                             capsys)
    assert code == 2 and err.strip().endswith("class folders n99 are not in {}; val/ must name "
                                              "train/'s classes".format(tmp_path / "a" / "train"))


def test_an_image_size_with_learnable_is_refused(tmp_path, capsys):
    code, _, err = main_exit(["data", "make", str(tmp_path / "x"), "--learnable", "small",
                              "--image-size", "64x64"], capsys)
    assert (code, err.strip()) == (2, "compare: error: --image-size '64x64': --learnable images "
                                      "are 80x80 (the crops of training are image_size of the "
                                      "run); leave it out")


def test_a_learnable_folder_of_one_class_is_said_in_the_singular(tmp_path, capsys):
    out = _make(tmp_path / "a", capsys, "--classes", "1", "--images", "2")
    assert out.startswith("{}: 2 training and 1 validation JPEGs in 1 class, ".format(tmp_path / "a"))


def test_info_shows_the_held_out_part_as_prepare_does(tmp_path, capsys):
    # a time-to-accuracy folder is train/ and val/: info said only what train/ holds
    _make(tmp_path / "a", capsys, "--classes", "2", "--images", "8")
    code, out, err = main_exit(["data", "info", str(tmp_path / "a")], capsys)
    assert code == 0, err
    assert out.splitlines() == [
        "{}: 8 files in 2 classes; not checked yet (compare data prepare {})".format(
            tmp_path / "a", tmp_path / "a"),
        "held out: {}: 2 files in 2 classes; not checked yet (compare data prepare {})".format(
            tmp_path / "a" / "val", tmp_path / "a")]
    assert main_exit(["data", "prepare", str(tmp_path / "a"), "--frameworks", "caffe2"],
                     capsys)[0] == 0
    code, out, err = main_exit(["data", "info", str(tmp_path / "a")], capsys)
    assert code == 0, err
    assert out.splitlines()[1].startswith("held out: {}: 2 JPEGs in 2 classes, ".format(
        tmp_path / "a" / "val"))
    assert out.splitlines()[2:] == ["tf       tfrecord not written", "mxnet    recordio not written",
                                    "caffe2   the folder itself", "jax      the folder itself"]


def test_info_of_a_folder_whose_val_is_empty_says_so_and_goes_on(tmp_path, capsys):
    _make(tmp_path / "a", capsys, "--classes", "2", "--images", "8")
    shutil.rmtree(str(tmp_path / "a" / "val"))
    (tmp_path / "a" / "val").mkdir()
    code, out, err = main_exit(["data", "info", str(tmp_path / "a")], capsys)
    assert (code, err) == (0, "")
    assert out.splitlines()[1] == "held out: {}: the folder is empty; {}".format(
        tmp_path / "a" / "val", VAL_LAYOUT)


def test_images_that_do_not_divide_into_the_classes_are_said_to_be_rounded(tmp_path, capsys):
    # --images 25 of 10 classes made 20 training images, --images 5 made 10, without a word
    code, out, err = main_exit(["data", "make", str(tmp_path / "a"), "--learnable", "small",
                                "--images", "25", "--workers", "1"], capsys)
    assert code == 0, err
    assert "note: --images 25: 2 training images per class of 10, 20 in all" in err.splitlines()
    assert out.startswith("{}: 20 training and 10 validation JPEGs".format(tmp_path / "a"))
    code, out, err = main_exit(["data", "make", str(tmp_path / "b"), "--learnable", "small",
                                "--images", "5", "--workers", "1"], capsys)
    assert "note: --images 5: 1 training image per class of 10, 10 in all" in err.splitlines()
    code, out, err = main_exit(["data", "make", str(tmp_path / "c"), "--learnable", "small",
                                "--images", "20", "--workers", "1"], capsys)
    assert "note:" not in err


def test_a_flat_val_folder_is_told_val_layout_not_train_layout(tmp_path, capsys):
    # ImageNet's val/ comes flat; the hint was train/'s: "give an ImageNet-layout folder
    # (DIR/train/<class>/*.JPEG) or make one with: compare data make DIR"
    _make(tmp_path / "a", capsys, "--classes", "2", "--images", "8")
    _flatten_val(tmp_path / "a")
    code, out, err = main_exit(["data", "prepare", str(tmp_path / "a"), "--frameworks", "caffe2"],
                               capsys)
    # the folder named as the command names it (it said "--data", a flag prepare has not), and
    # train/ prepared all the same: a throughput run reads it alone (ImageNet's val/ comes flat)
    assert "caffe2   folder     ready in {}".format((tmp_path / "a").resolve()) in out, out
    assert (code, err.strip().splitlines()[-1]) == (2, (
        "compare: error: compare data prepare {v}: no class subfolders with JPEG files in {v}; time to accuracy "
        "evaluates on DIR/val/<class>/*.JPEG, one folder per class of DIR/train (ImageNet's flat "
        "val/ sorted into class folders first), as `compare data make DIR --learnable small` "
        "writes it").format(v=tmp_path / "a" / "val"))


def test_fewer_training_images_than_a_global_batch_is_refused_before_a_cell_runs(tmp_path, capsys):
    # it was a warning ("every step repeats images") and a sweep of cells that each failed
    from tests.helpers import fake_python
    _make(tmp_path / "a", capsys, "--classes", "2", "--images", "8")
    args = ["run", "--frameworks", "caffe2", "--data", str(tmp_path / "a"), "--target-accuracy",
            "0.9", "--device", "cpu", "--executor", "local", "--gpus", "2", "--image-size", "32",
            "--results", str(tmp_path / "c"), "--python", "caffe2={}".format(fake_python(tmp_path))]
    for extra in (["--plan"], []):  # --plan refuses what the run would, and no campaign is made
        code, out, err = main_exit(args + ["--batch-size", "8"] + extra, capsys)
        assert code == 2 and not (tmp_path / "c").exists()
        assert err.splitlines()[-1] == (
            "compare: error: --data {0}: {0}/train holds 8 training images, fewer than the global "
            "batch of 16 (8 x 2 workers): time to accuracy's epochs would be no step; give a "
            "--batch-size of at most 4, or a folder with more images".format(
                (tmp_path / "a").resolve()))
    # a JPEG that does not decode: the plan counted 8 files, prepare counts 7 usable images
    next((tmp_path / "a" / "train").rglob("*.JPEG")).write_bytes(b"not a JPEG")
    code, out, err = main_exit(args + ["--batch-size", "4"], capsys)
    assert code == 2 and err.splitlines()[-1] == (
        "compare: error: --data {0}: {0}/train holds 7 training images, fewer than the global "
        "batch of 8 (4 x 2 workers): time to accuracy's epochs would be no step; give a "
        "--batch-size of at most 3, or a folder with more images".format((tmp_path / "a").resolve()))


def test_fewer_training_images_than_a_batch_from_a_campaign_file_names_its_keys(tmp_path, capsys):
    # the rule named the campaign file's data by file and key, then advised "give a --batch-size
    # of at most 4" for the file's batch_size; and where prepare counted fewer usable images than
    # the plan's files, it said "--data DIR" of the file's data
    from tests.helpers import fake_python
    _make(tmp_path / "a", capsys, "--classes", "2", "--images", "8")
    study = tmp_path / "study.toml"
    study.write_text('frameworks = "caffe2"\ndata = "a"\ntarget_accuracy = 0.9\ndevice = "cpu"\n'
                     'executor = "local"\ngpus = [2]\nimage_size = 32\nbatch_size = [8]\n'
                     'results = "c"\npython = ["caffe2={}"]\n'.format(fake_python(tmp_path)))
    for extra in (["--plan"], []):
        code, out, err = main_exit(["run", "--config", str(study)] + extra, capsys)
        assert code == 2 and not (tmp_path / "c").exists()
        assert err.splitlines()[-1] == (
            "compare: error: {1}: data {0}: {0}/train holds 8 training images, fewer than the "
            "global batch of 16 (8 x 2 workers): time to accuracy's epochs would be no step; give "
            "a batch_size of at most 4, or a folder with more images".format(
                (tmp_path / "a").resolve(), study))
    next((tmp_path / "a" / "train").rglob("*.JPEG")).write_bytes(b"not a JPEG")
    study.write_text(study.read_text().replace("batch_size = [8]", "batch_size = [4]"))
    code, out, err = main_exit(["run", "--config", str(study)], capsys)
    assert code == 2 and err.splitlines()[-1] == (
        "compare: error: {1}: data {0}: {0}/train holds 7 training images, fewer than the global "
        "batch of 8 (4 x 2 workers): time to accuracy's epochs would be no step; give a "
        "batch_size of at most 3, or a folder with more images".format((tmp_path / "a").resolve(),
                                                                       study))


def test_a_folder_of_one_class_is_refused_before_a_cell_runs(tmp_path, capsys):
    # it ran, and every run "reached" its target at the first evaluation: top-1 over one class is
    # 1.0 whatever the network learns (and the log fails mlperf-logging's checker)
    from tests.helpers import fake_python
    _make(tmp_path / "a", capsys, "--classes", "1", "--images", "8")
    code, out, err = main_exit([
        "run", "--frameworks", "caffe2", "--data", str(tmp_path / "a"), "--target-accuracy", "0.9",
        "--device", "cpu", "--executor", "local", "--image-size", "32", "--batch-size", "4",
        "--results", str(tmp_path / "c"), "--python", "caffe2={}".format(fake_python(tmp_path))],
        capsys)
    assert code == 2 and not list((tmp_path / "c").glob("results/*.json"))
    assert err.splitlines()[-1] == (
        "compare: error: --data {0}: {0}/train holds 1 class: top-1 over one class is 1.0 at the "
        "first evaluation, whatever the network learns; time to accuracy needs 2 classes or more "
        "(`compare data make DIR --learnable small` makes 10)".format((tmp_path / "a").resolve()))


def test_more_learnable_classes_than_combinations_is_refused(tmp_path, capsys):
    # --classes 300 made 300 folders of which 200..299 drew from the same distributions as
    # 0..99: pairs a network cannot tell apart, so top-1 could not pass about 0.67
    assert len({learnable.attributes(k) for k in range(learnable.MAX_CLASSES + 1)}) == \
        learnable.MAX_CLASSES == 200
    code, _, err = main_exit(["data", "make", str(tmp_path / "x"), "--learnable", "small",
                              "--classes", "201"], capsys)
    assert (code, err.strip()) == (2, "compare: error: --classes 201: --learnable draws at most "
                                      "200 classes a network can tell apart (10 hues x 5 shapes x "
                                      "4 textures); give --classes 200 or fewer")
    assert not list(tmp_path.glob("x/*/*"))
    _make(tmp_path / "y", capsys, "--classes", "200", "--images", "200")


def test_the_plan_refuses_a_folder_the_run_would_refuse_in_the_runs_own_words(tmp_path, capsys):
    # one class, an empty val/, a val/ class train/ lacks: --plan printed a schedule, and the run
    # refused them at prepare, leaving a campaign folder behind
    from tests.helpers import fake_python
    _make(tmp_path / "a", capsys, "--classes", "2", "--images", "8")
    root = (tmp_path / "a").resolve()
    args = ["run", "--frameworks", "caffe2", "--data", str(tmp_path / "a"), "--target-accuracy",
            "0.9", "--device", "cpu", "--executor", "local", "--image-size", "32", "--batch-size",
            "4", "--results", str(tmp_path / "c"), "--python",
            "caffe2={}".format(fake_python(tmp_path))]

    def refused(line):
        for extra in (["--plan"], []):
            code, out, err = main_exit(args + extra, capsys)
            assert code == 2 and not (tmp_path / "c").exists(), (extra, err)
            assert err.splitlines()[-1] == "compare: error: " + line, extra
    shutil.move(str(root / "val" / "n00000001"), str(root / "val" / "n99"))
    refused("{0}/val: class folders n99 are not in {0}/train; val/ must name train/'s "
            "classes".format(root))
    shutil.rmtree(str(root / "val" / "n99"))
    shutil.rmtree(str(root / "val" / "n00000000"))
    refused("--data {0}/val: the folder is empty; {1}".format(root, VAL_LAYOUT))
    shutil.rmtree(str(root))
    _make(tmp_path / "a", capsys, "--classes", "1", "--images", "8")
    refused("--data {0}: {0}/train holds 1 class: top-1 over one class is 1.0 at the first "
            "evaluation, whatever the network learns; time to accuracy needs 2 classes or more "
            "(`compare data make DIR --learnable small` makes 10)".format(root))


def test_evaluating_less_often_than_the_epochs_allow_is_refused(tmp_path, capsys):
    # --eval-every 5 --max-epochs 2 ran without a word and evaluated once, after epoch 2
    from tests.helpers import fake_python
    _make(tmp_path / "a", capsys, "--classes", "2", "--images", "8")
    args = ["run", "--frameworks", "caffe2", "--data", str(tmp_path / "a"), "--target-accuracy",
            "0.9", "--device", "cpu", "--executor", "local", "--image-size", "32", "--batch-size",
            "4", "--results", str(tmp_path / "c"), "--python",
            "caffe2={}".format(fake_python(tmp_path)), "--max-epochs", "2"]
    for extra in (["--plan"], []):
        code, out, err = main_exit(args + ["--eval-every", "5"] + extra, capsys)
        assert code == 2 and not (tmp_path / "c").exists()
        assert err.splitlines()[-1] == (
            "compare: error: --eval-every 5: more than --max-epochs 2, so it would evaluate once, "
            "after the last epoch; give --eval-every from 1 to 2")
    code, out, err = main_exit(args + ["--eval-every", "2", "--plan"], capsys)
    assert code == 0, err


def test_the_plan_says_what_a_time_to_accuracy_run_will_do(tmp_path, capsys):
    # the plan of a run to a target listed cells and seconds alone: not the target, the epochs,
    # how often it evaluates, nor what the folder holds
    from tests.helpers import fake_python
    _make(tmp_path / "a", capsys, "--classes", "2", "--images", "8")
    code, out, err = main_exit([
        "run", "--frameworks", "caffe2", "--data", str(tmp_path / "a"), "--target-accuracy", "0.9",
        "--max-epochs", "6", "--eval-every", "2", "--device", "cpu", "--executor", "local",
        "--image-size", "32", "--batch-size", "4", "--results", str(tmp_path / "c"), "--python",
        "caffe2={}".format(fake_python(tmp_path)), "--plan"], capsys)
    assert code == 0, err
    assert out.splitlines()[1] == (
        "time to accuracy: top-1 0.9 on val/ within 6 epochs, evaluated every 2 epochs; {}: train/ "
        "8 images in 2 classes, val/ 2 images in 2 classes".format((tmp_path / "a").resolve()))


def test_a_val_folder_with_no_jpeg_among_the_files_checked_is_refused_by_the_plan_as_by_the_run(
        tmp_path, capsys):
    # --plan printed a schedule; the run refused it at prepare, having checked train/ whole
    from tests.helpers import fake_python
    _make(tmp_path / "a", capsys, "--classes", "2", "--images", "8")
    root = (tmp_path / "a").resolve()
    for path in (root / "val").rglob("*.JPEG"):
        path.write_bytes(b"not a JPEG")
    firsts = [sorted(p.relative_to(root / "val").as_posix() for p in (root / "val" / c).iterdir())[0]
              for c in ("n00000000", "n00000001")]
    args = ["run", "--frameworks", "caffe2", "--data", str(tmp_path / "a"), "--target-accuracy",
            "0.9", "--device", "cpu", "--executor", "local", "--image-size", "32", "--batch-size",
            "4", "--results", str(tmp_path / "c"), "--python", "caffe2={}".format(fake_python(tmp_path))]
    for extra in (["--plan"], []):
        code, out, err = main_exit(args + extra, capsys)
        assert code == 2 and not (tmp_path / "c").exists(), (extra, err)
        line = err.splitlines()[-1]
        assert line.startswith(
            "compare: error: --data {0}/val: none of the ".format(root)) and line.endswith("; " + VAL_LAYOUT)
        assert " files checked (up to 4 in each of 2 classes) is a JPEG, which starts with ff d8 ff: {} " \
            "starts with 6e 6f 74; {} starts with 6e 6f 74; ".format(*firsts) in line, line


def test_a_val_folder_of_truncated_jpegs_gives_vals_layout_not_trains(tmp_path, capsys):
    # files that start like JPEGs pass the plan's sample; prepare's full check found none usable
    # and its hint described DIR/train/<class>/*.JPEG, where val/ was the folder at fault
    _make(tmp_path / "a", capsys, "--classes", "2", "--images", "8")
    root = (tmp_path / "a").resolve()
    for path in (root / "val").rglob("*.JPEG"):
        path.write_bytes(path.read_bytes()[:40])
    code, out, err = main_exit(["data", "prepare", str(tmp_path / "a")], capsys)
    line = err.splitlines()[-1]
    assert code == 2 and line.startswith("compare: error: {}/val: none of its 2 JPEG files can "
                                         "be used (".format(root)), err
    assert line.endswith("; " + VAL_LAYOUT), line


def test_a_throughput_run_on_a_folder_whose_val_is_imagenets_flat_one_runs(tmp_path, capsys):
    # ImageNet as extracted: train/<class>/ and a flat val/. A throughput run (no target) reads
    # train/ alone, and its --plan passed; the run then refused the folder at prepare with time
    # to accuracy's val/ layout, leaving a campaign folder without campaign.json behind
    from tests.helpers import fake_python
    _make(tmp_path / "a", capsys, "--classes", "2", "--images", "8")
    _flatten_val(tmp_path / "a")
    args = ["run", "--frameworks", "caffe2", "--data", str(tmp_path / "a"), "--device", "cpu",
            "--executor", "local", "--image-size", "32", "--batch-size", "4", "--steps", "2",
            "--warmup", "1", "--results", str(tmp_path / "c"), "--python",
            "caffe2={}".format(fake_python(tmp_path))]
    code, out, err = main_exit(args, capsys)
    assert code == 0, err
    assert "time to accuracy evaluates on DIR/val" not in err
    assert (tmp_path / "c" / "results" / "caffe2-fp32-w1-b4-s32-real-r0.json").is_file()
    # with a target the same folder is refused, as before, and by --plan first
    code, out, err = main_exit(args[:-2] + ["--results", str(tmp_path / "d"), "--target-accuracy",
                                            "0.9", "--python", args[-1]], capsys)
    assert code == 2 and "time to accuracy evaluates on DIR/val" in err.splitlines()[-1]
