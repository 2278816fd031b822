#!/usr/bin/env bash
# Builds Horovod 0.28.1 (PyPI sdist) into the new tf_horovod environment: TensorFlow ops, Gloo
# controller (no MPI needed), no PyTorch/MXNet; with NCCL (GPU all-reduce) whenever TensorFlow is
# a CUDA build and a CUDA toolkit is found. Run by compare/envs.py with VIRTUAL_ENV and PATH set
# to the environment; its last line says which Horovod it produced (in the environment's .log).
# The built wheel is kept in $COMPARE_CACHE/wheels (default ~/.cache/compare/wheels), keyed by
# Horovod, TF and Python versions and the GPU build, so the next environment (or a container
# build) installs it in seconds instead of compiling for minutes.
#
# `tensorflow[and-cuda]` brings CUDA *runtime* wheels so that hosts need no CUDA toolkit; Horovod's
# NCCL build needs one (nvcc, CUDA headers). Without it Horovod averages GPU gradients through
# host memory over gloo: the script then says so, and the backend runs MirroredStrategy on GPUs
# instead (docs/tf_horovod.md). COMPARE_HOROVOD_NCCL=require makes that an error; =off builds
# without NCCL even where a toolkit is found (e.g. when its NCCL build fails).
# COMPARE_HOROVOD_PLAN_ONLY=1 prints the plan and stops before building (tests use it).
set -euo pipefail

HOROVOD_VERSION=0.28.1
python="${VIRTUAL_ENV:?run inside the environment}/bin/python"
say() { echo "compare: $*"; }

info=$("$python" -c "import sys, tensorflow as tf; print(tf.__version__, int(tf.test.is_built_with_cuda()), 'cp%d%d' % sys.version_info[:2])")
read -r tf_version tf_cuda py_tag <<<"$info"

cuda_toolkit() {  # a CUDA toolkit with nvcc: $CUDA_HOME, else the one nvcc on PATH belongs to
    local nvcc
    if [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then echo "$CUDA_HOME"; return; fi
    if nvcc=$(command -v nvcc); then dirname "$(dirname "$(readlink -f "$nvcc")")"; fi
}

nccl_wheel() {  # the nvidia-nccl wheel tensorflow[and-cuda] installs: include/nccl.h, lib/libnccl.so.2
    "$python" -c "import nvidia.nccl as n; print(list(n.__path__)[0])" 2>/dev/null || true
}

wheels="${COMPARE_CACHE:-$HOME/.cache/compare}/wheels/horovod-${HOROVOD_VERSION}-tf${tf_version}-${py_tag}"
gpu_ops="none"
say "TensorFlow ${tf_version}, CUDA build: $([ "$tf_cuda" = 1 ] && echo yes || echo no)"
if [ "$tf_cuda" = 1 ]; then
    toolkit=$(cuda_toolkit)
    [ "${COMPARE_HOROVOD_NCCL:-}" = off ] && toolkit=""  # asked for: no NCCL (warned below)
    if [ -n "$toolkit" ]; then
        gpu_ops="NCCL"
        export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_CUDA_HOME="$toolkit"
        nccl="${HOROVOD_NCCL_HOME:-}"
        if [ -z "$nccl" ] && [ ! -e "$toolkit/include/nccl.h" ] && [ ! -e /usr/include/nccl.h ]; then
            nccl=$(nccl_wheel)
        fi
        say "Horovod GPU all-reduce: NCCL (CUDA toolkit ${toolkit}, NCCL ${nccl:-from the toolkit/system})"
        wheels="${wheels}-nccl"
    else
        say "WARNING: TensorFlow is a CUDA build, but no CUDA toolkit (nvcc) was found in" \
            "CUDA_HOME or on PATH (or COMPARE_HOROVOD_NCCL=off): Horovod is built" \
            "WITHOUT NCCL and would average GPU gradients through host memory; runs on cuda use" \
            "MirroredStrategy instead. Set CUDA_HOME to a CUDA toolkit matching TensorFlow's to" \
            "get NCCL, or use the NGC image."
        if [ "${COMPARE_HOROVOD_NCCL:-}" = require ]; then
            say "COMPARE_HOROVOD_NCCL=require: stopping"; exit 1
        fi
        wheels="${wheels}-cudatf"
    fi
fi
if [ "${COMPARE_HOROVOD_PLAN_ONLY:-}" = 1 ]; then
    say "plan: gpu_operations=${gpu_ops} wheels=${wheels}"; exit 0
fi

"$python" -m pip install wheel
# Horovod needs CMake >= 3.13; take it from PyPI where the machine has none.
if ! command -v cmake >/dev/null 2>&1; then
    "$python" -m pip install "cmake>=3.13,<4"
fi

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
if [ "$gpu_ops" = NCCL ] && [ -n "${nccl:-}" ] && [ -z "${HOROVOD_NCCL_HOME:-}" ]; then
    # the wheel ships libnccl.so.2 only; the linker looks for libnccl.so. At run time TensorFlow
    # has already loaded libnccl.so.2 from the same wheel, which satisfies Horovod's library.
    mkdir -p "$build/nccl-lib"
    ln -s "$nccl/lib/libnccl.so.2" "$build/nccl-lib/libnccl.so"
    export HOROVOD_NCCL_INCLUDE="$nccl/include" HOROVOD_NCCL_LIB="$build/nccl-lib" HOROVOD_NCCL_LINK=SHARED
fi
if ! ls "$wheels"/horovod-*.whl >/dev/null 2>&1; then
    export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
    export HOROVOD_WITHOUT_MPI=1 HOROVOD_WITH_GLOO=1
    export MAKEFLAGS="-j${COMPARE_BUILD_JOBS:-$(nproc)}"  # Horovod's default -j8 swamps small machines
    # no build isolation: the extension must compile against the TensorFlow installed here
    "$python" -m pip wheel --no-deps --no-build-isolation --no-binary horovod \
        "horovod==${HOROVOD_VERSION}" -w "$build"
    mkdir -p "$wheels"
    cp "$build"/horovod-*.whl "$wheels"/
fi
# with horovod's own run-time requirements (cloudpickle, psutil, pyyaml, packaging)
"$python" -m pip install "$wheels"/horovod-*.whl
# which Horovod this is: the backend records the same (settings.horovod_build) on every run
"$python" -c "
import horovod, horovod.tensorflow as hvd
built = {k: bool(getattr(hvd, k + '_built')()) for k in ('gloo', 'mpi', 'nccl', 'cuda')}
assert built['gloo'], 'horovod was built without gloo'
print('compare: built horovod', horovod.__version__, 'for tensorflow', '${tf_version}:',
      ', '.join('{}={}'.format(k, v) for k, v in built.items()))
if ${tf_cuda} and not built['nccl']:
    print('compare: WARNING: this Horovod has no NCCL: runs on cuda use MirroredStrategy instead')
"
