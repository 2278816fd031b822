"""torchrun: one process per worker on one host, joined through torchrun's rendezvous (DDP);
started under watch.py, which gives its workers COMPARE_EXIT_GRACE_S once one has exited (torchrun
itself waits for every worker)."""
from typing import List

from ..protocol import RunSpec
from .launcher import Launcher


class Torchrun(Launcher):
    """torchrun --standalone: one process per worker on one host (under srun: one task each)"""

    def command(self, python: str, spec: RunSpec, rank: List[str]) -> List[str]:
        # rank is `python -m MODULE SPEC RESULT`: torchrun runs that module once per worker
        return [python, "-m", "backends.launchers.watch", python, "-m", "torch.distributed.run",
                "--standalone", "--nproc_per_node", str(spec.gpus)] + list(rank[1:])

    def tasks_per_node(self, spec: RunSpec) -> int:
        return spec.gpus  # srun stands in for torchrun: each task is a rank (backends/world.py)

    def task_command(self, python: str, spec: RunSpec, rank: List[str]) -> List[str]:
        return list(rank)
