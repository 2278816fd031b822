#!/usr/bin/env bash
# Issue 35 on ONE H200 (the nvidia-h200 kind), from the repository root, nothing installed (the
# repo on PYTHONPATH, torch and jax in the machine's python):
#   bash bench/tuned_gpu.sh $OUT [STAGE ...]
# Stages run in the order given (default: all, in the order below) while they fit the call's
# budget (BUDGET, 530 s): a stage that would not fit what is left is skipped and says so. The
# campaigns live in results/tuned-35 (ignored by git: a warm machine keeps them between calls;
# else carry it back), so later calls run the rest and a stage cut short resumes. Each call leaves
# the campaigns in $OUT as one tuned-35.tgz (fixtures for the plan's ETA rule) and prints
# bench/tuned_summary.py's tables. Three calls of ~9 min do it all:
#   bash bench/tuned_gpu.sh $OUT                      # noflags, big (the batch table's entries)
#   bash bench/tuned_gpu.sh $OUT study fresh          # the study, then its fresh-process twins
#   bash bench/tuned_gpu.sh $OUT parity candidates
#   noflags    `compare run --frameworks caffe2,jax` with no other flag: fp32 and fp16 at the
#              default batch (1024 on an H200: the table's entry, fp32 and eager not measured
#              there before) and the FP16 gain (goal <= 4 min)                      (~3-5 min)
#   big        tuned fp16 of both at --batch-search 1024-2048: does 2048 fit, is it faster
#              beyond the probes' noise (the table's entry, the search's maximum)  (~3-4 min)
#   study      the 8-cell `compare run --frameworks caffe2,jax --precision fp16,bf16 --mode
#              default,tuned` with the in-process batch search: its wall time (goal <= 6 min),
#              its plan (printed before the first cell), each tuned cell's probes, chosen batch
#              and search seconds                                                   (~6-9 min)
#   again      the study once more in a folder of its own, right after `study` on the same machine:
#              each cell with the compile caches the first run left (what a second study costs)
#   fresh      each tuned cell of the study again at the batch it chose, in a fresh process and
#              without a search (--batch-search B-B: one candidate, no probe); `compare diff` says
#              whether the in-process figures are within their intervals           (~3-4 min)
#   parity     JAX through compare against the plain Flax loop, every precision, b256, with the
#              loop also under NVIDIA_TF32_OVERRIDE=0 at fp32 (what compare sets for fp32: the
#              hypothesis for fp32's 0.96) and compare's own step in that loop        (~6 min)
#   scale      JAX fp16 with the dynamic loss scale checked by one reduction (step.all_finite): the
#              plain loop, compare's step in it (dynamic; static 1), and compare run, b256 (~4 min)
#   candidates tuned fp16/bf16 at b1024 with one switch each, toward >= 8,500 img/s: PyTorch
#              cudnn_benchmark_limit=0 (every cuDNN algorithm timed), JAX fp16 with a static loss
#              scale (MLPerf's ResNet-50 entries use one)                             (~3 min)
#   push       toward >= 8,500 img/s: PyTorch tuned bf16 then fp16 at b1024 with
#              --option inductor_tuning=coordinate (inductor times the block sizes of its fused
#              BN/ReLU/add Triton kernels, 60 % of a compiled step: BENCHMARKS.md), cold (~4-8 min)
#   setup      where a PyTorch cell's 5-6 s from devices_ready to model_built go (bench/torch_setup.py,
#              cProfile of the backend's own trainer), fp16 and bf16 at b256         (~30 s)
#   pycache    whether compare's bytecode cache (backends/caches.py: bytecode) ends each PyTorch
#              process's 3-4 s of compiling torch's Python source (the setup stage of 12-05):
#              a process that fills it, one that reads it, one with the caches off  (~60 s;
#              a call of this stage alone: BUDGET=120, as the start takes ~10 s of it)
#   compile    what a tuned cell's compile costs and buys: JAX fp16 at b1024 with XLA's autotuning
#              at levels 0, 1 and 4 (its default), PyTorch fp16 at b512 with cuDNN's autotuning
#              off and on; each cell alone in its process with empty compile caches of its own,
#              so each compile is cold as on a fresh machine (the 8-cell study's tuned cells
#              spent 112-125 s each compiling their probes)                         (~5 min)
set -uo pipefail
out=${1:?outdir}; shift
stages=${*:-noflags big study fresh parity candidates}
PARITY=${PARITY:-fp32,tf32,bf16,fp16}  # the parity stage's precisions (PARITY_NEEDS: its seconds)
camp=results/tuned-35; mkdir -p $camp
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=$(command -v python3)
T0=$(date +%s); BUDGET=${BUDGET:-530}
left() { echo $((BUDGET - $(date +%s) + T0)); }
fits() {  # SECONDS NAME
  if [ "$(left)" -ge "$1" ]; then return 0; fi
  echo "skipped $2: $(left) s left, it needs ~$1 s"; return 1; }
