#!/usr/bin/env bash
# Runs inside `docker build` of every CPU image (containers/Dockerfile.cpu), from the build
# context's build/ folder that `compare images build --cpu` assembles:
#   build/system-packages   Debian packages the framework needs (its registry entry), maybe none
#   build/requirements.txt  the pinned compare/requirements/<backend>-cpu.txt (managed-env pins)
#   build/setup.sh          compare/requirements/<backend>.setup.sh where the backend has one
#   build/ca.crt            --ca-bundle (a TLS-intercepting proxy's CA), empty without
# pip reads PIP_FIND_LINKS / PIP_NO_INDEX from the build args (--wheelhouse). Leaves /opt/venv.
set -euo pipefail
B=/tmp/build
need=$(cat "$B/system-packages")
if ! python3 -c "import venv, ensurepip" 2>/dev/null; then  # a base image without Python
    need="$need python3 python3-venv python3-pip ca-certificates"
fi
missing=""
for pkg in $need; do dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"; done
if [ -n "$missing" ]; then
    apt-get update
    apt-get install -y --no-install-recommends $missing
    rm -rf /var/lib/apt/lists/*
fi
if [ -s "$B/ca.crt" ]; then export PIP_CERT="$B/ca.crt"; fi
export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=180
python3 -m venv /opt/venv
export VIRTUAL_ENV=/opt/venv PATH="/opt/venv/bin:$PATH"
pip install -r "$B/requirements.txt"
if [ -f "$B/setup.sh" ]; then
    export COMPARE_CACHE=/tmp/compare-cache
    hvd=$(sed -n 's/^HOROVOD_VERSION=//p' "$B/setup.sh")
    if [ -n "$hvd" ]; then
        # a prebuilt Horovod wheel (wheelhouse) goes where setup.sh looks for it: no compiling
        key=$(python -c "import sys, tensorflow as tf; print('horovod-$hvd-tf%s-cp%d%d' % ((tf.__version__,) + sys.version_info[:2]))" 2>/dev/null)
        if ! pip download -q --no-deps --only-binary :all: "horovod==$hvd" -d "$COMPARE_CACHE/wheels/$key"; then
            echo "no prebuilt Horovod $hvd wheel: setup.sh compiles it (needs g++)"
            apt-get update && apt-get install -y --no-install-recommends g++ make
        fi
    fi
    bash "$B/setup.sh"
fi
rm -rf /tmp/compare-cache "$B" /root/.cache
pip list --format=freeze > /opt/venv/frozen-requirements.txt
