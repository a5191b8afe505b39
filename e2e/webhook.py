"""The webhooks of ``tests/webhook.py`` (bindings refused, writes recorded) for a kind cluster.

kube-apiserver runs in the control-plane node's container, on the docker
network of the cluster; this machine is that network's gateway, so the
webhook listens there, with a self-signed certificate for that address (its
own CA bundle). The address is read from the node's default route.
"""

from __future__ import annotations

from collections.abc import Callable

from kubernetes import client

from e2e.nodes import docker_exec
from scheduler.serving.tls import self_signed_certificate
from tests.webhook import BindingWebhook, Refusal, WebhookTLS, WriteWebhook


def host_address(node: str) -> str:
    """This machine's address as the kind node reaches it: the gateway of its default route."""
    words = docker_exec(node, "ip", "-4", "route", "show", "default").stdout.split()
    if "via" not in words:
        raise AssertionError(f"no default route in kind node {node}: {' '.join(words)!r}")
    return words[words.index("via") + 1]


def kind_binding_webhook(
    api: client.ApiClient, namespace: str, control_plane: str, decide: Callable[[str, str], Refusal | None]
) -> BindingWebhook:
    """A webhook on this machine that ``control_plane``'s kube-apiserver calls for the
    namespace's bindings; ``decide(pod, node)`` refuses or allows each."""
    return BindingWebhook(api, namespace, decide, gateway_tls(control_plane))


def kind_write_webhook(api: client.ApiClient, namespace: str, control_plane: str, user: str) -> WriteWebhook:
    """A webhook on this machine that ``control_plane``'s kube-apiserver calls for every write
    of ``user``: each is recorded and refused (the probe lives in ``namespace``)."""
    return WriteWebhook(api, namespace, user, gateway_tls(control_plane))


def gateway_tls(control_plane: str) -> WebhookTLS:
    """Listening on the docker network's gateway, with a self-signed certificate for it."""
    address = host_address(control_plane)
    cert, key = self_signed_certificate([address])
    return WebhookTLS(address, cert, key, cert)
