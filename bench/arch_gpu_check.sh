#!/usr/bin/env bash
# Issue 26 (architecture): the GPU paths the restructuring touched, run once on two H200s with the
# repository on PYTHONPATH (nothing installed there); one device call, about 8 minutes.
#   bash bench/arch_gpu_check.sh OUTDIR
# What changed under them: each backend's runtime.py (device choice, sync, barrier), the torchrun
# and processes launchers (backends/launchers/), the shared feeder thread (backends/pipelines/feed.py) of
# PyTorch's decode=gpu pipeline, and --data-only built by the harness. Every cell must be `ok`,
# and its img/s within noise of the same cell in BENCHMARKS.md (issue 7's and issue 12's tables:
# PyTorch bf16 b256 at 1 and 2 GPUs, JAX bf16 b256 at 1 and 2 GPUs and with processes=2; issue
# 14's data-only decode=gpu figure). Prints each campaign's report and its wall time.
set -uo pipefail
out=${1:?outdir}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # no NVLink multicast
run() {  # NAME ARGS...: one campaign in $out/NAME, its report in $out/NAME.md
    local t0=$(date +%s.%N)
    python3 -m compare run --executor local --device cuda --timeout 400 --results $out/$1 "${@:2}" \
        > $out/$1.md 2> $out/$1.err
    echo "$1: exit $?, $(python3 -c "import time; print(round(time.time() - $t0, 1))") s wall"
    grep -E "^\| " $out/$1.md | head -12
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
common="--precision bf16 --batch-size 256 --steps 30 --warmup 10"
run torch --frameworks caffe2 --gpus 1,2 $common
run jax --frameworks jax --gpus 1,2 $common
run jaxprocs --frameworks jax --gpus 2 $common --option processes=2
d=/tmp/imagenet-like
python3 -m compare data make $d --images 2000 --classes 100 2>&1 | tail -1
run torchdata --frameworks caffe2 --gpus 1 --precision fp16 --batch-size 256 --steps 30 --warmup 10 \
    --data $d --data-only --option decode=gpu
python3 - "$out" <<'EOF'
import json, pathlib, sys
bad = [(p.name, r["status"], r.get("reason")) for p in pathlib.Path(sys.argv[1]).glob("*/results/*.json")
       for r in [json.loads(p.read_text())] if r["status"] != "ok"]
print("all cells ok" if not bad else "NOT ok: {}".format(bad))
EOF
# one file comes back: every campaign (without its staged code and work folders), reports, logs
(cd $out && tar czf arch_gpu_check.tgz --exclude=code --exclude=work torch* jax* && rm -rf torch* jax*)
