"""Sub-apps of the `compare` command line, each joined in compare/cli.py with one add_typer line."""
import sys

from ..loading import one_line


def err(msg: str) -> None:
    sys.stderr.write("compare: {}\n".format(one_line(msg)))
