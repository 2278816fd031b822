"""Entry point: python -m backends.mxnet SPEC_JSON RESULT_JSON"""
import os
import sys

from .. import phases
from ..harness import main
from . import OPTIONS


def _setup(spec):
    if spec.precision == "fp32":
        # true FP32: cuDNN 8 and cuBLAS read this when mxnet loads them (the executor sets it too)
        os.environ["NVIDIA_TF32_OVERRIDE"] = "0"
    from .train import setup  # the framework is imported only here, inside its environment
    phases.mark("framework_imported")
    return setup(spec)


if __name__ == "__main__":
    sys.exit(main(_setup, declared=OPTIONS))
