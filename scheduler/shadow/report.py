"""``dynamic-scheduler shadow report``: the running shadow's verdicts, as a table.

Reads ``/shadow/decisions`` from the shadow's HTTPS port: through the API server's pod
proxy by default (the shadow pod found by its labels; the caller needs ``get`` on
``pods/proxy`` there), or straight from ``--url``. Prints the agreement rate, the counts
by verdict, and the last decisions (``--disagreements``: only those that differ).
"""

from __future__ import annotations

import datetime
import json
import ssl
import sys
import urllib.error
import urllib.request
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.cluster.client import api_request
from scheduler.deploy import cmdline
from scheduler.deploy.cmdline import DeployError, UsageError
from scheduler.explain.text import table

SHADOW_SELECTOR = "app.kubernetes.io/name=dynamic-scheduler,app.kubernetes.io/component=shadow"
PATH = "/shadow/decisions"
VERDICTS = ("same", "different", "unschedulable", "placeable")


def fetch_via_proxy(api: Any, namespace: str, selector: str, port: int, limit: int) -> dict[str, Any]:
    pods = api_request(
        api,
        "GET",
        f"/api/v1/namespaces/{namespace}/pods",
        query=[("labelSelector", selector)],
        timeout=30,
    )["items"]
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    if not running:
        raise DeployError(
            f"no running shadow pod in namespace {namespace} with labels {selector} "
            "(deploy one with: dynamic-scheduler deploy shadow)"
        )
    name = sorted(p["metadata"]["name"] for p in running)[0]
    path = f"/api/v1/namespaces/{namespace}/pods/https:{name}:{port}/proxy{PATH}"
    try:
        doc: dict[str, Any] = api_request(api, "GET", path, query=[("limit", str(limit))], timeout=30)
    except ApiException as e:
        raise DeployError(f"pod {namespace}/{name}: {cmdline.api_message(e)}") from None
    doc["source"] = f"pod {namespace}/{name}"
    return doc


def fetch_url(url: str, limit: int, ca_file: str | None, insecure: bool) -> dict[str, Any]:
    if not url.startswith("https://"):
        raise UsageError(f"--url: expected https://HOST:PORT, got {url!r}")
    if ca_file:
        ctx = ssl.create_default_context(cafile=ca_file)
    elif insecure:
        ctx = ssl._create_unverified_context()  # noqa: S323 - asked for with --insecure-skip-tls-verify
    else:
        raise UsageError(
            "--url: the shadow's certificate is self-signed unless it was given one: "
            "pass --ca-file FILE or --insecure-skip-tls-verify"
        )
    target = f"{url.rstrip('/')}{PATH}?limit={limit}"
    try:
        with urllib.request.urlopen(target, context=ctx, timeout=30) as resp:  # noqa: S310 - https only
            doc: dict[str, Any] = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise DeployError(f"{target}: {e.code} {e.read().decode(errors='replace').strip()[:300]}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise DeployError(f"{target}: {getattr(e, 'reason', e)}") from None
    doc["source"] = url
    return doc


def render(doc: dict[str, Any], disagreements: bool = False) -> str:
    since = datetime.datetime.fromtimestamp(doc["since"], tz=datetime.UTC)
    rate = doc.get("agreement")
    rate_text = "no decisions yet" if rate is None else f"agreement {rate * 100:.1f}%"
    by_verdict = {v: 0 for v in VERDICTS}
    for counts in doc.get("counts", {}).values():
        for v, n in counts.items():
            by_verdict[v] = by_verdict.get(v, 0) + n
    profiles = ", ".join(sorted(doc.get("counts", {}))) or "-"
    out = [
        f"Shadow ({doc.get('source', '')}) since {since:%Y-%m-%d %H:%M:%S}Z, profiles {profiles}: "
        f"{doc['decisions']} decisions, {rate_text}",
        "  " + "  ".join(f"{v} {n}" for v, n in by_verdict.items()),
        "",
    ]
    last = [d for d in doc.get("last", []) if not disagreements or d["verdict"] != "same"]
    if not last:
        out.append(
            "No decisions to show." if not disagreements else "No disagreements among the last decisions."
        )
        return "\n".join(out) + "\n"
    rows = [["TIME", "POD", "VERDICT", "ACTIVE", "OURS", "WHY"]]
    for d in last:
        at = datetime.datetime.fromtimestamp(d["time"], tz=datetime.UTC)
        why = (
            d["reason"]
            if not d.get("plugin") or d["plugin"] in d["reason"]
            else f"{d['plugin']}: {d['reason']}"
        )
        rows.append(
            [f"{at:%H:%M:%S}", d["pod"], d["verdict"], d["activeNode"] or "-", d["oursNode"] or "-", why]
        )
    out.append(table(rows))
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    p = cmdline.parser("shadow", "Read the verdicts of the running shadow (dynamic-scheduler run --shadow).")
    p.add_argument("action", choices=("report",), help="report: the agreement rate and the last decisions")
    p.add_argument(
        "--limit", type=cmdline.positive_int, default=50, metavar="N", help="decisions shown (default 50)"
    )
    p.add_argument("--disagreements", action="store_true", help="only the decisions that differ")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="text (default) or json")
    p.add_argument(
        "-n", "--namespace", default="crane-system", help="the shadow's namespace (default crane-system)"
    )
    p.add_argument(
        "-l",
        "--selector",
        default=SHADOW_SELECTOR,
        help=f"the shadow pod's labels (default {SHADOW_SELECTOR})",
    )
    p.add_argument("--port", type=cmdline.positive_int, default=10259, help="its secure port (default 10259)")
    direct = p.add_argument_group("straight to a shadow, not through the API server")
    direct.add_argument("--url", metavar="https://HOST:PORT", help="the shadow's secure port")
    direct.add_argument("--ca-file", metavar="FILE", help="the CA of its serving certificate")
    direct.add_argument(
        "--insecure-skip-tls-verify", action="store_true", help="do not check its certificate"
    )
    cmdline.add_cluster_flags(p)
    cmdline.add_log_flags(p)

    def body() -> int:
        ns = p.parse_args(argv)
        cmdline.setup_logging(ns.v)
        if ns.url:
            doc = fetch_url(ns.url, ns.limit, ns.ca_file, ns.insecure_skip_tls_verify)
        else:
            api = cmdline.connect(ns.kubeconfig, ns.context)
            doc = fetch_via_proxy(api, ns.namespace, ns.selector, ns.port, ns.limit)
        if ns.output == "json":
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            sys.stdout.write(render(doc, ns.disagreements))
        return 0

    return cmdline.run("shadow report", body)
