"""End-to-end suites on a kind cluster.

The cluster is the one ``make kind-up`` made (kind-config.yaml; stock or
offline images: the suites don't know or care which). pytest-kind's
KindCluster reuses it by name; ``make e2e`` creates it first and deletes it
after. Every test gets its own namespace. When a test fails, ``kind export
logs`` and the scheduler's logs are kept under _artifacts/.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config
from pytest_kind import KindCluster

from e2e.kube import create_namespace

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(os.environ.get("ARTIFACTS", REPO / "_artifacts"))


def _tool(name: str) -> Path:
    return Path(subprocess.check_output([str(REPO / "hack/tools/ensure-bin.sh"), name], text=True).strip())


@pytest.fixture(scope="session")
def kind_cluster() -> Iterator[KindCluster]:
    name = os.environ.get("KIND_CLUSTER", "dynamic-scheduler")
    kubeconfig = os.environ.get("KUBECONFIG")
    cluster = KindCluster(
        name,
        Path(kubeconfig) if kubeconfig else None,
        kind_path=Path(os.environ["KIND"]) if os.environ.get("KIND") else _tool("kind"),
        kubectl_path=Path(os.environ["KUBECTL"]) if os.environ.get("KUBECTL") else _tool("kubectl"),
    )
    cluster.create(config_file=REPO / "kind-config.yaml")  # reuses the cluster of `make kind-up`
    yield cluster


@pytest.fixture(scope="session")
def api(kind_cluster: KindCluster) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kind_cluster.kubeconfig_path))


@pytest.fixture(scope="session")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="session")
def test_image() -> str:
    """An image every node has: the scheduler's own (python3), loaded by `make kind-load`."""
    return os.environ.get("IMG", "dynamic-scheduler:dev")


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"e2e-{request.node.name.replace('_', '-')[:40].strip('-').lower()}-{uuid.uuid4().hex[:5]}"
    create_namespace(core, name, {"e2e.dynamic-scheduler.io/test": "true"})
    yield name
    core.delete_namespace(name, propagation_policy="Background")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Suites marked ``disruptive`` run last, in their order: the kubelets take minutes to tear
    down what churn leaves, and other suites' pods would wait behind it."""
    items.sort(key=lambda item: item.get_closest_marker("disruptive") is not None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        item.session.config._e2e_failed = True  # type: ignore[attr-defined]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not getattr(session.config, "_e2e_failed", False):
        return
    name = os.environ.get("KIND_CLUSTER", "dynamic-scheduler")
    dest = ARTIFACTS / f"kind-logs-{name}"
    kind = os.environ.get("KIND") or str(_tool("kind"))
    subprocess.run(
        [kind, "export", "logs", str(dest), "--name", name],
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def ours_is_the_scheduler(kind_cluster: KindCluster) -> Iterator[str]:
    """The lease method deployed (``make deploy-lease``) for the whole module; restored after.

    Yields the last line deploy printed (which of our replicas schedules, since when)."""
    from e2e.deploying import deploy, restore

    os.environ.setdefault("KUBECONFIG", str(kind_cluster.kubeconfig_path))
    res = deploy("lease")
    try:
        yield res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    finally:
        restore()


_SESSION_START = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The figures recorded (e2e/measure.py) since this run started, shown without -s or a failure."""
    from e2e.measure import OUT

    rows = []
    for path in sorted(OUT.glob("*.jsonl")) if OUT.is_dir() else []:
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("time", "") >= _SESSION_START:
                rows.append(entry)
    if not rows:
        return
    terminalreporter.section(f"measured since {_SESSION_START} (in {OUT})")
    for e in rows:
        extra = {k: v for k, v in e.items() if k not in ("time", "suite", "name", "value", "test")}
        terminalreporter.write_line(
            f"{e['suite']}: {e['name']} = {e['value']}" + (f"  {extra}" if extra else "")
        )
