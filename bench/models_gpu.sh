#!/usr/bin/env bash
# Issue 25 on the lent H200s (the two-GPU kind), the repository on PYTHONPATH (nothing installed):
# PyTorch and JAX train the seed's four networks at fp32 and fp16 on 1 and 2 GPUs, batch 256 per
# GPU (a batch tf_cnn_benchmarks ran every one of them at, in both precisions: seed 000), each at
# its native size (Inception-v3 299, the others 224), then each campaign's report beside seed
# 000's A6000 rows of the same network, precision, batch and GPU count.
#   bash bench/models_gpu.sh OUTDIR STAGE      STAGE: torch16 | torch32 | jax16 | jax32
#   MODELS=resnet50,resnet152 bash bench/models_gpu.sh OUTDIR torch32    (a stage for some networks)
# A stage is one campaign of 2 cells per network. Expected device time, from the ResNet-50 cells of
# BENCHMARKS.md (PyTorch's first step is cuDNN's search: 12 s fp16, 56 s fp32; JAX compiles
# 12-15 s a cell) scaled by the networks' layers: torch16 ~6 min, jax16 and jax32 ~8 min each,
# torch32 ~15 min, so run torch32 as two calls (MODELS=resnet50,resnet152 then
# MODELS=inception3,vgg16) to stay under the 10 minutes of one device call.
# Prints per stage: the campaign's exit status and wall time; OUTDIR/<stage>-<models>.md is the
# report with the "Measured versus published: a6000_tf_cnn_benchmarks" table (img/s, speedup and
# the published speedup per network); the .tgz holds the campaign (results, logs, report files).
set -uo pipefail
out=${1:?outdir}; stage=${2:?stage}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# NVLink multicast off in every process we start (the machine's rule)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
MODELS=${MODELS:-resnet50,resnet152,inception3,vgg16}  # MODELS=...,inception4 adds the seed's fifth
COMMON="--model $MODELS --gpus ${GPUS:-1,2} --batch-size 256 --steps 20 --warmup 5 --device cuda --executor local --timeout 400"
run() {  # NAME ARGS...: one campaign in $out/NAME, then its report beside the seed
    local t0=$(date +%s.%N)
    python3 -m compare run $COMMON --results $out/$1 "${@:2}" > /dev/null 2> $out/$1.err
    echo "$1: exit $?, $(python3 -c "import time; print(round(time.time() - $t0, 1))") s wall"
    tail -3 $out/$1.err
    python3 -m compare report $out/$1 --format md,csv,json --reference a6000_tf_cnn_benchmarks \
        > $out/$1.md 2>> $out/$1.err
    tar czf $out/$1.tgz -C $out --exclude=code --exclude=work $1 && rm -rf $out/$1
}
name=$stage-${MODELS//,/-}  # the campaign: OUTDIR/<stage>-<models>.md and .tgz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m compare list models | head -7
case $stage in
torch16) run $name --frameworks caffe2 --precision fp16 ;;
torch32) run $name --frameworks caffe2 --precision fp32 ;;
jax16) run $name --frameworks jax --precision fp16 ;;
jax32) run $name --frameworks jax --precision fp32 ;;
*) echo "unknown stage $stage: torch16 | torch32 | jax16 | jax32" >&2; exit 2 ;;
esac
