#!/usr/bin/env bash
# Builds Horovod 0.28.1 (PyPI sdist) into the new tf_horovod environment: TensorFlow ops, Gloo
# controller (no MPI needed), no PyTorch/MXNet. Run by compare/envs.py with VIRTUAL_ENV and PATH
# set to the environment. The built wheel is kept in $COMPARE_CACHE/wheels (default
# ~/.cache/compare/wheels), keyed by Horovod, TF and Python versions, so the next environment
# (or a container build) installs it in seconds instead of compiling for minutes.
set -euo pipefail

HOROVOD_VERSION=0.28.1
python="${VIRTUAL_ENV:?run inside the environment}/bin/python"
"$python" -m pip install wheel
# Horovod needs CMake >= 3.13; take it from PyPI where the machine has none.
if ! command -v cmake >/dev/null 2>&1; then
    "$python" -m pip install "cmake>=3.13,<4"
fi

tf_version=$("$python" -c "import tensorflow as tf; print(tf.__version__)")
py_tag=$("$python" -c "import sys; print('cp%d%d' % sys.version_info[:2])")
wheels="${COMPARE_CACHE:-$HOME/.cache/compare}/wheels/horovod-${HOROVOD_VERSION}-tf${tf_version}-${py_tag}"
if [ "${CUDA_HOME:-}" != "" ] && command -v nvcc >/dev/null 2>&1; then
    export HOROVOD_GPU_OPERATIONS=NCCL  # GPU allreduce; otherwise gradients go through the host
    wheels="${wheels}-nccl"
fi

if ! ls "$wheels"/horovod-*.whl >/dev/null 2>&1; then
    export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
    export HOROVOD_WITHOUT_MPI=1 HOROVOD_WITH_GLOO=1
    export MAKEFLAGS="-j${COMPARE_BUILD_JOBS:-$(nproc)}"  # Horovod's default -j8 swamps small machines
    build=$(mktemp -d)
    trap 'rm -rf "$build"' EXIT
    # no build isolation: the extension must compile against the TensorFlow installed here
    "$python" -m pip wheel --no-deps --no-build-isolation --no-binary horovod \
        "horovod==${HOROVOD_VERSION}" -w "$build"
    mkdir -p "$wheels"
    cp "$build"/horovod-*.whl "$wheels"/
fi
# with horovod's own run-time requirements (cloudpickle, psutil, pyyaml, packaging)
"$python" -m pip install "$wheels"/horovod-*.whl
"$python" -c "import horovod, horovod.tensorflow as hvd; assert hvd.gloo_built(), 'no gloo'; print('horovod', horovod.__version__, 'gloo', hvd.gloo_built())"
