#!/usr/bin/env bash
# The images the project needs besides the node image, built from Debian's
# packages so that nothing is pulled: the Python base of the scheduler image
# and Prometheus. Prints "NAME=reference" lines for the Makefile to use.
source "$(dirname "$0")/../lib/common.sh"
source "$REPO_ROOT/hack/lib/images.sh"
docker info >/dev/null 2>&1 || die "docker is not running: run make docker"

python_base=$(debian_image python "python3,python3-venv,ca-certificates" \
  'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' 'CMD ["python3"]')
prometheus=$(debian_image prometheus "prometheus,ca-certificates" \
  'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' 'USER nobody' \
  'ENTRYPOINT ["/usr/bin/prometheus"]')
echo "PYTHON_BASE_IMAGE=$python_base"
echo "PROMETHEUS_IMAGE=$prometheus"
