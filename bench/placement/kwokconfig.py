"""kwok's part of the simulation: each pod's real usage, and a kubelet-like metrics endpoint per
node, as documents of the kwok controller's ``--config`` (kwok v0.8 reads ClusterResourceUsage
and Metric from it beside the Stages).

- ``ClusterResourceUsage``: a container's CPU and memory use is its pod's annotations
  (``USAGE_CPU``, ``USAGE_MEMORY``), 1m / 1Mi without them (the approach of kwok's
  ``kustomize/metrics/usage`` example, written here for these annotations).
- ``Metric`` at ``/metrics/nodes/{nodeName}/metrics/resource``: the series the shipped
  recording rules read from a kubelet (``node_cpu_usage_seconds_total``,
  ``node_memory_working_set_bytes``) and from cAdvisor (``machine_cpu_cores``,
  ``machine_memory_bytes``, the node's capacity), so that Prometheus derives
  ``cpu_usage_avg_5m`` and the rest from kwok exactly as from real nodes.
"""

from __future__ import annotations

from typing import Any

import yaml

USAGE_CPU = "bench.dynamic-scheduler.io/usage-cpu"
USAGE_MEMORY = "bench.dynamic-scheduler.io/usage-memory"
METRICS_PATH = "/metrics/nodes/{nodeName}/metrics/resource"


def _from_annotation(key: str, default: str) -> str:
    return f'"{key}" in pod.metadata.annotations ? Quantity(pod.metadata.annotations["{key}"]) : Quantity("{default}")'


def resource_usage() -> dict[str, Any]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterResourceUsage",
        "metadata": {"name": "bench-usage-from-annotations"},
        "spec": {
            "usages": [
                {
                    "usage": {
                        "cpu": {"expression": _from_annotation(USAGE_CPU, "1m")},
                        "memory": {"expression": _from_annotation(USAGE_MEMORY, "1Mi")},
                    }
                }
            ]
        },
    }


def _node_metric(name: str, kind: str, value: str, help_text: str) -> dict[str, Any]:
    return {"name": name, "dimension": "node", "kind": kind, "help": help_text, "value": value}


def metric() -> dict[str, Any]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Metric",
        "metadata": {"name": "bench-node-resource"},
        "spec": {
            "path": METRICS_PATH,
            "metrics": [
                _node_metric(
                    "node_cpu_usage_seconds_total",
                    "counter",
                    'node.CumulativeUsage("cpu")',
                    "Cumulative cpu time consumed by the node in core-seconds",
                ),
                _node_metric(
                    "node_memory_working_set_bytes",
                    "gauge",
                    'node.Usage("memory")',
                    "Current working set of the node in bytes",
                ),
                _node_metric(
                    "machine_cpu_cores", "gauge", 'node.status.capacity["cpu"]', "Number of logical CPU cores"
                ),
                _node_metric(
                    "machine_memory_bytes",
                    "gauge",
                    'node.status.capacity["memory"]',
                    "Amount of memory installed",
                ),
            ],
        },
    }


def documents() -> str:
    """The two documents, to append to the controller's config."""
    return yaml.safe_dump_all([resource_usage(), metric()], sort_keys=False)


def metrics_path(node: str) -> str:
    return METRICS_PATH.replace("{nodeName}", node)
