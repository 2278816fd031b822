#!/usr/bin/env bash
# GPU sweeps of the second round (issues 12, 14, 17), run on the lent H200s with the repository on
# PYTHONPATH (nothing installed there). Each STAGE fits one device call (< 10 min).
#   bash bench/gpu_round2.sh OUTDIR STAGE
set -uo pipefail
out=${1:?outdir}; stage=${2:?stage}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# NVLink multicast off in every process we start (the machine's rule)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
keep() { tar czf $out/$1.tgz -C $out --exclude=code --exclude=work $1 && rm -rf $out/$1; }  # <= 8 files come back
run() {  # NAME ARGS...: one campaign in $out/NAME, its report on stdout, its wall time at the end
    local t0=$(date +%s.%N)
    python3 -m compare run --executor local --device cuda --timeout 400 --results $out/$1 "${@:2}" \
        > $out/$1.md 2> $out/$1.err
    echo "$1: exit $?, $(python3 -c "import time; print(round(time.time() - $t0, 1))") s wall"
    tail -3 $out/$1.err
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, sys; print(sys.version.split()[0], 'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"
python3 -c "import jax, flax, optax; print('jax', jax.__version__, 'flax', flax.__version__, 'optax', optax.__version__, jax.devices())" 2>&1 | tail -1
case $stage in
sweep-torch)  # issue 17's sweep, as it stood: the "before" of the duty cycle; issue 12's PyTorch side
  run torch --frameworks caffe2 --gpus 1,2 --precision fp32,tf32,fp16,bf16 --batch-size 256 --steps 30 --warmup 10 ;;
autotune)  # issue 17: what cuDNN's autotuning in the first step costs, and what it buys
  one="--frameworks caffe2 --gpus 1 --batch-size 256 --steps 30 --warmup 10"
  run heuristics $one --precision fp32,tf32,fp16,bf16 --option cudnn_benchmark=false
  run limit1 $one --precision fp32,bf16 --option cudnn_benchmark_limit=1
  run limit3 $one --precision fp32 --option cudnn_benchmark_limit=3 ;;
jax)  # issue 12: the JAX backend at 1 and 2 GPUs, all four precisions (the PyTorch side: sweep-torch)
  run jax --frameworks jax --gpus 1,2 --precision fp32,tf32,fp16,bf16 --batch-size 256 --steps 30 --warmup 10 ;;
data)  # issue 14: PyTorch fp16 b256 on real JPEGs, CPU and GPU decode, beside synthetic; JAX's best batch
  d=/tmp/imagenet-like
  python3 -m compare data make $d --images 6000 --classes 100 2>&1 | tail -2
  one="--frameworks caffe2 --gpus 1 --precision fp16 --batch-size 256 --steps 30 --warmup 10"
  run datacpu $one --data synthetic,$d --option decode=cpu
  run datacpu $one --data $d --data-only --option decode=cpu --resume
  run datagpu $one --data synthetic,$d --option decode=gpu
  run datagpu $one --data $d --data-only --option decode=gpu --resume
  run jaxbig --frameworks jax --gpus 1 --precision bf16,fp16 --batch-size 512 --steps 30 --warmup 10 ;;
overlap)  # issue 12: can XLA overlap the gradient all-reduce of 2 GPUs with the backward pass?
          # issue 17: the same PyTorch sweep with cuDNN's heuristics (no autotuning in the first step)
  two="--frameworks jax --gpus 2 --precision bf16,fp16 --batch-size 256 --steps 30 --warmup 10"
  run ar16 $two --option allreduce_combine_mb=16
  run ar4 $two --option allreduce_combine_mb=4
  run heur2 --frameworks caffe2 --gpus 1,2 --precision fp32,tf32,fp16,bf16 --batch-size 256 --steps 30 \
      --warmup 10 --option cudnn_benchmark=false ;;
extra)  # issue 12: what fp16's dynamic loss scaling costs in JAX; issue 14: JAX's own pipeline
  d=/tmp/imagenet-like
  python3 -m compare data make $d --images 2000 --classes 100 2>&1 | tail -1
  run static --frameworks jax --gpus 1 --precision fp16 --batch-size 256 --steps 30 --warmup 10 \
      --option loss_scale=1024
  run jaxdata --frameworks jax --gpus 1 --precision bf16 --batch-size 256 --steps 30 --warmup 10 \
      --data synthetic,$d ;;
efficiency)  # issue 12: where JAX's 2-GPU efficiency is lost: one process per GPU, a bigger batch,
             # XLA's latency-hiding scheduler off (the 1-GPU b512 figures: the data stage)
  two="--frameworks jax --gpus 2 --precision bf16,fp16 --steps 30 --warmup 10"
  run procs2 $two --batch-size 256 --option processes=2
  run big2 $two --batch-size 512
  run nolhs $two --batch-size 256 --option latency_hiding=false ;;
contention)  # issue 12: two independent 1-GPU JAX runs at once, one per GPU, no communication between
             # them: if each slows down as much as the 2-GPU job does, the loss is not the all-reduce
  # 300 timed steps (~11 s) so that the two runs' timed regions overlap despite set-up jitter
  one="--frameworks jax --gpus 1 --precision bf16,fp16 --batch-size 256 --steps 300 --warmup 20"
  nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -l 2 \
      > $out/clocks.csv & smi=$!
  run alone $one
  (CUDA_VISIBLE_DEVICES=0 run pair0 $one) & p0=$!
  CUDA_VISIBLE_DEVICES=1 run pair1 $one; wait $p0
  run two ${one/--gpus 1/--gpus 2}
  kill $smi ;;
allreduce)  # issue 12: the gradient all-reduce alone, JAX (XLA's collectives) and PyTorch (NCCL)
  python3 bench/allreduce_jax.py --step-ms 37.9
  torchrun --nproc-per-node 2 bench/allreduce_torch.py 2>&1 | grep '^{' ;;
flat)  # issue 12: the gradients all-reduced as one flat buffer (--option flat_allreduce=true),
       # the issue's sweep, and the default (a tree of arrays) beside it on the same machine
  run flat --frameworks jax --gpus 1,2 --precision fp32,tf32,fp16,bf16 --batch-size 256 --steps 30 \
      --warmup 10 --option flat_allreduce=true
  run tree --frameworks jax --gpus 2 --precision bf16 --batch-size 256 --steps 30 --warmup 10 ;;
flat512)  # issue 12: the best batch (512) at 1 and 2 GPUs with the flat all-reduce (the default now)
  run flat512 --frameworks jax --gpus 1,2 --precision bf16,fp16 --batch-size 512 --steps 30 --warmup 10 ;;
*) echo "unknown stage $stage"; exit 2 ;;
esac
for d in $(cd $out && ls -d */ 2>/dev/null); do keep ${d%/}; done
