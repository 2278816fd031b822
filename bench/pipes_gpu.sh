#!/usr/bin/env bash
# Issue 22 on the lent H200s: real data at GPU speed. Two device calls on the same warm machine
# (nvidia-h200-x2: 2 GPUs, 32 cores; on a 1-GPU machine everything with --gpus 1 runs, the rest
# is skipped and says so):
#   bash bench/pipes_gpu.sh $OUT main    # <= 9.5 min: setup (wheels, 8,000 JPEGs, prepare), the
#        two hw-vs-Pillow probes, the data-only ceilings (torch hw, torch cpu, jax hw, jax cpu
#        on 1 GPU; jax hw on 2), then the issue's study with the defaults (1-GPU cells packed two
#        at a time, 16 cores each), as far as the deadline allows (the next stage resumes it)
#   bash bench/pipes_gpu.sh $OUT cores   # the study's remaining cells (--resume), then its real
#        cells again with the job pinned to 8 cores per GPU (a cheaper host)
# Campaigns live in /tmp/pipes-work on the machine (kept while it is warm); a cold machine for
# `cores` takes the study from .pipes/study.tgz where the lead carried it (carry: [".whl",
# ".pipes"]) and redoes the setup. Needs in .whl/ (Python 3.12, manylinux x86_64): the WHEELS
# below and grain's dependencies. What comes back ($OUT, <= 6 files): summary.txt (everything
# printed), ceilings.tgz, study.tgz, study.md, and for `cores` cores.tgz, cores.md.
set -uo pipefail
out=${1:?outdir}; stage=${2:?stage: main or cores}
T0=$(date +%s); DEADLINE=${PIPES_DEADLINE:-540}  # seconds after the start by which `main` packs up
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# NVLink multicast off in every process we start (the machine's rule)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=/tmp/pipes-work D=/tmp/pipes-imagenet-like
P3=$(command -v python3)  # --python needs a path to an interpreter
PY="--python caffe2=$P3 --python jax=$P3"
WHEELS="grain nvidia-nvimgcodec-cu13 nvidia-nvjpeg"
mkdir -p $out $W
G=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
GPUS=$([ "$G" -ge 2 ] && echo 1,2 || echo 1)
left() { local n=$((DEADLINE - $(date +%s) + T0 - 25)); echo $((n > 1 ? n : 1)); }  # less packing
run() {  # NAME ARGS...: one campaign in $W/NAME (stdout: its report's path lines; stderr kept)
    local t0=$(date +%s)
    ${PIN:-} ${LIMIT:-} python3 -m compare run --executor local --device cuda --timeout 300 $PY \
        --results $W/$1 "${@:2}" >> $W/$1.out 2>> $W/$1.err
    local rc=$?
    echo "$1: exit $rc, $(( $(date +%s) - t0 )) s, $(ls $W/$1/results 2>/dev/null | wc -l) results"
    grep -v -i -E 'nvjpeg2k|nvtiff|^Note: If using' $W/$1.err | tail -3
}
cells() {  # NAME: one line per result (ceilings: what the pipeline reached, drained, CPU use)
    python3 - $W/$1 <<'EOF'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/results/*.json")):
    r = json.load(open(f)); s = r["settings"]; t = r["telemetry"] or {}
    w = [round(x) for x in r.get("window_images_per_sec") or []]
    print(r["run_id"], r["status"], round(r["images_per_sec"] or 0), "img/s windows", w,
          "| decode", s.get("decode"), s.get("loader"), "workers", s.get("loader_workers"),
          "drained", s.get("drained_batches"), "read", s.get("images_read"), "errors",
          s.get("decode_errors"), "| decoders", s.get("decoders"), s.get("decoders_note") or "",
          "programs", s.get("resize_programs"), "| host CPU", t.get("host_cpu_cores"),
          "cores", s.get("cpu_cores"), (r["reason"] or "")[:300])
EOF
}
table() {  # NAME: the findings and the Input pipeline table of a campaign's report
    python3 -m compare report $W/$1 > /dev/null 2>&1
    cp $W/$1/report/report.md $out/$1.md 2>/dev/null
    sed -n '/^## What the numbers say/,/^## Images/p;/^## Input pipeline/,/^Decode other/p' \
        $W/$1/report/report.md 2>/dev/null | grep -v '^## Images' | head -60
}
keep() { tar czf $out/$1.tgz -C $W --exclude=code --exclude=work $1 $1.err; }
setup() {
    echo "== setup ($G GPUs, $(nproc) cores, --gpus $GPUS)"
    python3 -m pip install -q --no-index --find-links .whl $WHEELS 2>&1 | tail -2 \
        || python3 -m pip install -q --break-system-packages --no-index --find-links .whl $WHEELS
    python3 -c "import grain, nvidia.nvimgcodec as n; print('grain', grain.__version__, 'nvimgcodec', n.__version__)"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -m compare data make $D --images 8000 2>&1 | tail -1
    python3 -m compare data prepare $D --frameworks caffe2,jax 2>&1 | tail -2
    echo "setup done at $(( $(date +%s) - T0 )) s"
}
STUDY="--frameworks caffe2,jax --gpus $GPUS --precision fp16,bf16 --batch-size 256 --data synthetic,$D"
CELLS=$([ "$GPUS" = 1,2 ] && echo 16 || echo 8)  # frameworks x precisions x data x GPU counts
done_cells() { ls $W/$1/results 2>/dev/null | wc -l; }
resume() { [ -f $W/$1/campaign.json ] && echo --resume; }
body() {
case $stage in
main)
  setup
  echo "== probes: the hw path's crops against Pillow's (mean_abs ~0, ok true)"
  d0=$(ls -d $D/train/*/ | head -1)
  python3 bench/pipes_probe.py torch $d0 hw --batch 8
  python3 bench/pipes_probe.py jax $d0 hw --batch 8
  echo "== data-only ceilings (the loaders' buffers drained first: drained_batches)"
  one="--precision fp16 --batch-size 256 --steps 100 --warmup 10 --data $D --data-only"
  run ceilings --frameworks caffe2,jax --gpus 1 $one --option decode=hw
  run ceilings-cpu --frameworks caffe2,jax --gpus 1 $one --option decode=cpu
  if [ "$G" -ge 2 ]; then run ceilings-hw2 --frameworks jax --gpus 2 $one --option decode=hw
  else echo "ceilings-hw2: skipped, $G GPU here"; fi
  ceil=$(cd $W && ls -d ceilings ceilings-cpu ceilings-hw2 2>/dev/null)
  for c in $ceil; do cells $c; done
  tar czf $out/ceilings.tgz -C $W --exclude=code --exclude=work $ceil
  echo "== study: $STUDY, defaults ($(left) s left)"
  LIMIT="timeout -s TERM $(left)" run study $STUDY $(resume study)
  echo "study: $(done_cells study) of $CELLS cells"; cells study; table study; keep study ;;
