"""What the replacement suites look at: the Lease, our pods, kube-scheduler, the kind nodes.

The suites test_lease.py, test_seed_method.py, test_static.py and
test_deploy.py replace kube-scheduler with the project's own commands
(e2e/deploying.py) and check the result from the outside: who holds
``kube-system/kube-scheduler``, which scheduler wrote a pod's ``Scheduled``
event, what the kubelet runs. Times are wall-clock seconds (``time.time()``):
the Lease's ``acquireTime``/``renewTime`` and an event's ``eventTime`` are
written by processes on the kind nodes, which are containers sharing this
machine's clock, so they compare with the test's own clock to the
microsecond.

How the schedulers are told apart:

- **Lease holder**: ``<hostname>_<uuid>`` for both. Ours (lease method) runs in
  a pod, so its hostname is the pod's name; kube-scheduler and our static pod
  run on the host network, so theirs is the node's name. Ours also writes the
  annotation ``dynamic-scheduler.io/holder`` equal to the holder.
- **Scheduled event** (events.k8s.io/v1, read by ``e2e.binding.bound_by``):
  ``reportingController`` is the profile's scheduler name,
  ``reportingInstance`` is ``<schedulerName>-<hostname>`` for both (client-go's
  recorder and ours), so again the pod name for ours, the node name for
  kube-scheduler.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client, watch

from e2e.binding import pod_body, wall
from e2e.kube import docker_exec, poll

LEASE_NS, LEASE = "kube-system", "kube-scheduler"
HOLDER_ANNOTATION = "dynamic-scheduler.io/holder"
OUR_NS = "crane-system"
OUR_DEPLOYMENT = "dynamic-scheduler"
OUR_SELECTOR = "app.kubernetes.io/name=dynamic-scheduler,app.kubernetes.io/component=scheduler"
KUBE_SCHEDULER_SELECTOR = "component=kube-scheduler"


# --- times -------------------------------------------------------------------------------------


# --- the Lease ---------------------------------------------------------------------------------


def read_lease(api: client.ApiClient, name: str = LEASE, ns: str = LEASE_NS) -> dict[str, Any] | None:
    """The Lease as the server's JSON (times as written), or None."""
    try:
        resp = client.CoordinationV1Api(api).read_namespaced_lease(name, ns, _preload_content=False)
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise
    return json.loads(resp.data)


def holder(lease: dict[str, Any] | None) -> str:
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or ""


def holder_host(identity: str) -> str:
    """The hostname of client-go's ``<hostname>_<uuid>`` identity."""
    return identity.rsplit("_", 1)[0] if "_" in identity else identity


def annotated_ours(lease: dict[str, Any] | None) -> bool:
    ann = ((lease or {}).get("metadata") or {}).get("annotations") or {}
    return bool(holder(lease)) and ann.get(HOLDER_ANNOTATION) == holder(lease)


def acquired_at(lease: dict[str, Any] | None) -> float | None:
    return wall(((lease or {}).get("spec") or {}).get("acquireTime"))


@dataclass
class LeaseChange:
    seen: float
    """When the watch delivered it (test clock)."""
    lease: dict[str, Any]

    @property
    def holder(self) -> str:
        return holder(self.lease)

    @property
    def renewed(self) -> float | None:
        return wall(self.lease["spec"].get("renewTime"))

    @property
    def acquired(self) -> float | None:
        return wall(self.lease["spec"].get("acquireTime"))


