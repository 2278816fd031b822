"""backends/world.py: who a process is, read from the variables each launcher really sets."""
import json
import os
import subprocess
import sys

import pytest

from backends.world import World, world
from tests.helpers import ROOT

# what a worker of each launcher finds in its environment (second of four: two nodes of two)
TORCHRUN = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500",
            "TORCHELASTIC_RUN_ID": "none"}
HOROVOD = {"HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1",
           "HOROVOD_LOCAL_SIZE": "2", "HOROVOD_CROSS_RANK": "1", "HOROVOD_CROSS_SIZE": "2"}
OPENMPI = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
           "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
PMI = {"PMI_RANK": "2", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2"}
# a task of compare's Slurm job: Slurm's variables and the rendezvous the job script exports
SLURM = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1",
         "SLURM_NTASKS_PER_NODE": "2", "SLURM_NODEID": "1", "SLURM_JOB_NUM_NODES": "2",
         "COMPARE_COORDINATOR_ADDR": "10.0.0.1", "COMPARE_COORDINATOR_PORT": "20042",
         "COMPARE_COORDINATOR": "10.0.0.1:20042", "COMPARE_NODE_ADDRS": "10.0.0.1,10.0.0.2",
         "COMPARE_LAUNCHER": "srun"}
# one of two processes started by compare's own launcher (JAX processes=2)
COMPARE = {"COMPARE_NUM_PROCESSES": "2", "COMPARE_PROCESS_ID": "1", "COMPARE_LOCAL_RANK": "1",
           "COMPARE_COORDINATOR": "127.0.0.1:41234"}


@pytest.mark.parametrize("env,expected", [
    (TORCHRUN, World(1, 4, 1, 2, 0, "10.0.0.1", 29500, "torchrun", "torchrun")),
    (HOROVOD, World(3, 4, 1, 2, 1, None, None, "horovod", "horovodrun")),
    (OPENMPI, World(2, 4, 0, 2, 1, None, None, "openmpi", "mpirun")),
    (PMI, World(2, 4, 0, 2, 1, None, None, "pmi", "mpiexec")),
    (SLURM, World(3, 4, 1, 2, 1, "10.0.0.1", 20042, "slurm", "srun", ("10.0.0.1", "10.0.0.2"))),
    (COMPARE, World(1, 2, 1, 2, 0, "127.0.0.1", 41234, "compare", "compare")),
    ({}, World()),
], ids=["torchrun", "horovod", "openmpi", "pmi", "slurm", "compare", "single"])
def test_each_launchers_variables_give_the_same_answers(env, expected):
    assert world(env) == expected


def test_the_coordinator_is_host_and_port_where_the_launcher_names_them():
    assert world(SLURM).coordinator == "10.0.0.1:20042"
    assert world(HOROVOD).coordinator is None


def test_the_one_task_of_a_slurm_job_that_starts_its_own_workers_is_a_process_on_its_own():
    one = {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0",
           "COMPARE_LAUNCHER": "srun"}
    assert world(one) == World(launcher="srun")
    # horovodrun's workers inside that task are horovod ranks, not Slurm's
    assert world(dict(one, **HOROVOD)).kind == "horovod"


def test_compares_own_launcher_wins_over_the_slurm_task_it_runs_in():
    """processes=2 inside a one-task Slurm job: the two processes, not the task."""
    assert world(dict(SLURM, SLURM_NTASKS="1", **COMPARE)).kind == "compare"


def test_a_local_run_inside_a_slurm_allocation_is_no_task_of_it():
    """`compare run --executor local` in an salloc of 4 tasks: its runs inherit SLURM_*."""
    assert world(dict(SLURM, COMPARE_EXECUTOR="local")) == World(
        launcher="srun", node_addresses=("10.0.0.1", "10.0.0.2"))
    assert world(dict(SLURM, COMPARE_EXECUTOR="slurm")).kind == "slurm"


def test_missing_local_numbers_follow_from_a_block_placement():
    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_JOB_NUM_NODES": "2"}
    w = world(env)
    assert (w.local_processes, w.local_rank, w.node_rank) == (4, 1, 1)
    assert world({"COMPARE_NUM_PROCESSES": "3", "COMPARE_PROCESS_ID": "2"}).local_rank == 2


def test_the_module_prints_this_process_as_json():
    env = dict(os.environ, PYTHONPATH=str(ROOT), **TORCHRUN)
    out = subprocess.run([sys.executable, "-m", "backends.world"], env=env, capture_output=True,
                         text=True, check=True).stdout
    printed = json.loads(out)
    assert (printed["rank"], printed["processes"], printed["coordinator"]) == (1, 4, "10.0.0.1:29500")
