# The scheduler image. The base is a build argument: an official Python image
# online, the Debian-built one of hack/images/offline-images.sh offline. The
# wheels (ours and our dependencies) are built on the host by `make image`, so
# the build itself needs no network; they stay in the first stage only.
ARG BASE_IMAGE=python:3.11-slim-bookworm

# kubernetes/aio is the client's asyncio twin (42 MB of models that nothing here
# imports); without it the image loads into kind's nodes faster.
FROM ${BASE_IMAGE} AS install
COPY wheels/ /tmp/wheels/
RUN python3 -m venv /opt/dynamic-scheduler \
 && /opt/dynamic-scheduler/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels dynamic-scheduler \
 && /opt/dynamic-scheduler/bin/pip uninstall --yes --quiet pip setuptools \
 && rm -rf /opt/dynamic-scheduler/lib/python3*/site-packages/kubernetes/aio

FROM ${BASE_IMAGE}
COPY --from=install /opt/dynamic-scheduler /opt/dynamic-scheduler
ENV PATH=/opt/dynamic-scheduler/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN dynamic-scheduler --version
USER 65532:65532
ENTRYPOINT ["dynamic-scheduler"]
