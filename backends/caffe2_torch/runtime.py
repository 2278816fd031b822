"""PyTorch's runtime: join the process group (torchrun's or srun's ranks), this rank's device and
CPU threads, sync, barrier, close. Imported by train.py and data.py (it needs torch)."""
from typing import Any, Dict

import torch
import torch.distributed as dist

from .. import phases, policy, world
from ..machine import cpu_model
from ..protocol import RunSpec
from ..trainer import Runtime


def join(spec: RunSpec):
    """Join the process group if there is one; return (rank, local_rank, world).

    torchrun, or a Slurm job's srun tasks, started the processes (backends/world.py reads which);
    the env:// rendezvous reads MASTER_ADDR and MASTER_PORT, which both set.
    """
    w = world.world()
    # one process on its own where the spec wants several: name the launcher that should have
    # started them
    policy.check_workers(spec.world_size, w.processes,
                         w.launcher if w.launcher != "single" else "torchrun")
    if w.processes > 1:
        dist.init_process_group("nccl" if spec.device == "cuda" else "gloo", rank=w.rank,
                                world_size=w.processes)
    return w.rank, w.local_rank, w.processes


class TorchRuntime(Runtime):
    def __init__(self, spec: RunSpec):
        self.rank, self.local_rank, self.world = join(spec)
        self.distribution = "ddp" if self.world > 1 else "single"
        if spec.device == "cuda":
            policy.check_gpu(torch.cuda.is_available(), "torch " + torch.__version__)
            self.device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
            # each worker gets its share of its node's cores, so N workers do not oversubscribe them
            torch.set_num_threads(policy.cpu_threads(spec.gpus))
        phases.mark("devices_ready")  # communicators are created lazily, with the model

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def describe(self) -> Dict[str, Any]:
        return {"framework_version": "torch " + torch.__version__,
                "device_name": torch.cuda.get_device_name(self.device) if self.cuda else cpu_model()}

    def close(self) -> None:
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()


def start(spec: RunSpec) -> TorchRuntime:
    return TorchRuntime(spec)
