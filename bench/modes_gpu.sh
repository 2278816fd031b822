#!/usr/bin/env bash
# Issue 23's study on the nvidia-h200-x2 kind (GPUS=1 on the one-GPU kind): PyTorch and JAX, 1 and 2 GPUs, fp16 and bf16, each
# at its defaults and tuned, in ONE campaign with one report (headline: the verdict per mode).
#   bash bench/modes_gpu.sh $OUT [CAMPAIGN]
# CAMPAIGN (default results/modes-study, ignored by git) is resumed when it exists: the study
# needs ~10-13 min of cells (`--plan --plan-gpus 2` prints the schedule: the 1-GPU cells run two at
# once, then the 2-GPU cells) and one command may run 10, so the first call stops itself after ~9 min
# (SIGTERM: the running cell is not recorded) and a second call, with the campaign carried back
# (`mkdir -p results && tar xzf modes-study.tgz -C results`, then `carry: ["results/modes-study"]`)
# runs the rest.
#
# Choices (docs/modes.md):
# - default cells at batch 256 (the batch of every earlier H200 figure);
# - tuned cells with --batch-search 512-512: one candidate, so no probe; 512 was the best batch
#   measured for both (BENCHMARKS.md: PyTorch compiled fp16 b512 7,537.63 vs b768 7,555.85; JAX
#   b512 above b256 and b384). A real search (512-1024) would compile PyTorch once per probe,
#   ~1-1.5 min each with compile_mode=default, i.e. ~3 min more per tuned PyTorch cell.
# - PyTorch tuned = torch.compile(mode="default") (+ the whole step as a CUDA graph on one GPU):
#   max-autotune had not compiled this step after 540 s on an H200 (measured-facts), default mode
#   compiles in about a minute.
set -uo pipefail
out=${1:?outdir}; camp=${2:-results/modes-study}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${BACKEND_PYTHON:-$(command -v python3)}  # --python takes a path (a stand-in: a dry run)
# NVLink multicast off in every process we start (the machine's rule)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)" 2>&1 | tail -1
resume=""; [ -f $camp/campaign.json ] && resume="--resume"
timeout -k 30 -s TERM ${STUDY_SECONDS:-540} python3 -m compare run --frameworks caffe2,jax --device ${DEVICE:-cuda} \
    --gpus ${GPUS:-1,2} --precision fp16,bf16 --mode default,tuned --batch-size 256 --batch-search 512-512 \
    --steps 30 --warmup 10 --timeout 400 --executor local --python caffe2=$PY \
    --python jax=$PY --results $camp $resume > $out/run.md 2> $out/run.err
echo "compare run: exit $? after $(( $(date +%s) - T0 )) s (143: stopped to fit; run again to resume)"
grep -E "^(caffe2|jax)-" $out/run.err | tail -20
python3 -m compare report $camp --format md,csv,html --out $out/report > /dev/null 2> $out/report.err
sed -n '1,/^## Images/p' $out/report/report.md  # the headline: what the numbers say, per mode
tar czf $out/modes-study.tgz -C $(dirname $camp) --exclude=code --exclude=work $(basename $camp)
tar czf $out/report.tgz -C $out report && rm -rf $out/report
