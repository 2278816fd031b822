#!/usr/bin/env bash
# GPU sweeps for BENCHMARKS.md, run on the lent H200 (no install: the repo on PYTHONPATH).
#   bash bench/gpu_sweep.sh OUTDIR STAGE     STAGE: eager | compiled | overhead
set -uo pipefail
out=${1:?outdir}; stage=${2:?stage}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
run() { python3 -m compare run --frameworks caffe2 --device cuda --gpus 1 --timeout 300 "$@"; }
keep() { tar czf $out/$1.tgz -C $out --exclude=code --exclude=work $1 && rm -rf $out/$1; }  # <= 8 files come back
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
case $stage in
eager)
  run --precision fp32,tf32,fp16,bf16 --batch-size 256 --steps 30 --warmup 10 --results $out/eager
  run --precision tf32,fp16,bf16 --batch-size 256,512 --steps 40 --warmup 10 --option cuda_graphs=true --results $out/graphs ;;
compiled)
  run --precision fp16 --batch-size 256,512 --steps 40 --warmup 10 --compile --option cuda_graphs=true --results $out/cfp16; keep cfp16
  run --precision tf32,bf16 --batch-size 256 --steps 40 --warmup 10 --compile --option cuda_graphs=true --results $out/ctf32; keep ctf32
  run --precision fp16 --batch-size 768 --steps 40 --warmup 10 --compile --option cuda_graphs=true --results $out/cfp16b768; keep cfp16b768 ;;
overhead)
  python3 bench/harness_overhead.py --device cuda --precision fp16 --batch-size 256 --image-size 224 --steps 50 --warmup 10 --rounds 2 --cuda-graphs
  run --precision fp16 --batch-size 256 --steps 50 --warmup 10 --repeats 5 --option cuda_graphs=true --results $out/repeats ;;
esac
for d in $(cd $out && ls -d */ 2>/dev/null); do keep ${d%/}; done
