#!/usr/bin/env bash
# make node-image: assemble a kind node image with no registry, following the
# steps of kind's node-image builder (kind build node-image) without its
# fetches:
#   1. a Debian root filesystem with what kind's base image installs, kind's
#      own base-image files (entrypoint, systemd units, containerd config) from
#      the pinned kind module, and the pinned containerd, runc, crictl and CNI
#      plugins (kind's base image);
#   2. kubelet, kubeadm, kubectl and /kind/version;
#   3. /kind/manifests/default-cni.yaml and default-storage.yaml;
#   4. every image kubeadm and the manifests ask for, imported into the node's
#      containerd (namespace k8s.io), as kind's builder does, then committed.
# Prints progress; prints the image reference last. The result is cached by a
# key over the tools and these scripts, in docker and as a tarball in the cache.
source "$(dirname "$0")/../lib/common.sh"
source "$REPO_ROOT/hack/lib/images.sh"

need docker "run make docker first"
docker info >/dev/null 2>&1 || die "docker is not running: run make docker"
[[ -f $TOOLS_DIR/.complete ]] || die "the pinned tools are not built: run make tools"
B=$TOOLS_BIN

node_key=$( (echo "$TOOLS_DIR"; cat "$REPO_ROOT"/hack/images/node-image.sh "$REPO_ROOT"/hack/lib/images.sh \
  "$REPO_ROOT"/hack/images/node/*) | sha256sum | cut -c1-12)
NODE_IMAGE=${NODE_IMAGE:-$OFFLINE_REGISTRY/kind-node:${KUBE_VERSION}-${node_key}}
node_tar=$IMAGES_CACHE/node/$(echo "$NODE_IMAGE" | tr '/:' '__').tar

if image_exists "$NODE_IMAGE"; then
  log "node image $NODE_IMAGE is up to date"
  echo "$NODE_IMAGE"; exit 0
fi
if [[ -s $node_tar ]]; then
  log "loading cached node image $NODE_IMAGE"
  docker load -i "$node_tar" >/dev/null || die "docker load of $node_tar failed: delete it and retry"
  echo "$NODE_IMAGE"; exit 0
fi
need_disk "$IMAGES_CACHE" 8
start=$SECONDS
work=$(mktemp -d)
builder=""
cleanup() { [[ -n $builder ]] && docker rm -f "$builder" >/dev/null 2>&1; rm -rf "$work"; }
trap cleanup EXIT

kind_dir=$(cd "$TOOLS_MOD_DIR" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
[[ -d $kind_dir/images/base/files ]] || die "kind's module source is missing from the Go module cache: run make tools"
kube_mod_dir=$(cd "$TOOLS_MOD_DIR" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' k8s.io/kubernetes)

# --- images the node must hold -------------------------------------------------
mapfile -t kubeadm_images < <("$B/kubeadm" config images list --kubernetes-version "$KUBE_VERSION" 2>/dev/null)
(( ${#kubeadm_images[@]} >= 6 )) || die "kubeadm config images list returned nothing: is $B/kubeadm broken?"
img_for() { printf '%s\n' "${kubeadm_images[@]}" | grep -m1 "/$1:" || die "kubeadm lists no $1 image"; }
sandbox_image=$(sed -n 's/^[[:space:]]*sandbox_image = "\(.*\)"/\1/p' "$kind_dir/images/base/files/etc/containerd/config.toml")
tag_suffix="${KUBE_VERSION}-${node_key}"
IMG_NODENET=$OFFLINE_REGISTRY/nodenet:$tag_suffix
IMG_PROVISIONER=$OFFLINE_REGISTRY/local-path-provisioner:$(cd "$TOOLS_MOD_DIR/local-path" && GOFLAGS=-mod=mod go list -m -f "{{.Version}}" github.com/rancher/local-path-provisioner)
IMG_HELPER=$OFFLINE_REGISTRY/local-path-helper:$tag_suffix

log "[1/5] base images"
netbase=$(debian_image netbase "iptables,iproute2,conntrack,ipset,kmod,ca-certificates" 'CMD ["/bin/bash"]')
busybox_base=$(debian_image busybox "busybox-static")

log "[2/5] component images: ${kubeadm_images[*]} $sandbox_image"
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  binary_image "$(img_for "$c")" "$B/$c" "/usr/local/bin/$c"
done
binary_image "$(img_for kube-proxy)" "$B/kube-proxy" /usr/local/bin/kube-proxy "$netbase"
binary_image "$(img_for etcd)" "$B/etcd" /usr/local/bin/etcd
binary_image "$(img_for coredns)" "$B/coredns" /coredns
binary_image "$IMG_NODENET" "$B/nodenet" /usr/local/bin/nodenet "$netbase"
binary_image "$IMG_PROVISIONER" "$B/local-path-provisioner" /usr/local/bin/local-path-provisioner

# pause, from the Kubernetes release's own source (build/pause/linux/pause.c).
need gcc "apt-get install gcc (builds the pause image from Kubernetes' pause.c)"
gcc -Os -Wall -Werror -static -DVERSION="${KUBE_VERSION}-offline" -o "$work/pause" "$kube_mod_dir/build/pause/linux/pause.c" \
  || die "building pause from $kube_mod_dir/build/pause/linux/pause.c failed (static glibc: apt-get install libc6-dev)"
strip "$work/pause" || true
pause_images=("$(img_for pause)")
[[ " ${pause_images[*]} " == *" $sandbox_image "* ]] || pause_images+=("$sandbox_image")
for p in "${pause_images[@]}"; do binary_image "$p" "$work/pause" /pause; done

# local-path's helper runs sh scripts: busybox, installed as /bin/sh etc.
mkdir -p "$work/helper"
cid=$(docker create "$busybox_base" /bin/true)
docker cp "$cid:/bin/busybox" "$work/helper/busybox" && docker rm "$cid" >/dev/null
cat >"$work/helper/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
ENV PATH=/bin
DOCKERFILE
build_image "$IMG_HELPER" "$work/helper"

preload=("${kubeadm_images[@]}" "$IMG_NODENET" "$IMG_PROVISIONER" "$IMG_HELPER")
[[ " ${preload[*]} " == *" $sandbox_image "* ]] || preload+=("$sandbox_image")

log "[3/5] node root filesystem"
nodebase=$(debian_image node "systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,e2fsprogs,bash,ca-certificates,curl,jq,procps,socat")
ctx=$work/node
mkdir -p "$ctx/bin" "$ctx/cni" "$ctx/manifests"
cp -r "$kind_dir/images/base/files" "$ctx/files"
chmod -R u+w "$ctx/files"
for b in containerd ctr containerd-shim-runc-v2 runc crictl kubelet kubeadm kubectl; do cp "$B/$b" "$ctx/bin/"; done
for b in ptp host-local loopback portmap; do cp "$B/$b" "$ctx/cni/"; done
sed -e "s#IMAGE_NODENET#$IMG_NODENET#g" "$REPO_ROOT/hack/images/node/default-cni.yaml" >"$ctx/manifests/default-cni.yaml"
sed -e "s#IMAGE_PROVISIONER#$IMG_PROVISIONER#g; s#IMAGE_HELPER#$IMG_HELPER#g" \
  "$REPO_ROOT/hack/images/node/default-storage.yaml" >"$ctx/manifests/default-storage.yaml"
echo "$KUBE_VERSION" >"$ctx/version"
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $nodebase
COPY files/ /
COPY bin/containerd bin/ctr bin/containerd-shim-runc-v2 bin/crictl /usr/local/bin/
COPY bin/runc /usr/local/sbin/runc
COPY cni/ /opt/cni/bin/
COPY bin/kubelet bin/kubeadm bin/kubectl /usr/bin/
COPY manifests/ /kind/manifests/
COPY version /kind/version
RUN chmod 0755 /usr/local/bin/* /kind/bin/* /usr/local/sbin/runc /opt/cni/bin/* /usr/bin/kubelet /usr/bin/kubeadm /usr/bin/kubectl \\
 && chmod 0755 /kind /kind/bin \\
 && find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete \\
 && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \\
          /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \\
          /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \\
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \\
 && ln -sf /usr/lib/systemd/systemd /sbin/init \\
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \\
 && systemctl mask systemd-binfmt.service \\
 && mkdir -p /etc/kubernetes/manifests /opt/cni/bin /etc/cni/net.d \\
 && ctr oci spec | jq '.hooks.createContainer[.hooks.createContainer|length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \\
      | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json \\
 && containerd --version && runc --version && kubelet --version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
DOCKERFILE
stage=$OFFLINE_REGISTRY/kind-node-stage:$tag_suffix
build_image "$stage" "$ctx"

log "[4/5] importing ${#preload[@]} images into the node's containerd"
builder=$(docker run -d --privileged --entrypoint=sleep --security-opt seccomp=unconfined "$stage" infinity) \
  || die "cannot start a privileged build container (see make docker)"
docker exec "$builder" sh -c 'mkdir -p /run/containerd && (containerd >/tmp/containerd.log 2>&1 &)'
for _ in $(seq 1 60); do docker exec "$builder" ctr version >/dev/null 2>&1 && break; sleep 0.5; done
docker exec "$builder" ctr version >/dev/null 2>&1 \
  || { docker exec "$builder" tail -5 /tmp/containerd.log >&2; die "containerd did not start in the build container"; }
for img in "${preload[@]}"; do
  docker save "$img" | docker exec -i "$builder" ctr -n k8s.io images import \
    --label io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null \
    || die "importing $img into the node image failed"
done
docker exec "$builder" ctr -n k8s.io images ls -q | sort >"$work/imported"
for img in "${preload[@]}"; do
  grep -qx "$img" "$work/imported" || grep -qx "docker.io/$img" "$work/imported" \
    || die "$img is missing from the node's containerd after import"
done
# Stop containerd so its database is closed cleanly before the commit. The
# build container's PID 1 (sleep) reaps nothing, so wait for the socket, not
# for the process (it stays a zombie).
docker exec "$builder" sh -c 'pkill containerd; for i in $(seq 1 100); do ctr version >/dev/null 2>&1 || break; sleep 0.2; done; rm -f /tmp/containerd.log'

log "[5/5] committing $NODE_IMAGE"
docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' "$builder" "$NODE_IMAGE" >/dev/null \
  || die "docker commit failed"
docker rm -f "$builder" >/dev/null; builder=""
docker rmi "$stage" >/dev/null 2>&1 || true
mkdir -p "$(dirname "$node_tar")"
docker save "$NODE_IMAGE" -o "$node_tar.partial" && mv "$node_tar.partial" "$node_tar"
log "node image built in $((SECONDS - start))s"
echo "$NODE_IMAGE"
