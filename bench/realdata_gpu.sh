#!/usr/bin/env bash
# Issue 36 on the one-GPU kind (1 H200, 16 cores): real data at synthetic speed, ONE device call
# of under 9 minutes, results under $OUT:
#   bash bench/realdata_gpu.sh $OUT          # main: probes, default mode, tuned, 8 cores
#   bash bench/realdata_gpu.sh $OUT more     # a second call if time is left: tuned synthetic
#        (tuned's data efficiency), tuned real at 8 cores, PyTorch fp16 with the engines alone
#   bash bench/realdata_gpu.sh $OUT jaxgil   # JAX's default cells, then one under py-spy --gil
#   bash bench/realdata_gpu.sh $OUT torchgil # the same for PyTorch
#   bash bench/realdata_gpu.sh $OUT conns    # fp16 cells at CUDA_DEVICE_MAX_CONNECTIONS 8 and 32
#   bash bench/realdata_gpu.sh $OUT jax8     # JAX synthetic and real, the job pinned to 8 cores
#   GPUS=1,2 (default 1): the cells' GPU counts, batch per GPU (issue 38 on two GPUs)
# carry: [".whl"] (bash bench/wheels.sh fills it), holding (Python 3.12, manylinux x86_64):
#   nvidia_nvimgcodec_cu13-0.9.0.20  nvidia_nvjpeg-13.3.2.43  grain-0.2.18 (+ array_record 0.8.6,
#   importlib_resources 7.1.0, portpicker 1.6.0)
# What it does, each stage as far as its deadline allows (a stage that would not fit is skipped
# and says so; every cell is its own process, a failed cell is a recorded result, the table is
# printed whatever happened):
# 1. setup: the wheels; 2,500 JPEGs of 500x375 in 100 classes (`compare data make`, in the
#    background) while the pixel probes run on 64 others: PyTorch and JAX decode=hw through the
#    C API, each batch split with 4 CPU decoders, against Pillow and against the engines alone;
# 2. default mode, batch 256: PyTorch and JAX, fp16 and bf16, synthetic and real (the target:
#    real / synthetic >= 0.95), every figure of one call;
# 3. --mode tuned --data DIR at batch 1024 (--batch-search 1024-1024: the batch every tuned cell
#    chose on this machine, no probe; target >= 7,000 img/s on real JPEGs);
# 4. the real cells of 2 with the job pinned to 8 cores (taskset; synthetic: those of 2);
# then the table: per framework, precision, mode and cores, synthetic, real, data efficiency,
# the split (CPU share, CPU and engines img/s), host CPU, decode errors, the feeder's ms per batch.
# What comes back: summary.txt (all of it), table.md, realdata.tgz (the campaigns), CAMPAIGN.md.
# A dry run of the plumbing on a CPU machine (no engines: decode falls back to cpu, recorded):
#   DEVICE=cpu KIND=cpu BATCH=4 TBATCH=4 IMAGES=40 RUNARGS="--image-size 32 --steps 2 --warmup 1" \
#   SKIP_PIP=1 PY_CAFFE2=... PY_JAX=... REALDATA_DEADLINE=300 bash bench/realdata_gpu.sh /tmp/dry
set -uo pipefail
out=${1:?outdir}; stage=${2:-main}
T0=$(date +%s); DEADLINE=${REALDATA_DEADLINE:-500}  # seconds after the start: the last cell ends
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# NVLink multicast off in every process we start (the machine's rule)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=/tmp/realdata-work D=/tmp/realdata-imagenet-like PROBE=/tmp/realdata-probe
P3=$(command -v python3)
PY_CAFFE2=${PY_CAFFE2:-$P3} PY_JAX=${PY_JAX:-$P3}  # the frameworks' interpreters (a path each)
DEVICE=${DEVICE:-cuda} KIND=${KIND:-hw} BATCH=${BATCH:-256} TBATCH=${TBATCH:-1024}
IMAGES=${IMAGES:-2500} RUNARGS=${RUNARGS:-}
mkdir -p $out $W
el() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( DEADLINE - $(el) )); }
fits() {  # SECONDS NAME: whether a stage of about SECONDS still fits before the deadline
    if [ "$(left)" -ge "$1" ]; then return 0; fi
    echo "$2: skipped, $(left) s left of the deadline, it needs about $1 s"; return 1
}
run() {  # NAME ARGS...: one campaign $W/NAME, cut at the deadline (the running cell is then lost);
    # a campaign already there (an earlier call on this warm machine) is resumed: its missing cells
    local t0=$(date +%s) limit=$(( $(left) > 10 ? $(left) : 10 ))
    local resume=$([ -f $W/$1/campaign.json ] && echo --resume)
    ${PIN:-} timeout -k 20 -s TERM $limit python3 -m compare run --executor local --device $DEVICE \
        --timeout 300 --python caffe2=$PY_CAFFE2 --python jax=$PY_JAX --gpus ${GPUS:-1} --steps 30 \
        --warmup 10 --results $W/$1 "${@:2}" $RUNARGS $resume >> $W/$1.out 2>> $W/$1.err
    echo "$1: exit $?, $(( $(date +%s) - t0 )) s, $(ls $W/$1/results 2>/dev/null | wc -l) results ($(el) s)"
    grep -v -i -E 'nvjpeg2k|nvtiff|^Note: If using' $W/$1.err | tail -3
}
setup() {
    echo "== setup ($(nproc) cores)"
    WHEELS="grain nvidia-nvimgcodec-cu13 nvidia-nvjpeg"
    [ -n "${SKIP_PIP:-}" ] || python3 -m pip install -q --no-index --find-links .whl $WHEELS 2>&1 | tail -2 \
        || python3 -m pip install -q --break-system-packages --no-index --find-links .whl $WHEELS
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tail -1
    $PY_CAFFE2 -c "import torch, importlib.metadata as m; print('torch', torch.__version__, 'nvimgcodec', m.version('nvidia-nvimgcodec-cu13'))"
    $PY_JAX -c "import jax, grain; print('jax', jax.__version__, 'grain', grain.__version__)"
    df -h /dev/shm | tail -1
    [ -d $PROBE/train ] || python3 -m compare data make $PROBE --images 64 --classes 4 2>&1 | tail -1
    [ -f $D/.compare/manifest.json ] || (python3 -m compare data make $D --images $IMAGES --classes 100 \
        > $W/make.log 2>&1; python3 -m compare data prepare $D --frameworks caffe2,jax >> $W/make.log 2>&1) &
    echo "== pixel probes: decode=hw through the C API, each batch split with 4 CPU decoders (ok: mean_abs < 3 against Pillow and against the engines alone)"
    timeout 120 $PY_CAFFE2 bench/pipes_probe.py torch $PROBE $KIND --api c --batch 64 --cpu-decoders 4 2>&1 \
        | grep -v -i -E 'nvjpeg2k|nvtiff' | tail -2 | cut -c1-900
    env $([ $DEVICE = cpu ] && echo JAX_PLATFORMS=cpu) timeout 120 $PY_JAX bench/pipes_probe.py \
        jax $PROBE $KIND --api c --batch 64 --cpu-decoders 4 2>&1 | grep -v -i -E 'nvjpeg2k|nvtiff' \
        | tail -2 | cut -c1-900
    wait
    tail -2 $W/make.log
    echo "setup done at $(el) s"
}
DEF="--batch-size $BATCH --data synthetic,$D"
TUNED="--mode tuned --batch-search $TBATCH-$TBATCH"
main() {
    setup
    [ -z "${SKIP_DEFAULT:-}" ] && fits 200 "default, 16 cores" && {  # SKIP_DEFAULT=1: the rest only
        run default-caffe2 --frameworks caffe2 --precision fp16,bf16 $DEF
        run default-jax --frameworks jax --precision fp16,bf16 $DEF; }
    fits 110 "tuned real, 16 cores" && run tuned-real --frameworks caffe2,jax --precision fp16 $TUNED --data $D
    fits 100 "default real, 8 cores" && PIN="taskset -c 0-7" run cores8 --frameworks caffe2,jax \
        --precision fp16,bf16 --batch-size $BATCH --data $D
    fits 60 "tuned synthetic" && run tuned-synthetic --frameworks caffe2,jax --precision fp16 $TUNED
}
more() {
    [ -f $D/.compare/manifest.json ] || setup
    fits 70 "tuned synthetic" && run tuned-synthetic --frameworks caffe2,jax --precision fp16 $TUNED
    fits 60 "tuned real, 8 cores" && PIN="taskset -c 0-7" run tuned-cores8 --frameworks caffe2,jax \
        --precision fp16 $TUNED --data $D
    fits 40 "PyTorch fp16, the engines alone" && run engines-alone --frameworks caffe2 \
        --precision fp16 --batch-size $BATCH --data $D --option cpu_share=0
    fits 40 "PyTorch fp16, CPU share 0.5" && run share-half --frameworks caffe2 \
        --precision fp16 --batch-size $BATCH --data $D --option cpu_share=0.5
}
jax8() {  # JAX at 8 cores (the deadline cut it in both earlier calls): synthetic and real cells
    # of one campaign, the job pinned to cores 0-7 (so the data efficiency is of the same cores)
    setup
    fits 150 "JAX, 8 cores" && PIN="taskset -c 0-7" run jax-cores8 --frameworks jax \
        --precision fp16,bf16 $DEF
}
gil() {  # FRAMEWORK: its default real and synthetic cells, then the real fp16 cell under py-spy,
    # sampling only the thread that holds the GIL (carry py-spy's wheel in .whl): which code of
    # which thread holds it while the step runs (jaxgil: JAX's, with its short driver calls keeping
    # the GIL, nvdecode.Stream.held; torchgil: PyTorch's, whose eager step needs the GIL for
    # every launch: an H100's profile, 2026-12-05, found the decode's GPU work no cost to the
    # step's kernels, so the suspect is the host)
    local fw=$1
    setup
    [ -z "${SKIP_DEFAULT:-}" ] && fits 150 "default $fw, 16 cores" && run default-$fw \
        --frameworks $fw --precision fp16,bf16 $DEF  # SKIP_DEFAULT=1: py-spy's cell only
    python3 -m pip install -q --no-index --find-links .whl py-spy 2>&1 | tail -1
    fits 70 "$fw fp16 real under py-spy" && {
        local t0=$(date +%s)
        timeout -k 20 -s TERM $(( $(left) > 10 ? $(left) : 10 )) py-spy record --gil --threads \
            --subprocesses --rate 200 --format raw --output $out/gil.txt -- python3 -m compare run \
            --executor local --device $DEVICE --timeout 300 --python caffe2=$PY_CAFFE2 \
            --python jax=$PY_JAX --gpus 1 --steps 30 --warmup 10 --results $W/gil-$fw \
            --frameworks $fw --precision fp16 --batch-size $BATCH --data $D > $W/gil-$fw.out \
            2> $W/gil-$fw.err
        echo "gil-$fw: exit $?, $(( $(date +%s) - t0 )) s ($(el) s)"; tail -3 $W/gil-$fw.err
        python3 bench/gil_share.py $out/gil.txt | head -40; }
}
conns() {  # CUDA_DEVICE_MAX_CONNECTIONS: the hardware queues CUDA maps streams onto (8 unless
    # set). nvImageCodec decodes on its own streams (128 created in an H100 profile of 12-05), so
    # the step's stream may share a queue with a decode stream whose head waits (on the JPEG
    # engines, a copy, an event): the step's next kernel then waits behind it. The same cells
    # at 8 (the default) and 32 (the most), fp16, real and synthetic in each campaign
    setup
    for fw in caffe2 jax; do for n in 8 32; do
        fits 75 "$fw at $n connections" && CUDA_DEVICE_MAX_CONNECTIONS=$n run conns-$fw-$n \
            --frameworks $fw --precision fp16 $DEF; done; done
}
body() {
    case $stage in
    main) main ;;
    more) more ;;
    jaxgil) gil jax ;;
    torchgil) gil caffe2 ;;
    conns) conns ;;
    jax8) jax8 ;;
    *) echo "unknown stage $stage (main | more | jaxgil | torchgil | conns | jax8)"; return 2 ;;
    esac
    echo "== cells"
    python3 bench/realdata_table.py $W --cells
    echo "== table (real / synthetic: the same call's figures; 8 cores: synthetic of 16)"
    python3 bench/realdata_table.py $W | tee $out/table.md
    for c in $(cd $W && ls -d */ 2>/dev/null | tr -d /); do
        python3 -m compare report $W/$c > /dev/null 2>&1 && cp $W/$c/report/report.md $out/$c.md
    done
    tar czf $out/realdata.tgz -C $W --exclude=code --exclude=work . 2>/dev/null
    echo "all done at $(el) s"
}
body 2>&1 | tee -a $out/summary.txt
