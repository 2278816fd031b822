#!/usr/bin/env bash
# Issue 22: where decode=hw's loss beside training comes from, and the C API that removes most of
# it (BENCHMARKS.md "Where decode=hw's loss comes from"). One-GPU kind (16 cores), the repository
# on PYTHONPATH, the wheels of nvImageCodec, nvJPEG and Grain (with Grain's dependencies, not
# numpy) in .whl/ (carry: [".whl"]). Each stage fits one 10-minute device call:
#   bash bench/feeder_gpu.sh $OUT torch   # PyTorch through nvImageCodec's Python binding
#   bash bench/feeder_gpu.sh $OUT jax     #   (nvimgcodec_api=python): fp16,bf16 synthetic and real
#        with switch_interval_ms=0.5 and feeder_priority=high; fp16 real with Python's 5 ms and a
#        normal-priority stream (what ran before both options); fp16 real with 0.2 ms
#   bash bench/feeder_gpu.sh $OUT capi    # the defaults (nvimgcodec_api=c): PyTorch and JAX fp16,bf16
#        synthetic and real, fp16 real through the Python binding beside them; then
#        bench/feed_contention.py with the step as one CUDA graph, C API against the binding
# Each stage makes 4,000 JPEGs (compare data make). What comes back: OUT/<campaign>.md (reports),
# OUT/feeder-<stage>.tgz (the campaigns).
set -uo pipefail
out=${1:?outdir}; stage=${2:?stage: torch, jax or capi}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# NVLink multicast off in every process we start (the machine's rule)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s); W=/tmp/feeder-work D=/tmp/feeder-imagenet-like
P3=$(command -v python3)
mkdir -p $out $W
python3 -m pip install -q --no-index --find-links .whl grain nvidia-nvimgcodec-cu13 nvidia-nvjpeg 2>&1 | tail -1
python3 -m compare data make $D --images 4000 --classes 100 2>&1 | tail -1
python3 -m compare data prepare $D --frameworks caffe2,jax 2>&1 | tail -1
echo "setup $(( $(date +%s) - T0 )) s ($(nproc) cores)"
run() {  # FRAMEWORK NAME ARGS...
    local t0=$(date +%s)
    python3 -m compare run --executor local --device cuda --timeout 300 --python $1=$P3 \
        --frameworks $1 --gpus 1 --batch-size 256 --steps 30 --warmup 10 --results $W/$2 \
        "${@:3}" > $W/$2.out 2> $W/$2.err
    echo "$2: exit $?, $(( $(date +%s) - t0 )) s"
    python3 - $W/$2 <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/results/*.json")):
    r = json.load(open(f)); s = r["settings"]; t = r["telemetry"] or {}
    print("  ", r["run_id"], r["status"], round(r["images_per_sec"] or 0, 2), "img/s | decode",
          s.get("decode"), "api", s.get("nvimgcodec_api"), "switch", s.get("switch_interval_ms"),
          "priority", s.get("feeder_priority"), "errors", s.get("decode_errors"), "| host CPU",
          t.get("host_cpu_cores"), (r["reason"] or "")[:300])
PY
    python3 -m compare report $W/$2 > /dev/null 2>&1 && cp $W/$2/report/report.md $out/$2.md
}
PY_API="--option nvimgcodec_api=python"
case $stage in
torch|jax)
    fw=$([ "$stage" = torch ] && echo caffe2 || echo jax)
    run $fw $stage-defaults --precision fp16,bf16 --data synthetic,$D $PY_API
    run $fw $stage-before --precision fp16 --data $D $PY_API --option switch_interval_ms=5 \
        --option feeder_priority=normal
    run $fw $stage-switch02 --precision fp16 --data $D $PY_API --option switch_interval_ms=0.2 ;;
capi)
    for fw in caffe2 jax; do
        run $fw capi-$fw --precision fp16,bf16 --data synthetic,$D
        run $fw binding-$fw --precision fp16 --data $D $PY_API
    done
    for api in "" _py; do
        echo "== step as one CUDA graph, decode through the $([ -n "$api" ] && echo Python binding || echo C API)"
        timeout 120 python3 bench/feed_contention.py $D --cuda-graphs --steps 60 \
            --modes alone,decode$api,thread$api 2>&1 | grep -v -i 'nvjpeg2k\|nvtiff\|went wrong'
    done ;;
*) echo "unknown stage $stage: torch, jax or capi" >&2; exit 2 ;;
esac
tar czf $out/feeder-$stage.tgz -C $W --exclude=code --exclude=work .
echo "all $(( $(date +%s) - T0 )) s"
