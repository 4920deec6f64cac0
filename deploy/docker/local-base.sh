#!/bin/sh
# Build a Debian bookworm base image locally, for machines that cannot pull one (`make image`):
# debootstrap (minbase: no python) from the configured Debian mirror, imported with `podman import`.
# Usage: deploy/docker/local-base.sh IMAGE_NAME [WORK_DIR]
# Elsewhere, build the Dockerfile against python:3.11-slim-bookworm (its default BASE_IMAGE) instead.
set -eu

image=${1:?usage: local-base.sh IMAGE_NAME [WORK_DIR]}
work=${2:-/var/tmp/chatops-base}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${DEBIAN_SUITE:-bookworm}

if podman image exists "$image"; then
    echo "local-base: $image already exists (podman rmi $image to rebuild it)"
    exit 0
fi
rm -rf "$work"
mkdir -p "$work"
echo "local-base: debootstrap --variant=minbase $suite from $mirror into $work"
debootstrap --variant=minbase --include=ca-certificates "$suite" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log"; exit 1; }
# Like the official slim images: no apt lists, no docs or man pages, no caches.
rm -rf "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/cache/apt/"*.bin \
    "$work/rootfs/usr/share/doc/"* "$work/rootfs/usr/share/man/"* "$work/rootfs/tmp/"*
# The mirror this machine uses, so `apt-get update` inside the build reaches it.
printf 'deb %s %s main\ndeb %s %s-updates main\n' "$mirror" "$suite" "$mirror" "$suite" \
    >"$work/rootfs/etc/apt/sources.list"
tar -C "$work/rootfs" --numeric-owner -cf - . \
    | podman import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$image" >/dev/null
rm -rf "$work"
echo "local-base: imported $image ($(podman image inspect --format '{{.Size}}' "$image") bytes)"
