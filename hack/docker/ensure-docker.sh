#!/usr/bin/env bash
# make docker: make `docker` work on this machine, or say exactly why it can't.
#
# Does nothing where `docker info` already works. Otherwise installs Debian's
# docker.io if dockerd is missing, and starts dockerd (through systemd when it
# runs, else in the background with its log in $DOCKERD_LOG). On hosts whose
# capability bounding set is incomplete (privileged containers would fail),
# registers hack/docker/runc-capfilter as dockerd's default runtime first.
source "$(dirname "$0")/../lib/common.sh"

DOCKERD_LOG=${DOCKERD_LOG:-/var/log/dockerd.log}
CAPFILTER=/usr/local/libexec/dynamic-scheduler/runc-capfilter
DAEMON_JSON=/etc/docker/daemon.json

if docker info >/dev/null 2>&1; then
  exit 0
fi

need docker "install Docker (https://docs.docker.com/engine/install/) or, on Debian, apt-get install docker.io"
SUDO=
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null 2>&1 || die "docker is not running and starting it needs root: start the Docker engine, or run as root"
  SUDO=sudo
fi

if ! command -v dockerd >/dev/null 2>&1; then
  need apt-get "dockerd is not installed and this is not a Debian-like system: install a Docker engine"
  log "installing Debian's docker.io"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io >/tmp/docker-install.log 2>&1 \
    || { tail -5 /tmp/docker-install.log >&2; die "apt-get install docker.io failed (log: /tmp/docker-install.log)"; }
fi

# Capabilities the kernel knows but this process may not hold.
last_cap=$(cat /proc/sys/kernel/cap_last_cap)
bnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
full=$(( (1 << (last_cap + 1)) - 1 ))
missing=$(( full & ~16#$bnd ))

want_json() {
  python3 - "$DAEMON_JSON" "$CAPFILTER" "$missing" <<'PY'
import json, os, sys
path, capfilter, missing = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = {}
if os.path.exists(path):
    with open(path) as f:
        cfg = json.load(f)
if missing:
    cfg.setdefault("runtimes", {})["capfilter"] = {"path": capfilter}
    cfg["default-runtime"] = "capfilter"
    # dockerd lowers its own oom_score_adj, which needs CAP_SYS_RESOURCE.
    if missing >> 24 & 1:
        cfg["oom-score-adjust"] = 0
print(json.dumps(cfg, indent=2, sort_keys=True))
PY
}

if (( missing )); then
  log "capability bounding set lacks $(printf '%#x' "$missing"): privileged containers go through runc-capfilter"
  $SUDO install -D -m 0755 "$REPO_ROOT/hack/docker/runc-capfilter" "$CAPFILTER"
fi
new_json=$(want_json) || die "cannot read $DAEMON_JSON: fix or remove it"
if [[ ! -f $DAEMON_JSON ]] || [[ $(cat "$DAEMON_JSON") != "$new_json" ]]; then
  $SUDO mkdir -p "$(dirname "$DAEMON_JSON")"
  printf '%s\n' "$new_json" | $SUDO tee "$DAEMON_JSON" >/dev/null
fi

if [[ $(ps -p 1 -o comm= 2>/dev/null) == systemd ]] && command -v systemctl >/dev/null 2>&1; then
  log "starting docker.service"
  $SUDO systemctl restart docker || die "systemctl restart docker failed: see journalctl -u docker"
else
  log "starting dockerd (log: $DOCKERD_LOG)"
  $SUDO sh -c "nohup setsid dockerd >>'$DOCKERD_LOG' 2>&1 </dev/null &"
fi

for _ in $(seq 1 120); do
  docker info >/dev/null 2>&1 && { log "docker is running ($(docker version -f '{{.Server.Version}}'))"; exit 0; }
  sleep 0.5
done
tail -5 "$DOCKERD_LOG" >&2 2>/dev/null || true
die "dockerd did not come up within 60s (log: $DOCKERD_LOG)"
