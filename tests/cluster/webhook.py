"""The binding webhook for the private kube-apiserver: scripted refusals, then allowed.

Answers the first bindings of the namespace with the scripted codes, in
order, and allows the rest (``tests/webhook.py`` does the serving and the
registration; the test CA signs its certificate, loopback is its address).
"""

from __future__ import annotations

from kubernetes.client import ApiClient

from tests.apiserver import ControlPlane
from tests.webhook import BindingWebhook, Refusal, WebhookTLS


def scripted_webhook(
    cp: ControlPlane, admin: ApiClient, namespace: str, deny: list[Refusal]
) -> BindingWebhook:
    """``deny``: (HTTP code, Retry-After seconds or None) for the first bindings, in order."""
    script = list(deny)
    return BindingWebhook(
        admin, namespace, lambda pod, node: script.pop(0) if script else None, loopback_tls(cp)
    )


def loopback_tls(cp: ControlPlane) -> WebhookTLS:
    """A webhook on loopback with a certificate of the test CA, which the API server trusts."""
    crt, key = cp.ca.issue("webhook", server=True)
    return WebhookTLS("127.0.0.1", crt, key, cp.ca.pem)
