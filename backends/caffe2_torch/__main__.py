"""Entry point: python -m backends.caffe2_torch SPEC_JSON RESULT_JSON"""
import sys

from .. import phases
from ..harness import main
from . import OPTIONS


def _setup(spec):
    from .train import setup  # the framework is imported only here, inside its environment
    phases.mark("framework_imported")
    return setup(spec)


if __name__ == "__main__":
    sys.exit(main(_setup, declared=OPTIONS))
