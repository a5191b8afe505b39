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
#   - hostpathplugin (CONFORMANCE_SUITE=dra): the DRA test driver's proxy pod.
#     The driver itself runs inside e2e.test, which execs
#     `/hostpathplugin --endpoint=<socket> --proxy-endpoint=tcp://:<port>` in
#     the pod and connects to that port through a port-forward for every
#     connection the kubelet makes to the socket
#     (test/e2e/storage/drivers/proxy/portproxy.go). Upstream's image is
#     csi-driver-host-path in proxy mode; socat does the same job (the proxy's
#     own comment names it), so the stand-in is a Debian minbase (a shell, the
#     file tools the tests exec) with socat and a /hostpathplugin script.
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

hostpath_names=()
if [[ $CONFORMANCE_SUITE == dra ]]; then
  mapfile -t hostpath_names < <(printf '%s\n' "${listed[@]}" | grep -E '/sig-storage/hostpathplugin:') \
    || die "e2e.test --list-images names no hostpathplugin image"
  hostpath_base=$(debian_image hostpathplugin "socat")
  hostpath_img=$OFFLINE_REGISTRY/e2e-hostpathplugin:$key
  if ! image_exists "$hostpath_img"; then
    ctx=$work/hostpath-ctx
    mkdir -p "$ctx"
    cat >"$ctx/hostpathplugin" <<'SCRIPT'
#!/bin/sh
# csi-driver-host-path's proxy mode, as the DRA e2e tests use it: every connection to
# the socket of --endpoint is relayed to one connection accepted on --proxy-endpoint's port.
endpoint= port=
for arg in "$@"; do
  case $arg in
    --endpoint=*) endpoint=${arg#--endpoint=} ;;
    --proxy-endpoint=*) port=${arg##*:} ;;
  esac
done
endpoint=${endpoint#unix://}
[ -n "$endpoint" ] && [ -n "$port" ] || { echo "usage: hostpathplugin --endpoint=SOCKET --proxy-endpoint=tcp://:PORT" >&2; exit 2; }
mkdir -p "$(dirname "$endpoint")"
rm -f "$endpoint"
exec socat "UNIX-LISTEN:$endpoint,fork" "TCP-LISTEN:$port,reuseport"
SCRIPT
    chmod +x "$ctx/hostpathplugin"
    cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $hostpath_base
COPY hostpathplugin /hostpathplugin
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENTRYPOINT ["/hostpathplugin"]
DOCKERFILE
    build_image "$hostpath_img" "$ctx"
  fi
  for name in "${hostpath_names[@]}"; do docker tag "$hostpath_img" "$name"; done
fi

for name in "${agnhost_names[@]}"; do docker tag "$agnhost_img" "$name"; done
for name in "${busybox_names[@]}"; do docker tag "$busybox_img" "$name"; done
log "e2e images built: ${agnhost_names[*]} ${busybox_names[*]} ${hostpath_names[*]}"
printf '%s\n' "${agnhost_names[@]}" "${busybox_names[@]}"
if (( ${#hostpath_names[@]} )); then printf '%s\n' "${hostpath_names[@]}"; fi
