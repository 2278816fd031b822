#!/usr/bin/env bash
# Issue 34 on one lent H200: time to accuracy, PyTorch and JAX, fp16 and bf16, 5 seeds each, on the
# large learnable set (compare data make --learnable large: 100 classes, 20,000 + 3,000 JPEGs of
# 80x80, trained at 64x64, batch 256), target top-1 0.9, at most 12 epochs a run. One device call:
#   bash bench/accuracy_gpu.sh $OUT        # ~8.5 min at most (ACC_DEADLINE seconds of runs, 450)
# Prints one line per run and the report's time-to-accuracy table (minutes to target ± across
# seeds, median, spread, epochs, MLPerf score, cost at $2.50/GPU-hour). What comes back ($OUT):
# summary.txt (everything printed), accuracy.md (the table), runs.tgz (specs, results, stderr),
# logs/<run_id>.mllog (each run's MLPerf log: check them on the host with
# `python -m mlperf_logging.compliance_checker --usage training --ruleset 4.0.0 LOG`).
set -uo pipefail
out=${1:?outdir}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
D=/tmp/tta-large W=/tmp/tta-work
mkdir -p $out $W
{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi -L | head -1), $(nproc) cores"
  python3 -c "import torch, jax; print('torch', torch.__version__, '| jax', jax.__version__)"
  t=$(date +%s)
  python3 -m compare data make $D --learnable large --workers $(nproc) 2>/dev/null | tail -1
  python3 - $D <<'PY'
import sys
from compare import datasets
for part in (sys.argv[1], sys.argv[1] + "/val"):
    print(datasets.summary(datasets.check(datasets.open_folder(part))))
PY
  echo "data made and checked in $(( $(date +%s) - t )) s"
  python3 bench/accuracy_gpu.py $W $D --deadline ${ACC_DEADLINE:-450}
} 2>&1 | tee $out/summary.txt
cp $W/accuracy.md $out/ 2>/dev/null
cp -r $W/logs $out/ 2>/dev/null
tar czf $out/runs.tgz -C $W runs 2>/dev/null
