"""Entry point: python -m backends.tf_horovod SPEC_JSON RESULT_JSON

Started once by the host. For N > 1 workers it re-launches itself under horovodrun (one process
per worker, each with HOROVOD_RANK set) or runs one process with MirroredStrategy: launch.py.
"""
import os
import sys

from .. import phases
from ..harness import main
from . import OPTIONS


def _setup(spec):
    from .train import setup  # the framework is imported only here, inside its environment
    phases.mark("framework_imported")
    return setup(spec)


def _entry(argv):
    if len(argv) == 2 and "HOROVOD_RANK" not in os.environ:
        from .launch import launch
        code = launch(argv[0], argv[1])
        if code is not None:
            return code
    return main(_setup, argv, declared=OPTIONS)


if __name__ == "__main__":
    sys.exit(_entry(sys.argv[1:]))
