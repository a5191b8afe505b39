# The scheduler image. The base is a build argument: an official Python image
# online, the Debian-built one of hack/images/offline-images.sh offline. The
# wheels (ours in wheels/ours, our dependencies in wheels/deps) are built on the
# host by `make image`, so the build itself needs no network.
#
# Dependencies and our package are installed in separate stages: the
# dependencies' wheels are the same from one build to the next, so docker's
# cache keeps their layer and a rebuild only installs our own wheel again.
# pip runs from a venv of its own (--python): the scheduler's venv has no pip.
ARG BASE_IMAGE=python:3.11-slim-bookworm

# kubernetes/aio is the client's asyncio twin (42 MB of models that nothing here
# imports); without it the image loads into kind's nodes faster.
FROM ${BASE_IMAGE} AS deps
RUN python3 -m venv /opt/pip && python3 -m venv --without-pip /opt/dynamic-scheduler
COPY wheels/deps/ /tmp/deps/
RUN /opt/pip/bin/pip --python /opt/dynamic-scheduler/bin/python install --quiet --no-cache-dir --no-index \
      --disable-pip-version-check --root-user-action=ignore /tmp/deps/*.whl \
 && rm -rf /opt/dynamic-scheduler/lib/python3*/site-packages/kubernetes/aio

FROM deps AS ours
COPY wheels/ours/ /tmp/ours/
RUN /opt/pip/bin/pip --python /opt/dynamic-scheduler/bin/python install --quiet --no-cache-dir --no-index \
      --disable-pip-version-check --root-user-action=ignore --no-deps --root /tmp/root /tmp/ours/*.whl

FROM ${BASE_IMAGE}
COPY --from=deps /opt/dynamic-scheduler /opt/dynamic-scheduler
COPY --from=ours /tmp/root/ /
ENV PATH=/opt/dynamic-scheduler/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN dynamic-scheduler --version
USER 65532:65532
ENTRYPOINT ["dynamic-scheduler"]
