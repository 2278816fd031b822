"""Entry point: python -m backends.jax SPEC_JSON RESULT_JSON

Started once by the host, or once per task by a launcher such as srun (launch.membership() reads
the variables). With processes=N and no launcher, it starts the N local processes (launch.py).
"""
import os
import sys

from .. import phases
from ..harness import main
from . import OPTIONS


def _setup(spec):
    from . import launch
    member = launch.membership()
    added = launch.prepare(spec, member)  # XLA_FLAGS and JAX_PLATFORMS before jax is imported
    from .train import setup  # the framework is imported only here, inside its environment
    phases.mark("framework_imported")
    return setup(spec, member, added)


def _entry(argv):
    from . import launch
    member = launch.membership()
    if member.processes > 1:
        os.environ.setdefault("RANK", str(member.process_id))  # harness.env_rank(), before setup
    elif len(argv) == 2:
        code = launch.launch(argv[0], argv[1])
        if code is not None:
            return code
    return main(_setup, argv, declared=OPTIONS)


if __name__ == "__main__":
    sys.exit(_entry(sys.argv[1:]))
