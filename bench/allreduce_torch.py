"""NCCL all-reduce of ResNet-50's gradients in PyTorch, for comparison with bench/allreduce_jax.py.

One flat float32 buffer of 25,557,032 values (102 MB), and DDP's 25 MB buckets one after another.
Run under torchrun with one process per GPU; rank 0 prints one JSON line per case.

    torchrun --nproc-per-node 2 bench/allreduce_torch.py
"""
import json
import os

import torch
import torch.distributed as dist
from medians import ms_per_call  # bench/, this script's folder

PARAMS = 25_557_032


def main() -> None:
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    flat = torch.ones(PARAMS, device="cuda")
    buckets = list(flat.split(25 * 2 ** 20 // 4))
    cases = [("one flat buffer, float32", lambda: dist.all_reduce(flat)),
             ("{} buckets of 25 MiB, float32".format(len(buckets)),
              lambda: [dist.all_reduce(b) for b in buckets])]
    for name, fn in cases:
        ms = ms_per_call(fn, lambda _: torch.cuda.synchronize())
        if rank == 0:
            print(json.dumps({"devices": dist.get_world_size(), "case": name,
                              "MB": round(PARAMS * 4 / 1e6, 1), "ms": round(ms, 3),
                              "algbw_GB_s": round(PARAMS * 4 / ms / 1e6, 1)}),
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
