"""Declared options: `--option` keys and values are checked before anything runs, typed, scoped."""
import pytest

from backends.options import Option, OptionError, parse
from compare import frameworks
from compare.errors import UserError
from compare.parsing import options as parse_options
from tests.helpers import main_exit

LOSS_SCALE = "not a finite number; give a number from 1 to 16777216, e.g. loss_scale=1"
CAFFE2_KEYS = ("channels_last, compile_mode, cpu_decoders, cpu_draft, cpu_share, cuda_connections, cuda_graphs, "
               "cudnn_benchmark, cudnn_benchmark_limit, decode, "
               "fail_at, fail_rank, feeder_priority, inductor_tuning, loader_workers, memory_limit_mb, nvimgcodec_api, "
               "optimizer, pipeline, switch_interval_ms")


def test_a_misspelt_key_is_one_line_naming_the_valid_keys(capsys):
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--quick",
                              "--option", "chanels_last=true"], capsys)
    assert code == 2
    assert err == ("compare: error: --option chanels_last=true: unknown key 'chanels_last' for "
                   "caffe2; valid keys: caffe2: {}\n".format(CAFFE2_KEYS))


def test_a_bad_boolean_is_one_line_naming_the_valid_values(capsys):
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--quick",
                              "--option", "channels_last=maybe"], capsys)
    assert (code, err) == (2, "compare: error: --option channels_last=maybe: not a boolean; give "
                              "true or false (also 1/0, yes/no, on/off)\n")


@pytest.mark.parametrize("text,value", [("true", True), ("False", False), ("0", False),
                                        ("yes", True), ("OFF", False), ("on", True)])
def test_booleans_accept_the_usual_spellings(text, value):
    opts = parse_options(["channels_last=" + text], [frameworks.get("caffe2")])
    assert opts == {"caffe2": {"channels_last": value}}


def test_a_plain_key_goes_only_to_the_frameworks_that_declare_it():
    fws = [frameworks.get("tf"), frameworks.get("caffe2")]
    opts = parse_options(["channels_last=false", "xla=1", "fail_at=setup"], fws)
    assert opts == {"tf": {"channels_last": False, "xla": True, "fail_at": "setup"},
                    "caffe2": {"channels_last": False, "fail_at": "setup"}}


def test_a_scoped_key_goes_to_that_framework_only():
    fws = [frameworks.get("tf"), frameworks.get("caffe2")]
    assert parse_options(["caffe2.fail_at=setup"], fws) == {"tf": {}, "caffe2": {"fail_at": "setup"}}
    with pytest.raises(UserError, match=r"--option mxnet.kvstore=local: mxnet is not in this "
                                        r"run's --frameworks \(tf, caffe2\)"):
        parse_options(["mxnet.kvstore=local"], fws)


def test_choices_and_bounds_are_checked():
    caffe2 = [frameworks.get("caffe2")]
    with pytest.raises(UserError, match="^--option optimizer=adam: not a valid value; choose from "
                                        "fused, foreach, loop$"):
        parse_options(["optimizer=adam"], caffe2)
    with pytest.raises(UserError, match="^--option fail_rank=-1: out of range; give an integer from 0 to "
                                        "65535, e.g. fail_rank=0$"):
        parse_options(["fail_rank=-1"], caffe2)
    with pytest.raises(UserError, match="^--option fail_rank=x: not an integer; give an integer from 0 to "
                                        "65535, e.g. fail_rank=0$"):
        parse_options(["fail_rank=x"], caffe2)


def test_the_backend_checks_a_hand_written_spec_too():
    declared = (Option("n", "int", "a count", minimum=1),)
    assert parse(declared, {"n": "3"}, "toy") == {"n": 3}
    with pytest.raises(OptionError, match="^n=0: out of range; give an integer >= 1, e.g. n=1$"):
        parse(declared, {"n": 0}, "toy")
    with pytest.raises(OptionError, match="^m: unknown option for toy; valid: n$"):
        parse(declared, {"m": 1}, "toy")


