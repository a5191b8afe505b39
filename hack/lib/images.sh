# shellcheck shell=bash
# Helpers to build container images with no registry: Debian root filesystems
# from Debian's mirror (mmdebstrap), imported into docker, and small images
# around the pinned binaries. Source after common.sh.

DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Offline images are named under this registry host, which is never contacted:
# the images only ever come from the local docker and kind's image loading.
OFFLINE_REGISTRY=${OFFLINE_REGISTRY:-dynamic-scheduler.local}
IMAGES_CACHE=$CACHE_ROOT/images
# What dpkg leaves out of every root filesystem: documentation, manual pages and
# translations (the copyright files and locale.alias stay). dpkg's patterns are
# globs without braces, so one option per directory. Part of the cache key.
DEBIAN_DPKG_OPTS=(
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias'
)

# image_exists REF
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# debian_image NAME PKG,PKG,... [--changes...]: a docker image of a Debian
# $DEBIAN_SUITE minbase with those packages, tagged by what it contains. The
# rootfs tarball is cached, so a lost docker image is re-imported, not rebuilt.
# Prints the image reference.
debian_image() {
  local name=$1 packages=$2; shift 2
  local key tag tarball
  key=$(printf '%s\n' "$DEBIAN_SUITE" "$packages" "$@" "${DEBIAN_DPKG_OPTS[@]}" | sha256sum | cut -c1-12)
  tag="$OFFLINE_REGISTRY/debian-$name:$DEBIAN_SUITE-$key"
  if image_exists "$tag"; then echo "$tag"; return; fi
  tarball=$IMAGES_CACHE/rootfs/$name-$DEBIAN_SUITE-$key.tar
  if [[ ! -s $tarball ]]; then
    need mmdebstrap "apt-get install mmdebstrap (it builds the Debian root filesystems of the offline images)"
    mkdir -p "$(dirname "$tarball")"
    log "building Debian $DEBIAN_SUITE root filesystem '$name' ($packages)"
    mmdebstrap --variant=minbase --mode=root --format=tar --include="$packages" \
      "${DEBIAN_DPKG_OPTS[@]}" \
      --aptopt='APT::Install-Recommends "false"' \
      "$DEBIAN_SUITE" "$tarball.partial" "$DEBIAN_MIRROR" >"$tarball.log" 2>&1 \
      || { tail -5 "$tarball.log" >&2; die "mmdebstrap of '$name' failed (log: $tarball.log)"; }
    mv "$tarball.partial" "$tarball"
  fi
  local changes=()
  for c in "$@"; do changes+=(--change "$c"); done
  docker import "${changes[@]}" "$tarball" "$tag" >/dev/null || die "docker import of $tarball failed"
  echo "$tag"
}

# build_image TAG CONTEXT_DIR: docker build (the classic builder needs no
# registry when every FROM is local or scratch).
build_image() {
  local tag=$1 ctx=$2
  DOCKER_BUILDKIT=0 docker build --quiet --pull=false -t "$tag" "$ctx" >/dev/null 2>"$ctx/.build.log" \
    || { tail -20 "$ctx/.build.log" >&2; die "docker build of $tag failed"; }
}

# binary_image TAG BINARY_PATH IN_IMAGE_PATH [BASE]: an image that holds one
# pinned binary, with PATH set so static pods can run it by name.
binary_image() {
  local tag=$1 bin=$2 dest=$3 base=${4:-scratch}
  local ctx
  ctx=$(mktemp -d)
  cp "$bin" "$ctx/$(basename "$dest")"
  cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $base
COPY $(basename "$dest") $dest
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENTRYPOINT ["$dest"]
DOCKERFILE
  build_image "$tag" "$ctx"
  rm -rf "$ctx"
}
