#!/usr/bin/env bash
# The images the selected e2e specs run, built with no registry under the exact
# names `e2e.test --list-images` prints, so that the nodes find them already
# loaded (their pods pull only if absent). Prints one image name a line.
#   - agnhost: the program built from the release (build.sh), on busybox for
#     a shell and the usual tools, with upstream's entrypoint (/agnhost, cmd
#     pause), ports, /uploads, the agnhost-2 link and the user
#     user-defined-in-image (1000) in group-defined-in-image (50000). It is not
#     upstream's image (no curl, dig, iperf, coredns, porter's certificates,
#     fake registry): enough for netexec and pause, which the scheduling specs
#     run. Every agnhost tag the binary lists gets this one image.
#   - busybox: Debian's busybox-static with its applets linked in /bin
#     (e2epod's default image).
# pause is not built here: the node image holds it (hack/images/node-image.sh).
source "$(dirname "$0")/../lib/common.sh"
source "$REPO_ROOT/hack/lib/images.sh"
source "$REPO_ROOT/hack/conformance/lib.sh"
docker info >/dev/null 2>&1 || die "docker is not running: run make docker"
[[ -f $E2E_DIR/.complete ]] || die "e2e.test is not built: run hack/conformance/build.sh"

mapfile -t listed < <("$E2E_BIN/e2e.test" --list-images 2>/dev/null)
(( ${#listed[@]} > 10 )) || die "e2e.test --list-images printed nothing"
pick() { printf '%s\n' "${listed[@]}" | grep -E "/e2e-test-images/$1:" || die "e2e.test --list-images names no $1 image"; }
mapfile -t agnhost_names < <(pick agnhost)
mapfile -t busybox_names < <(pick busybox)

# The images are keyed by what they are built from, so a rebuild happens only
# when the binaries or this recipe change.
key=$( (echo "$E2E_DIR"; cat "$0") | sha256sum | cut -c1-12)
busybox_base=$(debian_image busybox "busybox-static")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cid=$(docker create "$busybox_base" /bin/true)
docker cp "$cid:/bin/busybox" "$work/busybox" >/dev/null && docker rm "$cid" >/dev/null

busybox_img=$OFFLINE_REGISTRY/e2e-busybox:$key
if ! image_exists "$busybox_img"; then
  mkdir "$work/busybox-ctx"
  cp "$work/busybox" "$work/busybox-ctx/"
  cat >"$work/busybox-ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CMD ["sh"]
DOCKERFILE
  build_image "$busybox_img" "$work/busybox-ctx"
fi

agnhost_img=$OFFLINE_REGISTRY/e2e-agnhost:$key
if ! image_exists "$agnhost_img"; then
  ctx=$work/agnhost-ctx
  mkdir -p "$ctx/etc"
  cp "$E2E_BIN/agnhost" "$ctx/agnhost"
  printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' \
    'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' >"$ctx/etc/passwd"
  printf '%s\n' 'root:x:0:' 'user-defined-in-image:x:1000:' 'group-defined-in-image:x:50000:user-defined-in-image' \
    'nogroup:x:65534:' >"$ctx/etc/group"
  cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $busybox_img
COPY etc/ /etc/
COPY agnhost /agnhost
RUN ["/bin/ln", "-s", "agnhost", "/agnhost-2"]
RUN ["/bin/mkdir", "/uploads"]
EXPOSE 80 8080 8081 9376 5000
ENTRYPOINT ["/agnhost"]
CMD ["pause"]
DOCKERFILE
  build_image "$agnhost_img" "$ctx"
fi

for name in "${agnhost_names[@]}"; do docker tag "$agnhost_img" "$name"; done
for name in "${busybox_names[@]}"; do docker tag "$busybox_img" "$name"; done
log "e2e images built: ${agnhost_names[*]} ${busybox_names[*]}"
printf '%s\n' "${agnhost_names[@]}" "${busybox_names[@]}"