@dataclass
class LeaseWatch:
    """Every version of one Lease while the context is open (a watch on its own thread)."""

    changes: list[LeaseChange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    cond: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.cond = threading.Condition(self.lock)

    def add(self, lease: dict[str, Any]) -> None:
        with self.cond:
            self.changes.append(LeaseChange(time.time(), lease))
            self.cond.notify_all()

    def snapshot(self) -> list[LeaseChange]:
        with self.lock:
            return list(self.changes)

    def history(self, since: float = 0.0) -> list[dict[str, Any]]:
        """Who held the Lease when (for failure messages and the artifacts)."""
        return [
            {
                "seen": round(c.seen, 3),
                "holder": c.holder,
                "ours": annotated_ours(c.lease),
                "acquireTime": c.lease["spec"].get("acquireTime"),
                "renewTime": c.lease["spec"].get("renewTime"),
                "transitions": c.lease["spec"].get("leaseTransitions"),
            }
            for c in self.snapshot()
            if c.seen >= since
        ]

    def holders(self, since: float = 0.0) -> str:
        """The sequence of distinct holders since ``since``, one per line, with when each first appeared."""
        out, last = [], None
        for h in self.history(since):
            if h["holder"] != last:
                at = datetime.fromtimestamp(h["seen"], UTC).strftime("%H:%M:%S.%f")[:-3]
                out.append(f"  {at} {h['holder'] or '(released)'}" + (" [ours]" if h["ours"] else ""))
                last = h["holder"]
        return "\n".join(out)

    def wait_for(
        self, what: str, pred: Callable[[LeaseChange], bool], timeout: float, after: int = 0
    ) -> LeaseChange:
        """The first change at index >= ``after`` satisfying ``pred``."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for c in self.changes[after:]:
                    if pred(c):
                        return c
                left = deadline - time.monotonic()
                if left <= 0:
                    last = self.changes[-1].holder if self.changes else "nothing"
                    raise AssertionError(
                        f"timed out after {timeout:.0f}s waiting for the Lease: {what} "
                        f"(last holder: {last!r}); holders:\n{self.holders()}"
                    )
                self.cond.wait(min(left, 1.0))


@contextmanager
def watch_lease(api: client.ApiClient, name: str = LEASE, ns: str = LEASE_NS) -> Iterator[LeaseWatch]:
    coord = client.CoordinationV1Api(api)
    lw = LeaseWatch()
    stop = threading.Event()
    first = json.loads(
        coord.list_namespaced_lease(ns, field_selector=f"metadata.name={name}", _preload_content=False).data
    )
    for item in first.get("items") or []:
        lw.add(item)
    rv = [first["metadata"]["resourceVersion"]]
    errors: list[BaseException] = []

    def run() -> None:
        while not stop.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(
                    coord.list_namespaced_lease,
                    ns,
                    field_selector=f"metadata.name={name}",
                    resource_version=rv[0],
                    timeout_seconds=5,
                    deserialize=False,
                    _request_timeout=15,
                ):
                    obj = ev["object"]
                    if ev["type"] == "ERROR":  # 410: list again
                        again = json.loads(
                            coord.list_namespaced_lease(
                                ns, field_selector=f"metadata.name={name}", _preload_content=False
                            ).data
                        )
                        rv[0] = again["metadata"]["resourceVersion"]
                        for item in again.get("items") or []:
                            lw.add(item)
                        break
                    rv[0] = obj["metadata"]["resourceVersion"]
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        lw.add(obj)
                    if stop.is_set():
                        break
            except Exception as e:  # noqa: BLE001 - a dropped watch is retried; kept for the report
                errors.append(e)
                stop.wait(0.2)

    t = threading.Thread(target=run, name="lease-watch", daemon=True)
    t.start()
    try:
        yield lw
    finally:
        stop.set()
        t.join(20)


# --- pods --------------------------------------------------------------------------------------


def our_pods(core: client.CoreV1Api) -> list[client.V1Pod]:
    pods = core.list_namespaced_pod(OUR_NS, label_selector=OUR_SELECTOR).items
    return sorted((p for p in pods if not p.metadata.deletion_timestamp), key=lambda p: p.metadata.name)


def node_ip(node: client.V1Node) -> str:
    return next(a.address for a in node.status.addresses if a.type == "InternalIP")


def kube_scheduler_pods(core: client.CoreV1Api) -> list[client.V1Pod]:
    return core.list_namespaced_pod(LEASE_NS, label_selector=KUBE_SCHEDULER_SELECTOR).items


def ks_container(
    core: client.CoreV1Api, pods: list[client.V1Pod] | None = None
) -> client.V1ContainerStatus | None:
    """kube-scheduler's container status (of ``pods``, if already listed)."""
    pods = kube_scheduler_pods(core) if pods is None else pods
    statuses = pods[0].status.container_statuses if pods and pods[0].status else None
    return statuses[0] if statuses else None


def fresh_kube_scheduler(api: client.ApiClient, core: client.CoreV1Api, node: str) -> int:
    """kube-scheduler leading, with its restart back-off reset; its restart count.

    kube-scheduler exits whenever it loses its Lease (each takeover), and the kubelet waits
    longer before each restart (up to 5 minutes); a kubelet restart resets that back-off."""
    docker_exec(node, "systemctl", "restart", "kubelet")

    def leading() -> int | None:
        cs = ks_container(core)
        lease = read_lease(api)
        ok = (
            cs is not None
            and cs.ready
            and cs.state.running
            and holder_host(holder(lease)) == node
            and not annotated_ours(lease)
        )
        return cs.restart_count + 1 if ok else None  # + 1: 0 restarts is a valid answer

    return poll("kube-scheduler Ready and holding its Lease", leading, 420, interval=1) - 1


def sleeper(
    core: client.CoreV1Api, ns: str, name: str, image: str, scheduler_name: str | None = None
) -> None:
    """A pod that sleeps; ``scheduler_name`` None names no scheduler (default-scheduler's)."""
    body = pod_body(name, image)
    if scheduler_name:
        body["spec"]["schedulerName"] = scheduler_name
    core.create_namespaced_pod(ns, body)


def log_time(line: str) -> float:
    """The runtime's timestamp of a ``timestamps=True`` log line."""
    stamp = line.split(" ", 1)[0]
    head, _, frac = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00").timestamp()


def started_leading_at(core: client.CoreV1Api, pod: str) -> float | None:
    """When our replica ``pod`` last logged "Started leading", or None."""
    log = core.read_namespaced_pod_log(pod, OUR_NS, timestamps=True, _preload_content=False).data.decode()
    lines = [ln for ln in log.splitlines() if '"Started leading"' in ln]
    return log_time(lines[-1]) if lines else None


# --- kind nodes --------------------------------------------------------------------------------


def end_kube_scheduler_backoff(core: client.CoreV1Api) -> bool:
    """If kube-scheduler waits out a CrashLoopBackOff, restart its node's kubelet (which resets
    the back-off) and wait until it runs again; whether it had to.

    Every takeover makes kube-scheduler exit, and by the later suites the kubelet waits
    minutes before the next start; a restore would spend them waiting for the Lease to come
    back (what an operator sees is in the README's Troubleshooting)."""
    pods = kube_scheduler_pods(core)
    cs = ks_container(core, pods)
    waiting = cs.state.waiting if cs is not None and cs.state else None
    if waiting is None or waiting.reason != "CrashLoopBackOff":
        return False
    docker_exec(pods[0].spec.node_name, "systemctl", "restart", "kubelet")
    poll(
        "kube-scheduler running after the kubelet's restart",
        lambda: (c := ks_container(core)) is not None and c.state.running is not None,
        120,
        interval=1,
    )
    return True


def container_pid(pod: client.V1Pod, container: str | None = None) -> tuple[str, int]:
    """(node, pid in the node's PID namespace) of a pod's running container, via crictl inspect."""
    statuses = pod.status.container_statuses or []
    cs = next(c for c in statuses if container is None or c.name == container)
    cid = re.sub(r"^\w+://", "", cs.container_id or "")
    assert cid, f"pod {pod.metadata.name} has no running container: {cs}"
    node = pod.spec.node_name
    info = json.loads(docker_exec(node, "crictl", "inspect", cid).stdout)
    return node, int(info["info"]["pid"])


def sigkill(pod: client.V1Pod) -> float:
    """SIGKILL the pod's (first) container process on its node; the time of the kill."""
    node, pid = container_pid(pod)
    at = time.time()
    docker_exec(node, "kill", "-KILL", str(pid))
    return at


def node_file_exists(node: str, path: str) -> bool:
    return docker_exec(node, "test", "-e", path, check=False).returncode == 0


def node_listing(node: str, *dirs: str) -> str:
    """``ls -la`` of folders on a node (for "nothing changed" comparisons), without the times."""
    out = docker_exec(
        node,
        "sh",
        "-c",
        'for d in "$@"; do echo "== $d"; ls -la --time-style=+ "$d" 2>&1; done',
        "sh",
        *dirs,
        check=False,
    ).stdout
    return out


def crictl_running(node: str, name: str) -> list[str]:
    """Ids of the running containers named ``name`` on ``node``."""
    out = docker_exec(node, "crictl", "ps", "--state", "running", "--name", f"^{name}$", "-q").stdout
    return [line for line in out.split() if line]


def https_get(node: str, url: str) -> tuple[int, str]:
    """``curl -k`` on the node: (exit code, body). 7 = connection refused."""
    proc = docker_exec(node, "curl", "-sk", "--max-time", "5", url, check=False)
    return proc.returncode, proc.stdout


# --- the Deployment ----------------------------------------------------------------------------


def scale(api: client.ApiClient, replicas: int) -> None:
    client.AppsV1Api(api).patch_namespaced_deployment_scale(
        OUR_DEPLOYMENT, OUR_NS, {"spec": {"replicas": replicas}}
    )


def pod_log(core: client.CoreV1Api, ns: str, name: str, **kw: Any) -> str:
    return core.read_namespaced_pod_log(name, ns, _preload_content=False, **kw).data.decode(errors="replace")


def wait_ours_hold(
    api: client.ApiClient, core: client.CoreV1Api, timeout: float
) -> tuple[dict[str, Any], str]:
    """Until one of our running pods holds the Lease; (the Lease, the pod's name)."""

    def check() -> tuple[dict[str, Any], str] | None:
        lease = read_lease(api)
        names = {p.metadata.name for p in our_pods(core)}
        host = holder_host(holder(lease))
        return (lease, host) if host in names and annotated_ours(lease) else None

    return poll("one of our pods holding kube-system/kube-scheduler", check, timeout, interval=0.25)


def wait_leading(core: client.CoreV1Api, pod: str, timeout: float) -> None:
    """Until our pod's log says it leads (after a takeover, only once the safe wait is over)."""
    poll(f"{pod} leading", lambda: "Started leading" in pod_log(core, OUR_NS, pod), timeout, interval=0.5)