cores)  # the study's rest, then its real cells with 8 cores per GPU; run again until both are done
  [ -d $W/study ] || { [ -f .pipes/study.tgz ] && tar xzf .pipes/study.tgz -C $W; }
  [ -d $D/.compare ] || setup
  if [ "$(done_cells study)" -lt $CELLS ]; then
    echo "== the study's remaining cells ($(done_cells study) of $CELLS done)"
    LIMIT="timeout -s TERM $(left)" run study $STUDY $(resume study)
    cells study; table study; keep study
  fi
  if [ "$(done_cells study)" -ge $CELLS ]; then
    echo "== the study's real cells, the job pinned to 8 cores per GPU; synthetic cells are the study's"
    [ -d $W/cores ] || { cp -r $W/study $W/cores && rm -f $W/cores/results/*-real-r0.json; }
    # compare packs the 1-GPU cells two at a time on 2 GPUs, each on its GPU's share of the cores
    # it may use: 8 per GPU of the 8 x GPUs that taskset leaves it
    PIN="taskset -c 0-$(( 8 * G - 1 ))" LIMIT="timeout -s TERM $(left)" \
        run cores $STUDY --resume
    echo "cores: $(done_cells cores) of $CELLS cells"; cells cores; table cores; keep cores
  else echo "cores: not started, the study is not complete: run this stage again"; fi ;;
*) echo "unknown stage $stage (main | cores)"; return 2 ;;
esac
echo "done at $(( $(date +%s) - T0 )) s"
}
body 2>&1 | tee -a $out/summary.txt  # everything printed comes back in summary.txt too
