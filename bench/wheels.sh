#!/usr/bin/env bash
# The wheels the GPU bench scripts install on the device machine (no index there): fetched from
# PyPI into .whl/ (git-ignored) on this machine, for Python 3.12 on manylinux x86_64, as the
# device's Python is. Then carry them: run(command="bash bench/realdata_gpu.sh $OUT", carry=[".whl"]).
#   bash bench/wheels.sh [DIR]     # default .whl; ~36 MB, a few seconds
# nvImageCodec + nvJPEG: decode=hw (docs/data.md); Grain (+ the three it needs beyond what the
# device has): JAX's loader; py-spy: bench/realdata_gpu.sh's GIL stages.
set -euo pipefail
dir=${1:-.whl}
WHEELS="nvidia-nvimgcodec-cu13==0.9.0.20 nvidia-nvjpeg==13.3.2.43 grain==0.2.18 array_record==0.8.6
importlib_resources==7.1.0 portpicker==1.6.0 py-spy==0.4.3"
platforms=()
for p in manylinux2014_x86_64 manylinux_2_17_x86_64 manylinux_2_24_x86_64 manylinux_2_28_x86_64 \
         manylinux1_x86_64 manylinux_2_5_x86_64 any; do platforms+=(--platform "$p"); done
# shellcheck disable=SC2086  # WHEELS is a list of requirements
python3 -m pip download -q --only-binary=:all: --no-deps --python-version 3.12 "${platforms[@]}" \
    -d "$dir" $WHEELS 2>&1 | grep -v "^WARNING: Location" || true
n=$(ls "$dir"/*.whl 2>/dev/null | wc -l)
[ "$n" -ge 7 ] || { echo "bench/wheels.sh: $n wheels in $dir, 7 wanted" >&2; exit 1; }
du -sh "$dir"
