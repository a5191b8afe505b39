#!/usr/bin/env bash
# Rewrites the replace block of hack/tools/go.mod so that every k8s.io staging
# module that k8s.io/kubernetes@$KUBE_VERSION replaces with ./staging/src/...
# points at its published v0.N.P release instead. The list comes from the
# release's own go.mod, so a Kubernetes bump is: edit KUBE_VERSION, run this.
#
#   hack/tools/gen-k8s-replaces.sh v1.37.0
set -o errexit -o nounset -o pipefail

version=${1:?usage: $0 vX.Y.Z (the k8s.io/kubernetes release)}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "error: '$version' is not a release like v1.37.0" >&2; exit 2; }
staging="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

gomod=$(go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -n $gomod && -f $gomod ]] || { echo "error: could not download k8s.io/kubernetes@${version}" >&2; exit 1; }

mods=$(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/k8s\.io/[a-z0-9-]*$#\1#p' "$gomod" | sort -u)
[[ -n $mods ]] || { echo "error: no staging replaces found in $gomod" >&2; exit 1; }

args=()
for m in $mods; do
  args+=("-replace=${m}=${m}@${staging}")
done
go mod edit "${args[@]}"
echo "replaced $(wc -w <<<"$mods") staging modules with ${staging}" >&2
