"""Render ``manifests/``: checked values + Jinja2 templates -> API objects in apply order, and files.

Layout of the manifests folder::

    values.yaml                 every default (scheduler/deploy/values.py checks it)
    common/*.j2                 files shared by the scheduler methods and shadow (scheduler-config.yaml, policy.yaml)
    <method>/files/*.j2         files of one method (static: pod.yaml; prometheus: prometheus.yml, rules.yml)
    <method>/*.yaml.j2          API objects of one method (lease, static, prometheus, shadow)

Files render first; object templates see them as ``files["name"]``. Templates
see ``values`` (the merged values, keys as in values.yaml), ``scheduler``
(per-method names and paths, :func:`scheduler_context`) and ``labels(component)``.
The Jinja environment is strict: an undefined name is an error naming the
template and line; ``tojson`` emits any value as a YAML-compatible JSON
literal, ``toyaml`` as block YAML, ``sha256`` hashes text.

Every rendered document is parsed back and dumped again, so the output is
always well-formed YAML in one style, whatever the template's whitespace; the
objects are sorted into lightkube's apply order (reverse it to delete).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import posixpath
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml

from scheduler.config import ConfigError, parse_config
from scheduler.config.durations import format_seconds
from scheduler.deploy.values import LoadedValues, prometheus_seconds

logger = logging.getLogger(__name__)

METHODS = ("lease", "static", "prometheus", "shadow")
MANIFESTS_ENV = "DYNAMIC_SCHEDULER_MANIFESTS"
FIELD_MANAGER = "dynamic-scheduler"
MANAGED_BY = {"app.kubernetes.io/managed-by": "dynamic-scheduler"}
REVISION = "dynamic-scheduler.io/revision"

# lightkube's ranks (lightkube/core/sort_objects.py), then Services before the workloads
# that use them; anything else last. Equal ranks keep the templates' order.
RANKS = {
    "CustomResourceDefinition": 10,
    "Namespace": 20,
    "Secret": 31,
    "ServiceAccount": 32,
    "PersistentVolume": 33,
    "PersistentVolumeClaim": 34,
    "ConfigMap": 35,
    "Role": 41,
    "ClusterRole": 42,
    "RoleBinding": 43,
    "ClusterRoleBinding": 44,
    "Service": 50,
}
UNKNOWN_RANK = 1000


class RenderError(Exception):
    """A template or its output is broken (a bug in manifests/, not in the values)."""


# --- objects -----------------------------------------------------------------------------------


def apply_order(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ranked = sorted(
        enumerate(objects), key=lambda io: (RANKS.get(io[1].get("kind", ""), UNKNOWN_RANK), io[0])
    )
    return [o for _, o in ranked]


def delete_order(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(reversed(apply_order(objects)))


def ref(obj: dict[str, Any]) -> str:
    """``Deployment crane-system/dynamic-scheduler``, ``ClusterRole dynamic-scheduler``."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{meta.get('name')}"


# --- YAML out ----------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    pass


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _represent_str)


def to_yaml(value: Any) -> str:
    """Block YAML, keys in their given order, multi-line strings as literal blocks."""
    return yaml.dump(
        value, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096, allow_unicode=True
    )


def dump_stream(objects: list[dict[str, Any]]) -> str:
    """One multi-document stream (``---`` before each), as ``kubectl apply -f -`` reads it."""
    return "".join("---\n" + to_yaml(o) for o in objects)


# --- the Jinja environment ---------------------------------------------------------------------