def test_list_options_prints_each_key_with_its_default(capsys):
    code, out, _ = main_exit(["list", "options", "caffe2"], capsys)
    assert code == 0
    assert "  channels_last=bool (default: true on cuda, false on cpu): NHWC memory format" in out
    assert "  cuda_graphs=bool (default: false):" in out
    lines = out.splitlines()
    end = lines.index("  --mode tuned sets:")  # the options, then what each mode switches
    assert sorted(line.split("=")[0].strip() for line in lines[1:end]) == CAFFE2_KEYS.split(", ")
    assert lines[end + 1].startswith("    compile=true (everywhere): torch.compile")
    assert "    cuda_graphs=true (on cuda, one GPU): the whole step" in lines[end + 3]


def _declared():
    from backends.harness import COMMON_OPTIONS
    return [(fw.name, o) for fw in frameworks.FRAMEWORKS for o in fw.options()] + \
        [("harness", o) for o in COMMON_OPTIONS]


def test_every_declared_number_has_a_range():
    # a count, a size or a level without a maximum can size memory or time without bound
    unbounded = ["{}.{}".format(fw, o.key) for fw, o in _declared()
                 if o.kind in ("int", "float") and (o.minimum is None or o.maximum is None)]
    assert unbounded == []


@pytest.mark.parametrize("framework,item,message", [
    ("jax", "jax.autotune_level=99", "--option jax.autotune_level=99: out of range; give an integer from 0 "
                                     "to 4, e.g. autotune_level=0"),
    ("caffe2", "caffe2.loader_workers=99999999999", "--option caffe2.loader_workers=99999999999: out of "
                                                    "range; give an integer from 1 to 256, e.g. loader_workers=1"),
    ("jax", "jax.loss_scale=nan", "--option jax.loss_scale=nan: " + LOSS_SCALE),
    ("jax", "jax.loss_scale=inf", "--option jax.loss_scale=inf: " + LOSS_SCALE),
    ("jax", "jax.loss_scale=1e400", "--option jax.loss_scale=1e400: " + LOSS_SCALE),
    ("jax", "jax.loss_scale=-inf", "--option jax.loss_scale=-inf: " + LOSS_SCALE),
    # it said "not an integer" and no more: what to give was left to guess
    ("caffe2", "memory_limit_mb=", "--option memory_limit_mb=: not an integer; give an integer from 64 to "
                                   "4194304, e.g. memory_limit_mb=64"),
    ("caffe2", "switch_interval_ms=fast", "--option switch_interval_ms=fast: not a number; give a number "
                                          "from 0.05 to 100, e.g. switch_interval_ms=0.5"),
    ("caffe2", "cpu_share=2", "--option cpu_share=2: out of range; give a number from 0 to 1, e.g. "
                              "cpu_share=0"),
], ids=["autotune_level", "loader_workers", "nan", "inf", "1e400", "-inf", "int-empty", "float-text",
        "float-range"])
def test_numbers_are_finite_and_within_the_declared_range(framework, item, message):
    with pytest.raises(UserError) as exc:
        parse_options([item], [frameworks.get(framework)])
    assert str(exc.value) == message


def test_a_nan_option_is_refused_before_anything_runs(tmp_path, capsys):
    code, _, err = main_exit(["run", "--frameworks", "jax", "--device", "cpu", "--executor", "local",
                              "--results", str(tmp_path / "c"), "--option", "jax.loss_scale=nan"], capsys)
    assert (code, err) == (2, "compare: error: --option jax.loss_scale=nan: {}\n".format(LOSS_SCALE))
    assert not (tmp_path / "c").exists()


def test_free_text_is_one_bounded_line():
    jax = [frameworks.get("jax")]
    assert parse_options(["xla_flags=--xla_dump_to=/tmp/x"], jax) == {"jax": {"xla_flags": "--xla_dump_to=/tmp/x"}}
    with pytest.raises(UserError, match=r"^--option xla_flags=a\\nb: give one line of at most 1000 "
                                        r"printable characters$"):
        parse_options(["xla_flags=a\nb"], jax)
    with pytest.raises(UserError, match=r"^--option xla_flags=xxxxxxxxx.*\.\.\.: give one line"):
        parse_options(["xla_flags=" + "x" * 1001], jax)


def test_list_options_shows_the_range():
    assert [o.describe() for _, o in _declared() if o.key == "autotune_level"] == [
        "autotune_level=int 0..4 (default: XLA's own (4)): XLA's GPU autotuning level, 0 (off) to 4"]
