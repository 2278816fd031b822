#!/usr/bin/env bash
# Issue 23: JAX through `compare run` against a plain Flax loop on ONE H200, in one device call
# (<= 8 min; stages that would not fit what is left are skipped and say so). Run from the
# repository root on the nvidia-h200 kind (nothing installed: the repo on PYTHONPATH):
#   bash bench/jax_parity.sh $OUT
# Prints the table of bench/parity_table.py: plain loop | + harness-like window syncs | compare's
# step timed by the plain loop | compare run, per precision; then the variants (each a hypothesis
# for fp16's gap), then every fp32 program's fingerprint (fp32's run-to-run swing).
set -uo pipefail
out=${1:?outdir}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=$(command -v python3)  # --python takes a path
T0=$(date +%s); BUDGET=470
left() { echo $((BUDGET - $(date +%s) + T0)); }
fits() {  # SECONDS NAME: run the stage only if it fits what is left of the budget
  if [ "$(left)" -ge "$1" ]; then return 0; fi
  echo "skipped $2: $(left) s left, it needs ~$1 s"; return 1; }
cmp() {  # NAME ARGS...: one compare campaign of JAX on one GPU
  python3 -m compare run --frameworks jax --python jax=$PY --device cuda --executor local \
      --gpus 1 --batch-size 256 --steps 30 --warmup 10 --timeout 200 --results $out/$1 "${@:2}" \
      > $out/$1.md 2> $out/$1.err
  echo "$1: exit $?, $(( $(date +%s) - T0 )) s in"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -c "import jax, flax, optax; print('jax', jax.__version__, 'flax', flax.__version__, 'optax', optax.__version__)"
# 1. the plain loop (one process per line: one import, one compile per precision x step); fp16
#    also with the harness's window syncs and with compare's own step (dynamic loss scale)
python3 bench/flax_loop.py --precision fp32,tf32,bf16 --variants plain > $out/loop.jsonl
python3 bench/flax_loop.py --precision fp16 --variants plain,windows,ours >> $out/loop.jsonl
echo "plain loops: $(( $(date +%s) - T0 )) s in"
# 2. compare run at its defaults (1 GPU: no latency-hiding scheduler since this branch)
cmp compare --precision fp32,tf32,bf16,fp16
# 3. fp16 hypotheses, one switch each: the scheduler on again (the old 1-GPU default), no loss
#    scaling at all (the plain loop's arithmetic), one timed window of 50 steps (no window syncs)
fits 35 lhs && cmp lhs --precision fp16 --option latency_hiding=true
fits 35 noscale && cmp noscale --precision fp16 --option loss_scale=1
fits 35 onewindow && cmp onewindow --precision fp16 --windows 1 --steps 50
# 4. fp32's swing: two more processes of the same cell compiling afresh, without the persistent
#    compile and autotuning caches (fingerprints tell one program from two; with the caches, as in
#    `compare`'s other campaigns here, a later process loads the first one's program), then XLA's
#    autotuning off (heuristics: if the swing is autotuning's, it goes)
export COMPARE_COMPILE_CACHE=off
fits 90 fp32x2 && cmp fp32x2 --precision fp32 --repeats 2
unset COMPARE_COMPILE_CACHE
fits 45 tune0 && cmp tune0 --precision fp32 --option autotune_level=0
fits 45 looptf32off && NVIDIA_TF32_OVERRIDE=0 python3 bench/flax_loop.py --precision fp32 \
    --variants plain > $out/loop-tf32override0.jsonl
python3 bench/parity_table.py $out | tee $out/table.txt
echo "total $(( $(date +%s) - T0 )) s"
for d in $(cd $out && ls -d */ 2>/dev/null); do  # campaigns as archives: few files come back
  tar czf $out/${d%/}.tgz -C $out --exclude=code --exclude=work ${d%/} && rm -rf $out/${d%/}; done