def _tojson(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _toyaml(value: Any) -> str:
    return to_yaml(value).rstrip("\n")


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def environment(root: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(tojson=_tojson, toyaml=_toyaml, sha256=_sha256)
    return env


def labels(component: str) -> dict[str, str]:
    """The labels of our objects; ``scheduler``, ``shadow`` and ``prometheus`` pods select on the first two."""
    out: dict[str, str] = {}
    if component in ("scheduler", "shadow"):
        out = {"app.kubernetes.io/name": "dynamic-scheduler", "app.kubernetes.io/component": component}
    elif component == "prometheus":
        out = {"app.kubernetes.io/name": "prometheus", "app.kubernetes.io/component": "prometheus"}
    return {**out, "app.kubernetes.io/part-of": "dynamic-scheduler", **MANAGED_BY}


def estimator_args(values: dict[str, Any]) -> dict[str, Any]:
    """The Dynamic plugin's ``estimator`` args: how old and how wide the shipped recording rules'
    averages are, from the Prometheus values, under what ``dynamic.estimator`` sets.

    A sample is evaluated on data a scrape and an evaluation interval old (the lag); a pod's
    usage enters it through rate() over ``rateWindow``, then the ``avg5m`` average (the window,
    which the maxima of those averages share). ``cpu_usage_active`` is the rate alone, and
    ``mem_usage_active`` the working set as last scraped: windows of their own.
    """
    prom = values["prometheus"]
    scrape = prometheus_seconds(prom["scrapeInterval"]) or 0.0
    rate = prometheus_seconds(prom["rateWindow"]) or 0.0
    lag = scrape + (prometheus_seconds(prom["evaluationInterval"]) or 0.0)
    window = rate + (prometheus_seconds(prom["windows"]["avg5m"]) or 0.0)
    derived = {
        "metricsLag": format_seconds(lag),
        "metricsWindow": format_seconds(window),
        "metricWindows": {
            "cpu_usage_active": format_seconds(rate),
            "mem_usage_active": format_seconds(scrape),
        },
    }
    return {**derived, **values["dynamic"]["estimator"]}


def scheduler_context(method: str, values: dict[str, Any]) -> dict[str, Any]:
    """The scheduler's names and paths for ``method``: which profile, which Lease, where the files are."""
    le, static, dyn = values["leaderElection"], values["static"], values["dynamic"]
    if method == "static":
        config_dir = static["configDir"].rstrip("/")
        beside = static["mode"] == "beside"
        return {
            "name": static["schedulerName"] if beside else values["schedulerName"],
            "leaseName": static["leaseName"] if beside else le["resourceName"],
            "leaseNamespace": le["resourceNamespace"],
            "configDir": config_dir,
            "configFile": f"{config_dir}/scheduler-config.yaml",
            "policyConfigPath": f"{config_dir}/policy.yaml",
            "policyFile": "policy.yaml",
            "takeover": values["takeover"] and not beside,
            "estimator": estimator_args(values),
        }
    config_dir = posixpath.dirname(dyn["policyConfigPath"]) or "/"
    return {
        "name": values["schedulerName"],
        "leaseName": le["resourceName"],
        "leaseNamespace": le["resourceNamespace"],
        "configDir": config_dir,
        "configFile": posixpath.join(config_dir, "scheduler-config.yaml"),
        "policyConfigPath": dyn["policyConfigPath"],
        "policyFile": posixpath.basename(dyn["policyConfigPath"]),
        "takeover": values["takeover"],
        "estimator": estimator_args(values),
    }


# --- rendering ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rendered:
    method: str
    objects: list[dict[str, Any]]
    """API objects, in apply order."""
    files: dict[str, str] = field(default_factory=dict)
    """Rendered files by name (scheduler-config.yaml, policy.yaml, pod.yaml, prometheus.yml, ...)."""
    node_files: dict[str, str] = field(default_factory=dict)
    """static: absolute path on the control-plane node -> content, in write order."""

    def stream(self) -> str:
        return dump_stream(self.objects)


def find_manifests(explicit: str | None = None) -> Path:
    """The manifests folder: ``explicit``, else $DYNAMIC_SCHEDULER_MANIFESTS, else the installed
    package's (``scheduler/manifests``, copied there by the build: setup.py), else the source
    tree's."""
    candidates = [Path(explicit)] if explicit else []
    if not explicit and os.environ.get(MANIFESTS_ENV):
        candidates.append(Path(os.environ[MANIFESTS_ENV]))
    if not candidates:
        here = Path(__file__).resolve()
        candidates = [here.parents[1] / "manifests", here.parents[2] / "manifests"]
    for c in candidates:
        if (c / "values.yaml").is_file():
            return c
    where = ", ".join(str(c) for c in candidates)
    raise ConfigError(None, "--manifests", f"expected a folder with values.yaml, looked in {where}")


def _where(e: BaseException, name: str) -> str:
    """``name:line`` of the deepest traceback frame inside template ``name``."""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename.endswith(name):
            return f"{name}:{frame.lineno}"
    return name


def _render_text(env: jinja2.Environment, name: str, context: dict[str, Any]) -> str:
    try:
        return env.get_template(name).render(context)
    except jinja2.TemplateSyntaxError as e:
        raise RenderError(f"{name}:{e.lineno}: {e.message}") from None
    except jinja2.TemplateError as e:
        raise RenderError(f"{_where(e, name)}: {e}") from None


def _parse(name: str, text: str) -> list[Any]:
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise RenderError(f"{name}: the rendered text is not YAML: {e}") from None


def _templates(root: Path, folder: str, suffix: str) -> list[str]:
    base = root / folder
    if not base.is_dir():
        return []
    return sorted(f"{folder}/{p.name}" for p in base.iterdir() if p.is_file() and p.name.endswith(suffix))


@contextlib.contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    """Silence the config loader's warnings while the rendered configuration is checked."""
    lg = logging.getLogger(logger_name)
    old = lg.level
    lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        lg.setLevel(old)


def render(method: str, values: LoadedValues, root: Path) -> Rendered:
    if method not in METHODS:
        raise ConfigError(None, "method", f"expected one of {', '.join(METHODS)}, got {method!r}")
    env = environment(root)
    data = values.data
    prom = data["prometheus"]
    if method == "prometheus" and prom["discovery"] == "static" and not prom["nodes"]:
        raise ConfigError(
            None,
            "prometheus.nodes",
            "expected at least one node (name: kubelet address) with discovery static "
            "(deploy prometheus fills it from the cluster's nodes)",
        )
    context: dict[str, Any] = {
        "values": data,
        "labels": labels,
        "method": method,
        "scheduler": scheduler_context(method, data),
    }
    file_templates = _templates(root, f"{method}/files", ".j2")
    if method in ("lease", "static", "shadow"):
        file_templates = _templates(root, "common", ".j2") + file_templates
    files: dict[str, str] = {}
    context["files"] = files  # each file template sees the ones rendered before it
    for name in file_templates:
        text = _render_text(env, name, context)
        out_name = posixpath.basename(name)[: -len(".j2")]
        if out_name.endswith((".yaml", ".yml")):
            docs = _parse(name, text)
            if len(docs) != 1 or not isinstance(docs[0], dict):
                raise RenderError(f"{name}: expected one YAML mapping, got {len(docs)} document(s)")
            text = to_yaml(docs[0])
        files[out_name] = text
    if "scheduler-config.yaml" in files:
        with _quiet("scheduler.config"):
            try:
                parse_config(files["scheduler-config.yaml"], file="scheduler-config.yaml", policies=False)
            except ConfigError as e:
                raise ConfigError(
                    "rendered scheduler-config.yaml",
                    e.path,
                    f"{e.message} (set by the values leaderElection, dynamic, schedulerName or static)",
                ) from None
    objects: list[dict[str, Any]] = []
    for name in _templates(root, method, ".yaml.j2"):
        for i, doc in enumerate(_parse(name, _render_text(env, name, context))):
            meta = doc.get("metadata") if isinstance(doc, dict) else None
            if not (
                isinstance(doc, dict)
                and isinstance(doc.get("apiVersion"), str)
                and isinstance(doc.get("kind"), str)
                and isinstance(meta, dict)
                and isinstance(meta.get("name"), str)
            ):
                raise RenderError(
                    f"{name}: document {i + 1} is not a Kubernetes object "
                    f"(apiVersion, kind and metadata.name)"
                )
            objects.append(doc)
    node_files: dict[str, str] = {}
    if method == "static":
        # The mirror pod carries this: a wait can tell the new pod from the one it replaces.
        pod = yaml.safe_load(files["pod.yaml"])
        pod["metadata"].setdefault("annotations", {})[REVISION] = _sha256(files["pod.yaml"])[:16]
        files["pod.yaml"] = to_yaml(pod)
        s = data["static"]
        sched = context["scheduler"]
        node_files = {
            sched["configFile"]: files["scheduler-config.yaml"],
            sched["policyConfigPath"]: files["policy.yaml"],
            f"{s['manifestDir'].rstrip('/')}/{s['name']}.yaml": files["pod.yaml"],
        }
    return Rendered(method, apply_order(objects), files, node_files)
