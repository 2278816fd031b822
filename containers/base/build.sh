#!/usr/bin/env bash
# Builds the Debian bookworm Python base image for machines that reach no container registry:
#
#   containers/base/build.sh [IMAGE]        # default IMAGE: compare/base:bookworm
#
# debootstrap (minbase + python3, python3-venv, python3-pip) from the Debian mirror apt already
# uses (read from /etc/apt/sources.list*; override with DEBIAN_MIRROR=URL), then `docker import`.
# About a minute. Needs root, debootstrap and a running Docker engine. The CPU Dockerfiles start
# from it: `compare images build --cpu --base-image compare/base:bookworm`.
# An image that already exists is kept (FORCE=1 rebuilds it).
set -euo pipefail

IMAGE="${1:-compare/base:bookworm}"
SUITE=bookworm

if [ "${FORCE:-0}" != "1" ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "$IMAGE exists (FORCE=1 rebuilds it)"
    exit 0
fi

mirror() {
    # deb822 files (URIs: ...) first, then one-line sources ("deb URL SUITE main"); skip security.
    local m
    m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' \
        | grep -v -- '-security' | grep -i debian | head -n1 || true)
    if [ -z "$m" ]; then
        m=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
            | awk '{print $2}' | grep -v -- '-security' | grep -i debian | head -n1 || true)
    fi
    echo "${m:-http://deb.debian.org/debian}"
}
MIRROR="${DEBIAN_MIRROR:-$(mirror)}"

command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install -y debootstrap" >&2; exit 1; }
ROOTFS=$(mktemp -d /tmp/compare-base.XXXXXX)
trap 'rm -rf "$ROOTFS"' EXIT

echo "debootstrap $SUITE from $MIRROR into $ROOTFS"
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip "$SUITE" "$ROOTFS" "$MIRROR"
# apt inside the image uses the same mirror; no package lists or caches kept
echo "deb $MIRROR $SUITE main" > "$ROOTFS/etc/apt/sources.list"
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/archives/*.deb

tar -C "$ROOTFS" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["python3"]' - "$IMAGE"
docker run --rm --network host "$IMAGE" python3 --version
echo "built $IMAGE"
