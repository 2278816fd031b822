#!/usr/bin/env bash
# Issue 24 on the x2 kind (2 H200s): the 16-cell study packed (cold caches), packed again (warm
# caches), and its 1-GPU cells one at a time for the packed-vs-serial check. The repository on
# PYTHONPATH, nothing installed. Each STAGE is one device call (< 10 min); run them in this order
# on the same warm machine (the campaigns and the compile caches live in results/pack-gpu/, an
# ignored folder kept between calls):
#   bash bench/pack_gpu.sh "$OUT" cold     # ~7.5 min: packed, empty compile caches
#   bash bench/pack_gpu.sh "$OUT" warm     # ~5.5 min: the same study again, caches warm
#   bash bench/pack_gpu.sh "$OUT" serial   # ~3.5 min: the 8 1-GPU cells alone; the packing check;
#                                          #            --plan of the study here and on 8 GPUs
# (estimates from the cell times of BENCHMARKS.md / measured-facts: 1-GPU cells two at a time, the
# eight 2-GPU cells, ~300 s cold, one after the other: two GPUs cannot hold two of them)
# Each prints its wall time, the report's "Study:" and "GPU time:" lines, the cells' statuses and
# compile-cache states; $OUT gets each campaign's report and results (a .tgz each).
set -uo pipefail
out=${1:?outdir}; stage=${2:?stage}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# NVLink multicast off in every process we start (the machine's rule)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
root=$PWD/results/pack-gpu
export COMPARE_CACHE=$root/cache  # the compile caches (and nothing else: --python names the pythons)
# the issue's study; 30 timed steps as the serial baseline it quotes (246 s JAX, 352 s PyTorch)
study=(--frameworks caffe2,jax --gpus 1,2 --precision fp32,tf32,fp16,bf16 --batch-size 256
       --steps 30 --warmup 10 --python caffe2=python3 --python jax=python3)
run() {  # NAME ARGS...: one campaign in $root/NAME; its wall time, study lines, cells
    local t0=$(date +%s.%N)
    python3 -m compare run --executor local --device cuda --timeout 400 --results $root/$1 "${@:2}" \
        > $root/$1.md 2> $root/$1.err
    echo "$1: exit $?, $(python3 -c "import time; print(round(time.time() - $t0, 1))") s wall"
    grep -E "^(Study|GPU time|Duty cycle):" $root/$1.md
    grep -E "^campaign|^note" $root/$1.err
    python3 - $root/$1 <<'EOF'
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1], "results").glob("*.json")):
    r = json.loads(p.read_text())
    ph, place = r.get("phases", {}), r["environment"].get("placement", {})
    cache = r["environment"].get("compile_cache", {}).get("jax", {})
    print("  {:<30} {:>7} {:>9} img/s  cell {:>5.1f} s  GPUs {:<4} cores {:<6} beside {}  {}".format(
        r["run_id"], r["status"], "{:.0f}".format(r["images_per_sec"] or 0),
        ph.get("cell_end", 0) - ph.get("cell_start", 0), ",".join(place.get("gpus") or []),
        place.get("cores") or "all", len(place.get("beside", [])),
        "jax cache {} ({} hits, {} misses)".format(cache["state"], cache["hits"], cache["misses"])
        if cache.get("dir") else ""))
EOF
}
keep() { cp $root/$1.md $out/ 2>/dev/null; tar czf $out/$1.tgz -C $root --exclude=code --exclude=work $1; }
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__, jax.devices())" 2>&1 | tail -1
case $stage in
cold)
  rm -rf $root && mkdir -p $root
  run cold "${study[@]}"; keep cold ;;
warm)
  [ -d $COMPARE_CACHE/compile ] || echo "WARNING: no compile cache from the cold stage (a fresh machine?): this run is cold too"
  du -sh $COMPARE_CACHE/compile/* 2>/dev/null
  run warm "${study[@]}"; keep warm ;;
serial)
  run serial "${study[@]}" --gpus 1 --concurrency 1; keep serial
  for c in cold warm; do  # packed 1-GPU figures against the serial ones (reporting/packing.py)
    [ -d $root/$c ] || continue
    python3 -m compare report $root/$c --out $root/$c/report > $root/$c.md 2>/dev/null
    echo "--- $c: packed against serial"; sed -n '/^## Packed cells/,/^## /p' $root/$c.md | grep -v "^## Where"
    grep "^\*\*Warning" $root/$c.md; cp $root/$c.md $out/
  done
  echo "--- the plan of the study from these campaigns' cell times, here and on 8 GPUs"
  python3 -m compare run --executor local --device cuda "${study[@]}" --plan --plan-from $root
  python3 -m compare run --executor local --device cuda "${study[@]}" --plan --plan-from $root --plan-gpus 8 ;;
esac
