"""srun: one task per worker on every node of a Slurm job, each task a rank.

The Slurm executor starts the tasks of every job with srun (its job script); the framework's
launcher says how many tasks each node runs and what each runs (`tasks_per_node`,
`task_command`). A backend names this launcher itself where its workers can only be srun's
tasks: TensorFlow across nodes (MultiWorkerMirroredStrategy), since horovodrun would need ssh.
"""
from typing import List

from ..protocol import RunSpec, Unsupported
from .launcher import Launcher


class Srun(Launcher):
    """srun: one task per worker on every node of a Slurm job (--executor slurm)"""

    def command(self, python: str, spec: RunSpec, rank: List[str]) -> List[str]:
        raise Unsupported("{} nodes: srun starts the workers inside a Slurm job; run them with "
                          "--executor slurm".format(spec.nodes))

    def tasks_per_node(self, spec: RunSpec) -> int:
        return spec.gpus  # each task is a rank (backends/world.py reads Slurm's variables)

    def task_command(self, python: str, spec: RunSpec, rank: List[str]) -> List[str]:
        return list(rank)
