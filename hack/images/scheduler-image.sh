#!/usr/bin/env bash
# make image: the scheduler image ($IMG) from ./Dockerfile. The base is
# PYTHON_BASE_IMAGE, by default python:3.11-slim-bookworm online and the
# Debian-built base of offline-images.sh with OFFLINE=1. Our wheel and those of
# our dependencies, at the versions and hashes of requirements/runtime.txt, are
# built here (pip), so `docker build` needs no network.
source "$(dirname "$0")/../lib/common.sh"
docker info >/dev/null 2>&1 || die "docker is not running: run make docker"
IMG=${IMG:-dynamic-scheduler:dev}
PY=${PY:-$REPO_ROOT/.venv/bin/python}
[[ -x $PY ]] || die "$PY not found: run make venv"

if [[ -z ${PYTHON_BASE_IMAGE:-} ]]; then
  if [[ ${OFFLINE:-0} == 1 ]]; then
    PYTHON_BASE_IMAGE=$(bash "$REPO_ROOT/hack/images/offline-images.sh" | sed -n 's/^PYTHON_BASE_IMAGE=//p')
  else
    PYTHON_BASE_IMAGE=python:3.11-slim-bookworm
  fi
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
log "building wheels"
# setuptools builds in ./build and never empties it: a module deleted since the last build
# would still be packed. Our wheel is built from scratch.
rm -rf "$REPO_ROOT/build"
# Ours apart from the dependencies (see the Dockerfile: their layer stays cached).
"$PY" -m pip wheel --quiet --disable-pip-version-check --require-hashes -w "$ctx/wheels/deps" \
  -r "$REPO_ROOT/requirements/runtime.txt" >"$ctx/pip.log" 2>&1 \
  || { tail -5 "$ctx/pip.log" >&2; die "pip wheel of requirements/runtime.txt failed (is PyPI reachable?)"; }
"$PY" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$ctx/wheels/ours" "$REPO_ROOT" >"$ctx/pip.log" 2>&1 \
  || { tail -5 "$ctx/pip.log" >&2; die "pip wheel of the scheduler failed"; }
cp "$REPO_ROOT/Dockerfile" "$ctx/"
log "building $IMG on $PYTHON_BASE_IMAGE"
DOCKER_BUILDKIT=0 docker build --quiet --build-arg "BASE_IMAGE=$PYTHON_BASE_IMAGE" -t "$IMG" "$ctx" >"$ctx/build.log" 2>&1 \
  || { tail -20 "$ctx/build.log" >&2; die "docker build of $IMG failed"; }
log "built $IMG ($(docker image inspect -f '{{.Size}}' "$IMG" | awk '{printf "%.0f MB", $1/1e6}'))"
