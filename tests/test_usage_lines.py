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
])
def test_an_extra_argument_says_what_the_command_takes(argv, line, capsys):
    code, out, err = main_exit(argv, capsys)
    assert (code, out, err) == (2, "", "compare: error: {}\n".format(line))
