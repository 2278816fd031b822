"""Who am I in a job of several processes: rank, local rank, how many processes in all and on
this node, which node, where the rendezvous is, and which launcher started us.

Standard library only, Python >= 3.8; read before any framework is imported. One table per kind
of environment (as submitit keeps one per scheduler); the first kind in KINDS whose marker
variable is set is the one this process runs under:

    compare   compare's own multi-process launcher (backends/launchers/processes.py)
    horovod   horovodrun (gloo)
    torchrun  torchrun, or anything that sets its variables
    openmpi   Open MPI's mpirun
    pmi       a PMI launcher (MPICH's or Intel MPI's mpiexec)
    slurm     srun with more than one task (compare's Slurm job script also sets the rendezvous)
    single    none of these: one process on its own

The numbers count processes. One process may drive several devices (JAX, MXNet, TensorFlow's
MirroredStrategy); RunSpec.world_size counts the workers (devices) instead.

    python3 -m backends.world    prints what this process would be, as JSON
"""
import json
import os
from dataclasses import asdict, dataclass
from typing import Mapping, Optional, Tuple


@dataclass(frozen=True)
class Kind:
    """Where one kind of launcher keeps each number (None: it does not say)."""

    name: str
    launcher: str  # the program that starts processes of this kind
    rank: str  # its presence marks the kind
    processes: str
    local_rank: Optional[str] = None
    local_processes: Optional[str] = None
    node_rank: Optional[str] = None
    nodes: Optional[str] = None
    address: Optional[str] = None  # host of the rendezvous
    port: Optional[str] = None
    coordinator: Optional[str] = None  # host:port of the rendezvous, in one variable
    several: bool = False  # the kind counts only with more than one process (every srun task
    # has a SLURM_PROCID, also the one task of a job that starts its own workers)
    marker: Optional[str] = None  # the variable that marks the kind, where not `rank`
    # compare's executor whose runs it may be (COMPARE_EXECUTOR): a local run inside a Slurm
    # allocation inherits the allocation's SLURM_* variables, yet is no task of it
    executor: Optional[str] = None


KINDS = (
    Kind("compare", "compare", "COMPARE_PROCESS_ID", "COMPARE_NUM_PROCESSES", "COMPARE_LOCAL_RANK",
         "COMPARE_NUM_PROCESSES", coordinator="COMPARE_COORDINATOR", marker="COMPARE_NUM_PROCESSES"),
    Kind("horovod", "horovodrun", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK",
         "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE"),
    Kind("torchrun", "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
         "GROUP_RANK", address="MASTER_ADDR", port="MASTER_PORT"),
    Kind("openmpi", "mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
         "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    Kind("pmi", "mpiexec", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    Kind("slurm", "srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
         "SLURM_NODEID", "SLURM_JOB_NUM_NODES", "COMPARE_COORDINATOR_ADDR",
         "COMPARE_COORDINATOR_PORT", "COMPARE_COORDINATOR", several=True, executor="slurm"),
)
# which launcher started a single process (the Slurm executor's jobs say srun): for messages
LAUNCHER_ENV = "COMPARE_LAUNCHER"
NODE_ADDRS_ENV = "COMPARE_NODE_ADDRS"  # every node's address, in node order (compare's Slurm job)
# compare's multi-process launcher: its children find each other through these
PROCESS_ENV = ("COMPARE_PROCESS_ID", "COMPARE_NUM_PROCESSES", "COMPARE_LOCAL_RANK",
               "COMPARE_COORDINATOR")


@dataclass(frozen=True)
class World:
    """This process in a job of `processes` processes (1: a job of its own)."""

    rank: int = 0
    processes: int = 1
    local_rank: int = 0  # index among the processes of this node
    local_processes: int = 1
    node_rank: int = 0
    address: Optional[str] = None  # rendezvous host (process 0's node), where the launcher says
    port: Optional[int] = None
    kind: str = "single"  # a Kind's name, or "single"
    launcher: str = "single"  # what started the processes: torchrun, srun, horovodrun, ...
    node_addresses: Tuple[str, ...] = ()  # every node's address, in node order, where known

    @property
    def coordinator(self) -> Optional[str]:
        """host:port of the rendezvous, or None where the launcher did not say."""
        return "{}:{}".format(self.address, self.port) if self.address and self.port else None


def _int(env: Mapping[str, str], name: Optional[str]) -> Optional[int]:
    value = env.get(name) if name else None
    return int(value) if value not in (None, "") else None


def _read(kind: Kind, env: Mapping[str, str]) -> World:
    rank = _int(env, kind.rank) or 0
    processes = _int(env, kind.processes) or 1
    nodes = _int(env, kind.nodes)
    local_processes = _int(env, kind.local_processes) or (processes // nodes if nodes else processes)
    local_rank = _int(env, kind.local_rank)
    if local_rank is None:  # processes placed in blocks of local_processes per node
        local_rank = rank % max(1, local_processes)
    address, port = env.get(kind.address) if kind.address else None, _int(env, kind.port)
    if kind.coordinator and env.get(kind.coordinator):
        host, _, number = env[kind.coordinator].rpartition(":")
        address, port = host, int(number)
    node_rank = _int(env, kind.node_rank)
    return World(rank, processes, local_rank, local_processes,
                 node_rank if node_rank is not None else rank // max(1, local_processes),
                 address or None, port, kind.name, kind.launcher, _addresses(env))


def _addresses(env: Mapping[str, str]) -> Tuple[str, ...]:
    return tuple(a for a in env.get(NODE_ADDRS_ENV, "").split(",") if a)


def world(env: Optional[Mapping[str, str]] = None) -> World:
    """This process's World, from `env` (default: os.environ)."""
    env = os.environ if env is None else env
    for kind in KINDS:
        if (kind.marker or kind.rank) not in env:
            continue
        if kind.executor and env.get("COMPARE_EXECUTOR", kind.executor) != kind.executor:
            continue
        if not kind.several or (_int(env, kind.processes) or 1) > 1:
            return _read(kind, env)
    return World(launcher=env.get(LAUNCHER_ENV) or "single", node_addresses=_addresses(env))


def rank(env: Optional[Mapping[str, str]] = None) -> int:
    """This process's rank: 0 for a process on its own (the one that writes the result)."""
    return world(env).rank


if __name__ == "__main__":
    print(json.dumps(dict(asdict(world()), coordinator=world().coordinator)))
