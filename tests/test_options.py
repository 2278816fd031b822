"""Declared options: `--option` keys and values are checked before anything runs, typed, scoped."""
import pytest

from backends.options import Option, OptionError, parse
from compare import frameworks
from compare.errors import UserError
from compare.runner import parse_options
from tests.helpers import main_exit

CAFFE2_KEYS = ("channels_last, compile_mode, cuda_graphs, cudnn_benchmark, cudnn_benchmark_limit, decode, "
               "fail_at, fail_rank, loader_workers, optimizer")


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
    with pytest.raises(UserError, match="^--option fail_rank=-1: must be >= 0$"):
        parse_options(["fail_rank=-1"], caffe2)
    with pytest.raises(UserError, match="^--option fail_rank=x: not an integer$"):
        parse_options(["fail_rank=x"], caffe2)


def test_the_backend_checks_a_hand_written_spec_too():
    declared = (Option("n", "int", "a count", minimum=1),)
    assert parse(declared, {"n": "3"}, "toy") == {"n": 3}
    with pytest.raises(OptionError, match="^m: unknown option for toy; valid: n$"):
        parse(declared, {"m": 1}, "toy")


def test_list_options_prints_each_key_with_its_default(capsys):
    code, out, _ = main_exit(["list", "options", "caffe2"], capsys)
    assert code == 0
    assert "  channels_last=bool (default: true on cuda, false on cpu): NHWC memory format" in out
    assert "  cuda_graphs=bool (default: false):" in out
    assert sorted(line.split("=")[0].strip() for line in out.splitlines()[1:]) == \
        CAFFE2_KEYS.split(", ")
