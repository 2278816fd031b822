#!/usr/bin/env bash
# Issue 22 on the one-GPU kind: JAX with hardware JPEG decode against synthetic data, one short study.
# Carry the wheels: run(command="bash bench/jax_hwdecode_gpu.sh", carry=[".whl"]); writes $OUT/study*.
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --find-links .whl grain nvidia-nvimgcodec-cu13 nvidia-nvjpeg 2>&1 | tail -1
D=/tmp/d; python3 -m compare data make $D --images 3000 2>&1 | tail -1; python3 -m compare data prepare $D --frameworks jax 2>&1 | tail -1; echo "setup $(el) s"
P3=$(command -v python3); C="python3 -m compare run --executor local --device cuda --python jax=$P3 --frameworks jax --batch-size 256"
timeout -s TERM $(( 250 - $(el) )) $C --precision fp16 --steps 30 --warmup 10 --data synthetic,$D --results $OUT/study > $OUT/study.md 2> $OUT/study.err; echo "study $(el) s"
python3 - $OUT/study <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/results/*.json")):
    r = json.load(open(f)); s = r["settings"]; t = r["telemetry"] or {}
    print(r["run_id"], r["status"], round(r["images_per_sec"] or 0), [round(x) for x in r.get("window_images_per_sec") or []], s.get("decode"), s.get("loader"), "drained", s.get("drained_batches"), "read", s.get("images_read"), "hostCPU", t.get("host_cpu_cores"), (r["reason"] or "")[:300])
PY
grep -B2 -A8 "efficiency" $OUT/study.md | cut -c1-220 | head -30; tail -5 $OUT/study.err