run() { run_for $(( $(left) - 10 )) "$@"; }  # NAME ARGS...: until the budget ends
run_for() {  # SECONDS NAME ARGS...: one campaign, stopped (SIGTERM: resumable) after SECONDS
  local limit=$1 name=$2; shift 2; local t=$(date +%s)
  [ $limit -lt 5 ] && limit=5
  [ -f $camp/$name/campaign.json ] && set -- "$@" --resume
  timeout -k 20 -s TERM $limit python3 -m compare run --python caffe2=$PY \
      --python jax=$PY --executor local --timeout 500 --results $camp/$name "$@" \
      > $camp/$name.md 2> $camp/$name.err
  echo "$name: exit $? in $(( $(date +%s) - t )) s ($(( $(date +%s) - T0 )) s into the call)"
  grep -E "^(plan:|estimate:|note:)|^ +[0-9]+:[0-9]+ |probe |-r0 " $camp/$name.err | head -30; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)" 2>&1 | tail -1
for stage in $stages; do case $stage in
  study) fits 360 study && run study --frameworks caffe2,jax --gpus 1 --precision fp16,bf16 \
      --mode default,tuned ;;
  again) fits 60 again && run study-again --frameworks caffe2,jax --gpus 1 --precision fp16,bf16 \
      --mode default,tuned ;;
  noflags) fits 200 noflags && run noflags --frameworks caffe2,jax ;;
  fresh) [ -d $camp/study/results ] && fits 200 fresh && {
      for cell in $(python3 bench/tuned_summary.py $camp --chosen); do  # fw:precision:batch:...
        IFS=: read fw p b n w <<< "$cell"
        run fresh-$fw-$p --frameworks $fw --gpus 1 --precision $p --mode tuned \
            --batch-search $b-$b --steps $n --warmup $w  # one candidate: no probe, the cell
      # alone in its process, timing the steps the study's cell timed
        python3 -m compare diff $camp/study $camp/fresh-$fw-$p | grep -E "tuned|within|better|worse"
      done; } ;;
  parity) fits ${PARITY_NEEDS:-380} parity && {
      python3 bench/flax_loop.py --precision $PARITY --variants plain > $camp/loop.jsonl
      NVIDIA_TF32_OVERRIDE=0 python3 bench/flax_loop.py --precision fp32 --variants plain,ours \
          > $camp/loop-tf32override0.jsonl
      echo "loops: $(( $(date +%s) - T0 )) s into the call"; cat $camp/loop*.jsonl
      run parity --frameworks jax --gpus 1 --precision $PARITY --batch-size 256 \
          --steps 30 --warmup 10; } ;;
  scale) fits 240 scale && {
      python3 bench/flax_loop.py --precision fp16 --variants plain,ours,ours1 > $camp/loop-scale.jsonl
      echo "loops: $(( $(date +%s) - T0 )) s into the call"; cat $camp/loop-scale.jsonl
      run_for 150 scale --frameworks jax --gpus 1 --precision fp16 --batch-size 256 --steps 30 \
          --warmup 10; } ;;
  big) fits 150 big && run big --frameworks ${BIG_FRAMEWORKS:-caffe2,jax} --gpus 1 --precision fp16 --mode tuned \
      --batch-search 1024-2048 ;;
  candidates) fits 150 candidates && {
      run_for $(( $(left) / 2 )) cand-torch --frameworks caffe2 --gpus 1 \
          --precision fp16,bf16 --mode tuned --batch-search 1024-1024 \
          --option cudnn_benchmark_limit=0
      run cand-jax --frameworks jax --gpus 1 --precision fp16 --mode tuned \
          --batch-search 1024-1024 --option loss_scale=128; } ;;
  compile) fits 240 compile && {
      cost() {  # NAME VARIABLE=DIR ARGS...: one cold cell, at most 150 s and what is left
        local name=$1 cache=$2; shift 2
        export "$cache"
        run_for $(( $(left) < 150 ? $(left) : 150 )) $name --gpus 1 --precision fp16 \
            --mode tuned "$@"; unset ${cache%%=*}; }
      cost_jax() { cost compile-jax-at$1 JAX_COMPILATION_CACHE_DIR=/tmp/compile-cost/jax-$1 \
          --frameworks jax --batch-search 1024-1024 --option autotune_level=$1; }
      cost_torch() { cost compile-torch-cudnn-$1 TORCHINDUCTOR_CACHE_DIR=/tmp/compile-cost/inductor-$1 \
          --frameworks caffe2 --batch-search 512-512 --option cudnn_benchmark=$1; }
      cost_jax 0; cost_torch false; cost_jax 1; cost_jax 4; cost_torch true  # the switches first, the defaults after
      python3 bench/tuned_summary.py $camp --compile; } ;;
  push) fits 200 push && {
      run_for $(( $(left) * 6 / 10 )) push-torch-bf16 --frameworks caffe2 --gpus 1 \
          --precision bf16 --mode tuned --batch-search 1024-1024 --option inductor_tuning=coordinate
      run push-torch-fp16 --frameworks caffe2 --gpus 1 --precision fp16 --mode tuned \
          --batch-search 1024-1024 --option inductor_tuning=coordinate; } ;;
  setup) fits 40 setup && for p in fp16 bf16; do  # where a PyTorch cell's set-up goes
      timeout 60 python3 bench/torch_setup.py --precision $p --top 30 > $out/torch-setup-$p.txt 2>&1
      head -45 $out/torch-setup-$p.txt; done ;;
  pycache) fits 70 pycache && {  # why every PyTorch process compiles torch's source again (12-05:
      # 959 modules, 3-4 s of a cell's set-up), and whether a writable bytecode cache ends it
      env | grep -E '^PYTHON' || echo "no PYTHON* variable"
      python3 -c "import sys, os, glob, torch; d = os.path.dirname(torch.__file__); print(
          'dont_write_bytecode', sys.dont_write_bytecode, 'pycache_prefix', sys.pycache_prefix,
          'torch folder writable', os.access(d, os.W_OK), 'its .pyc', len(glob.glob(d + '/__pycache__/*.pyc')))"
      for run in fills reads; do  # compare's bytecode cache (backends/caches.py) in a folder of
        # its own: the first process fills it, the second reads it
        COMPARE_COMPILE_CACHE=/tmp/pyc-stage timeout 40 python3 bench/torch_setup.py --precision \
            bf16 --top 0 2>&1 | grep -E "^(imports|bytecode)" | sed "s/^/$run: /"; done
      COMPARE_COMPILE_CACHE=off timeout 40 python3 bench/torch_setup.py --precision bf16 --top 0 \
          2>&1 | grep -E "^(imports|bytecode)" | sed "s/^/caches off: /"; } ;;
  *) echo "unknown stage $stage" ;;
esac; done
python3 bench/tuned_summary.py $camp | tee $out/summary.txt
echo "total $(( $(date +%s) - T0 )) s"
# one archive: the device tool brings back at most 8 files from $OUT (a call of 2026-12-05 that
# left a .tgz per campaign lost the study's, its 9th file and more)
mv $out/torch-setup-*.txt $camp/ 2>/dev/null
tar czf $out/tuned-35.tgz -C $camp --exclude=code --exclude=work . ; true
