"""A command given too few or too many arguments says, in one line, what it needs (the argument or
option and its help) or what it takes, and where to read more; exit 2, no traceback."""
import pytest

from tests.helpers import main_exit


@pytest.mark.parametrize("argv, line", [
    (["report"], "compare report needs CAMPAIGN: a campaign folder made by `compare run` "
                 "(`compare report --help` says more)"),
    (["diff", "a"], "compare diff needs CAMPAIGN_B: campaign B (e.g. the V100 machine): ratios are "
                    "B ÷ A (`compare diff --help` says more)"),
    (["check", "a"], "compare check needs --reference: a name from `compare list references` or a CSV "
                     "path (`compare check --help` says more)"),
    (["data", "make"], "compare data make needs DEST: new or empty folder to write "
                       "DIR/train/<class>/*.JPEG into (`compare data make --help` says more)"),
    (["history"], "compare history needs CAMPAIGN...: campaign folders made by `compare run`, or "
                  "one folder holding them (`compare history --help` says more)"),
])
def test_a_missing_argument_is_named_with_its_help(argv, line, capsys):
    code, out, err = main_exit(argv, capsys)
    assert (code, out, err) == (2, "", "compare: error: {}\n".format(line))


@pytest.mark.parametrize("argv, line", [
    (["doctor", "extra"], "compare doctor takes no argument; got extra (`compare doctor --help` says "
                          "what it does)"),
    (["images", "build", "tf"], "compare images build takes no argument; got tf (`compare images "
                                "build --help` says what it does)"),
    (["report", "a", "b"], "compare report takes CAMPAIGN; got b too (`compare report --help` says "
                           "what it does)"),
    # an empty one said "got  (": nothing where the argument was
    (["doctor", ""], "compare doctor takes no argument; got '' (`compare doctor --help` says what it "
                     "does)"),
])
def test_an_extra_argument_says_what_the_command_takes(argv, line, capsys):
    code, out, err = main_exit(argv, capsys)
    assert (code, out, err) == (2, "", "compare: error: {}\n".format(line))


@pytest.mark.parametrize("argv, line", [
    (["run", "--gpus"], "--gpus needs a value: comma list of GPU counts per node (on CPU: worker "
                        "processes) (`compare run --help` says more)"),
    (["report", "c", "--out"], "--out needs a value: folder for report files (default CAMPAIGN/report) "
                               "(`compare report --help` says more)"),
    (["data", "make", "d", "--images"], "--images needs a value: number of JPEGs (default 10000) "
                                        "(`compare data make --help` says more)"),
    (["run", "--quick=1"], "--quick takes no value: give --quick or --no-quick (`compare run --help` "
                           "says more)"),
])
def test_an_option_without_its_value_or_a_switch_with_one_says_what_it_takes(argv, line, capsys):
    # click's "Option '--gpus' requires an argument." named neither the value nor the command
    code, out, err = main_exit(argv, capsys)
    assert (code, out, err) == (2, "", "compare: error: {}\n".format(line))
