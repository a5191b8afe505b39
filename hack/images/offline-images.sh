#!/usr/bin/env bash
# The images the project needs besides the node image, built from Debian's
# packages so that nothing is pulled: the Python base of the scheduler image
# and Prometheus. Prints "NAME=reference" lines for the Makefile to use.
source "$(dirname "$0")/../lib/common.sh"
source "$REPO_ROOT/hack/lib/images.sh"
docker info >/dev/null 2>&1 || die "docker is not running: run make docker"

python_base=$(debian_image python "python3,python3-venv,ca-certificates" \
  'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' 'CMD ["python3"]')

# Debian's prometheus package brings its web UI's JavaScript libraries (over
# 200 MB); the recording rules and the query API need only the binary, which
# links libc alone. So the image is the binary and its loader on scratch.
prometheus_pkg=$(debian_image prometheus "prometheus")
version=$(docker run --rm --entrypoint dpkg-query "$prometheus_pkg" -W -f '${Version}' prometheus | cut -d+ -f1)
prometheus=$OFFLINE_REGISTRY/prometheus:v${version}-$(echo "$prometheus_pkg" | sed 's/.*-//')
if ! image_exists "$prometheus"; then
  ctx=$(mktemp -d)
  cid=$(docker create "$prometheus_pkg" /bin/true)
  mkdir -p "$ctx/root/bin" "$ctx/root/lib/x86_64-linux-gnu" "$ctx/root/lib64" "$ctx/root/prometheus"
  docker cp -L "$cid:/usr/bin/prometheus" "$ctx/root/bin/prometheus"
  docker cp -L "$cid:/lib/x86_64-linux-gnu/libc.so.6" "$ctx/root/lib/x86_64-linux-gnu/libc.so.6"
  docker cp -L "$cid:/lib64/ld-linux-x86-64.so.2" "$ctx/root/lib64/ld-linux-x86-64.so.2"
  docker rm "$cid" >/dev/null
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY root/ /
ENV PATH=/bin
USER 65534:65534
WORKDIR /prometheus
ENTRYPOINT ["/bin/prometheus"]
DOCKERFILE
  build_image "$prometheus" "$ctx"
  rm -rf "$ctx"
fi
echo "PYTHON_BASE_IMAGE=$python_base"
echo "PROMETHEUS_IMAGE=$prometheus"
