"""The binding webhook for the private kube-apiserver: scripted refusals, then allowed.

Answers the first bindings of the namespace with the scripted codes, in
order, and allows the rest (``tests/webhook.py`` does the serving and the
registration; the test CA signs its certificate, loopback is its address).
"""

from __future__ import annotations

from kubernetes.client import ApiClient

from tests.apiserver import ControlPlane
from tests.webhook import BindingWebhook, Refusal


def scripted_webhook(
    cp: ControlPlane, admin: ApiClient, namespace: str, deny: list[Refusal]
) -> BindingWebhook:
    """``deny``: (HTTP code, Retry-After seconds or None) for the first bindings, in order."""
    script = list(deny)
    crt, key = cp.ca.issue("webhook", server=True)
    return BindingWebhook(
        admin,
        namespace,
        lambda pod, node: script.pop(0) if script else None,
        listen="127.0.0.1",
        cert_pem=crt,
        key_pem=key,
        ca_pem=cp.ca.pem,
    )
