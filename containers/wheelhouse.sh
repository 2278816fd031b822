#!/usr/bin/env bash
# Fills a wheelhouse with every wheel the CPU images install, for fast and air-gapped builds:
#
#   containers/wheelhouse.sh [DIR]    # default DIR: ${COMPARE_CACHE:-~/.cache/compare}/wheelhouse
#   compare images build --cpu --wheelhouse DIR
#
# The same pinned files as the managed environments (compare/requirements/<backend>-cpu.txt),
# resolved for this machine's Python (run it with the Python the images have: 3.11 on bookworm),
# plus the Horovod wheel compare/requirements/tf_horovod.setup.sh built and cached (if any) with
# its run-time dependencies, and what that script installs (wheel, cmake). pip's own cache and
# find-links (PIP_FIND_LINKS) are used, so a second run downloads nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${COMPARE_CACHE:-$HOME/.cache/compare}"
DIR="${1:-$CACHE/wheelhouse}"
PY="${PYTHON:-python3}"
mkdir -p "$DIR"
download() { "$PY" -m pip download -q --only-binary :all: -d "$DIR" "$@"; }
for pins in compare/requirements/*-cpu.txt; do  # every framework's CPU pins
    download -r "$pins"
done
download wheel "cmake>=3.13,<4"
for whl in "$CACHE"/wheels/horovod-*/horovod-*.whl; do
    [ -e "$whl" ] || continue
    cp -n "$whl" "$DIR"/
    download "$whl"
done
echo "wheelhouse $DIR: $(ls "$DIR" | wc -l) wheels, $(du -sh "$DIR" | cut -f1)"
