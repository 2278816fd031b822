#!/usr/bin/env bash
# Issue 34 on one lent H200: time to accuracy, PyTorch and JAX, fp16 and bf16, 5 seeds each, on the
# large learnable set (compare data make --learnable large: 100 classes, 20,000 + 3,000 JPEGs of
# 80x80, trained at 64x64, batch 256), target top-1 0.9, at most 12 epochs a run. One device call:
#   bash bench/accuracy_gpu.sh $OUT        # ~8.5 min at most (ACC_DEADLINE seconds of runs, 450)
#   GPUS=2 bash bench/accuracy_gpu.sh $OUT  # the same on 2 GPUs (cli: GPUS=1,2 for both counts)
#   bash bench/accuracy_gpu.sh $OUT cli    # through `compare run --target-accuracy` instead: both
#        frameworks (ACC_FRAMEWORKS) at ACC_PRECISION (bf16), ACC_REPEATS seeds (2), the report's table and chart
# Prints one line per run and the report's time-to-accuracy table (minutes to target ± across
# seeds, median, spread, epochs, MLPerf score, cost at $2.50/GPU-hour). What comes back ($OUT):
# summary.txt (everything printed), accuracy.md (the table), runs.tgz (specs, results, stderr),
# logs.tgz: logs/<run_id>.mllog (each run's MLPerf log: check them on the host with
# `python -m mlperf_logging.compliance_checker --usage training --ruleset 4.0.0 LOG`).
set -uo pipefail
out=${1:?outdir}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
D=/tmp/tta-large W=/tmp/tta-work
mkdir -p $out $W
# runs an earlier call finished (its runs.tgz carried back in .tta-prev/) are kept, not run again
[ -f .tta-prev/runs.tgz ] && tar xzf .tta-prev/runs.tgz -C $W
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi -L | head -1), $(nproc) cores"
  python3 -c "import torch, jax; print('torch', torch.__version__, '| jax', jax.__version__)"
  t=$(date +%s)
  # Grain (JAX's loader) from the wheels carried in .whl/ where they are (carry: [".whl"])
  [ -d .whl ] && { python3 -m pip install -q --no-index --find-links .whl grain 2>&1 | tail -1 \
      || python3 -m pip install -q --break-system-packages --no-index --find-links .whl grain 2>&1 | tail -1; }
  python3 -m compare data make $D --learnable large --workers $(nproc) 2>/dev/null | tail -1
  python3 -m compare data prepare $D --frameworks caffe2,jax 2>&1 | tail -3  # train/ and val/
  echo "data made and checked in $(( $(date +%s) - t )) s"
  if [ "${2:-}" = cli ]; then  # the same study through the command a user types: plan, runs,
    # report (its time-to-accuracy table, accuracy-versus-time chart, cost at the given price)
    t=$(date +%s); PY=$(command -v python3)
    timeout -k 20 -s TERM ${ACC_DEADLINE:-450} python3 -m compare run --frameworks ${ACC_FRAMEWORKS:-caffe2,jax} \
        --python caffe2=$PY --python jax=$PY --executor local --gpus ${GPUS:-1} --precision ${ACC_PRECISION:-bf16} \
        --batch-size 256 --image-size 64 --target-accuracy 0.9 --max-epochs 12 --data $D \
        --repeats ${ACC_REPEATS:-2} --gpu-hour-price 2.50 --results $W/cli > $W/cli.md 2> $W/cli.err
    echo "compare run --target-accuracy: exit $? in $(( $(date +%s) - t )) s"
    grep -E "^(plan:|estimate:)|-tta-r[0-9]" $W/cli.err | tail -12
    python3 -m compare report $W/cli --format html > /dev/null 2>&1
    sed -n '/[Tt]ime to accuracy/,/^## /p' $W/cli.md | head -40
  else
    python3 bench/accuracy_gpu.py $W $D --deadline ${ACC_DEADLINE:-450} --gpus ${GPUS:-1}
  fi
} 2>&1 | tee $out/summary.txt
cp $W/accuracy.md $out/ 2>/dev/null
tar czf $out/logs.tgz -C $W logs 2>/dev/null  # the MLPerf logs (at most 8 files come back)
tar czf $out/runs.tgz -C $W runs 2>/dev/null
[ -d $W/cli ] && tar czf $out/cli.tgz -C $W --exclude=code --exclude=work cli cli.md cli.err 2>/dev/null
