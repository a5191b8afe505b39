"""Apply and delete rendered objects, all or nothing, with the official client.

:meth:`Cluster.apply` is ``kubectl apply --server-side`` made safe for a deploy:

1. **access**: a SelfSubjectAccessReview for every verb the apply and the
   caller's later steps use (``needs``); any denial stops here;
2. **dry run**: every object is applied with ``dryRun=All``, so the server runs
   validation, admission and RBAC escalation checks; any rejection stops here,
   listing each rejected object and the server's reason. A namespaced object in a
   namespace that does not exist yet cannot be dry-run (the server rejects it for
   the missing namespace), so that namespace is created for real first and
   deleted again if the rest of the dry run fails;
3. **apply**: server-side apply of each object in order, field manager
   ``dynamic-scheduler``, conflicts forced (these objects are ours). Should one
   still fail, the objects this run created are deleted again.

A namespace the objects go in that is being deleted (a restore just before:
namespace deletion takes a while) is waited for first, since nothing can be
created in it; it is created again by the apply.

A Namespace that already exists and does not carry our managed-by label is not
ours: it is left as it is (so :meth:`Cluster.delete` later leaves it too).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes.client import ApiClient, AuthorizationV1Api
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from kubernetes.dynamic.resource import Resource

from scheduler.deploy.cmdline import DeployError, api_message
from scheduler.deploy.templates import FIELD_MANAGER, MANAGED_BY, apply_order, delete_order, ref
from scheduler.deploy.waiting import poll
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
REQUEST_TIMEOUT = 30.0
NAMESPACE_WAIT = 300.0


@dataclass(frozen=True, order=True)
class Need:
    """One permission a step needs, as a SelfSubjectAccessReview asks it."""

    verb: str
    resource: str
    group: str = ""
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None

    def __str__(self) -> str:
        what = self.resource + (f"/{self.subresource}" if self.subresource else "")
        what += f".{self.group}" if self.group else ""
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.verb} {what}{f' {self.name}' if self.name else ''}{where}"


def is_ours(obj: Obj | None) -> bool:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in MANAGED_BY.items())


class Cluster:
    """The objects side of a deploy: discovery, access checks, apply, delete."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self._dyn: DynamicClient | None = None

    @property
    def dyn(self) -> DynamicClient:
        if self._dyn is None:
            self._dyn = DynamicClient(self.api)
        return self._dyn

    def resource(self, obj: Obj) -> Resource:
        try:
            return self.dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        except ResourceNotFoundError:
            raise DeployError(
                f"{ref(obj)}: the server does not serve {obj['kind']} in {obj['apiVersion']}"
            ) from None

    # --- reading ----------------------------------------------------------------------------

    def get(self, obj: Obj) -> Obj | None:
        """The live object, or None."""
        meta = obj["metadata"]
        res = self.resource(obj)
        try:
            live = self.dyn.get(
                res,
                name=meta["name"],
                namespace=meta.get("namespace") if res.namespaced else None,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise DeployError(f"{ref(obj)}: cannot read it: {api_message(e)}") from None
        return live.to_dict()

    # --- access -----------------------------------------------------------------------------

    def needs_for(self, objects: Iterable[Obj], verbs: tuple[str, ...]) -> list[Need]:
        out = []
        for obj in objects:
            res = self.resource(obj)
            ns = obj["metadata"].get("namespace") if res.namespaced else None
            for verb in verbs:
                out.append(
                    Need(
                        verb,
                        res.name,
                        res.group or "",
                        ns,
                        obj["metadata"]["name"] if verb != "create" else None,
                    )
                )
        return out

    def denied(self, needs: Iterable[Need]) -> list[Need]:
        """The needs a SelfSubjectAccessReview says no to (each asked once)."""
        authz = AuthorizationV1Api(self.api)
        out = []
        for need in sorted(set(needs), key=str):  # fields may be None: sort by the text
            attrs = {"verb": need.verb, "resource": need.resource, "group": need.group}
            attrs.update(
                {
                    k: v
                    for k, v in (
                        ("namespace", need.namespace),
                        ("name", need.name),
                        ("subresource", need.subresource),
                    )
                    if v
                }
            )
            review = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attrs},
            }
            try:
                resp = authz.create_self_subject_access_review(review, _request_timeout=REQUEST_TIMEOUT)
            except ApiException as e:
                raise DeployError(f"cannot check access ({need}): {api_message(e)}") from None
            if not resp.status.allowed:
                out.append(need)
        return out

    def require(self, needs: Iterable[Need], doing: str) -> None:
        missing = self.denied(needs)
        if missing:
            listed = "; ".join(str(n) for n in missing)
            raise DeployError(f"{doing}: not allowed to {listed} (nothing was changed)")

    # --- apply ------------------------------------------------------------------------------

    def _ssa(self, obj: Obj, *, dry_run: bool) -> None:
        res = self.resource(obj)
        ns = obj["metadata"].get("namespace") if res.namespaced else None
        self.dyn.server_side_apply(
            res,
            body=obj,
            name=obj["metadata"]["name"],
            namespace=ns,
            field_manager=FIELD_MANAGER,
            force_conflicts=True,
            dry_run="All" if dry_run else None,
            _request_timeout=REQUEST_TIMEOUT,
        )

    def _dry_run(self, objects: list[Obj]) -> list[str]:
        failures = []
        for obj in objects:
            try:
                self._ssa(obj, dry_run=True)
            except ApiException as e:
                failures.append(f"{ref(obj)}: {api_message(e)}")
        return failures

    def apply(
        self,
        objects: list[Obj],
        *,
        needs: Iterable[Need] = (),
        doing: str = "deploy",
        namespace_wait: float = NAMESPACE_WAIT,
    ) -> list[Obj]:
        """Check access, dry-run all, then apply all (see the module docstring).

        Returns the objects this run created (not those it updated), for a caller that must
        undo the deploy when a later step fails."""
        objects = apply_order(objects)
        self.require([*self.needs_for(objects, ("get", "patch")), *needs], doing)
        self._wait_namespaces_deleted(objects, namespace_wait)
        live = {ref(o): self.get(o) for o in objects}
        skipped = [
            o
            for o in objects
            if o["kind"] == "Namespace" and live[ref(o)] is not None and not is_ours(live[ref(o)])
        ]
        for o in skipped:
            logger.info(
                "Namespace exists and is not ours; leaving it as it is",
                extra=kv(namespace=o["metadata"]["name"]),
            )
        objects = [o for o in objects if o not in skipped]
        self.require(self.needs_for([o for o in objects if live[ref(o)] is None], ("create",)), doing)

        existing_ns = {o["metadata"]["name"] for o in skipped} | {
            o["metadata"]["name"] for o in objects if o["kind"] == "Namespace" and live[ref(o)] is not None
        }
        wanted_ns = {o["metadata"].get("namespace") for o in objects} - {None}
        for ns in sorted(wanted_ns - existing_ns):
            if self.get({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}) is not None:
                existing_ns.add(ns)
            elif not any(o["kind"] == "Namespace" and o["metadata"]["name"] == ns for o in objects):
                raise DeployError(
                    f"namespace {ns} does not exist and is not among the objects (nothing was changed)"
                )

        def can_dry_run(o: Obj) -> bool:
            ns = o["metadata"].get("namespace")
            return ns is None or ns in existing_ns

        first = [o for o in objects if can_dry_run(o)]
        rest = [o for o in objects if not can_dry_run(o)]
        failures = self._dry_run(first)
        if failures:
            raise DeployError(
                "the server rejects (dry run; nothing was changed):\n  " + "\n  ".join(failures)
            )
        created: list[Obj] = []
        try:
            if rest:
                for o in objects:
                    if o["kind"] == "Namespace" and live[ref(o)] is None:
                        self._apply_one(o)
                        created.append(o)
                failures = self._dry_run(rest)
                if failures:
                    raise DeployError(
                        "the server rejects (dry run; nothing was changed):\n  " + "\n  ".join(failures)
                    )
            for o in objects:
                if o in created:
                    continue
                self._apply_one(o)
                if live[ref(o)] is None:
                    created.append(o)
        except BaseException as e:
            self.roll_back(created)
            if isinstance(e, ApiException):
                changed = [ref(o) for o in objects if live[ref(o)] is not None]
                raise DeployError(
                    f"apply failed: {api_message(e)}; the objects this run created were deleted"
                    + (f"; updated before the failure: {', '.join(changed)}" if changed else "")
                ) from None
            raise
        return created

    def _wait_namespaces_deleted(self, objects: list[Obj], timeout: float) -> None:
        """Wait out the deletion of a namespace the objects go in (a restore just before):
        nothing can be created in a namespace being deleted, and it is created again once gone."""
        names = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
        names |= {o["metadata"].get("namespace") for o in objects} - {None}
        for name in sorted(names):
            probe = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            live = self.get(probe)
            if live is None or not (live.get("metadata") or {}).get("deletionTimestamp"):
                continue
            logger.info("Namespace is being deleted; waiting until it is gone", extra=kv(namespace=name))

            def gone(probe: Obj = probe) -> tuple[bool, str]:
                now = self.get(probe)
                return now is None, "gone" if now is None else f"{(now.get('status') or {}).get('phase')}"

            try:
                poll(f"namespace {name} deleted", gone, timeout)
            except DeployError as e:
                raise DeployError(
                    f"{e}: nothing can be created in a namespace being deleted (is a finalizer "
                    f"holding it? make finalize-namespace NAMESPACE={name}); nothing was changed"
                ) from None

    def _apply_one(self, obj: Obj) -> None:
        self._ssa(obj, dry_run=False)
        logger.info("Applied", extra=kv(object=ref(obj)))

    def roll_back(self, created: list[Obj]) -> None:
        """Delete what an apply created (best effort, in reverse order)."""
        for o in delete_order(created):
            try:
                self.delete_one(o)
            except DeployError as e:
                logger.warning("Could not roll back", extra=kv(object=ref(o), err=str(e)))

    # --- delete -----------------------------------------------------------------------------

    def delete_one(self, obj: Obj) -> bool:
        """Delete (dependents in the background); False when it was not there."""
        res = self.resource(obj)
        ns = obj["metadata"].get("namespace") if res.namespaced else None
        try:
            self.dyn.delete(
                res,
                name=obj["metadata"]["name"],
                namespace=ns,
                propagation_policy="Background",
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as e:
            if e.status == 404:
                return False
            raise DeployError(f"{ref(obj)}: cannot delete it: {api_message(e)}") from None
        logger.info("Deleted", extra=kv(object=ref(obj)))
        return True

    def delete(
        self,
        objects: list[Obj],
        *,
        needs: Iterable[Need] = (),
        doing: str = "restore",
        check_access: bool = True,
    ) -> list[Obj]:
        """Delete what exists of ``objects`` in reverse apply order; returns what was deleted.

        A Namespace goes only if it is ours (managed-by label) and no Deployment is left in it
        (another method's objects may share it)."""
        objects = delete_order(objects)
        if check_access:
            self.require([*self.needs_for(objects, ("get", "delete")), *needs], doing)
        live = {ref(o): self.get(o) for o in objects}
        present = [o for o in objects if live[ref(o)] is not None]
        deleted = []
        for o in present:
            if o["kind"] == "Namespace":
                keep = self._namespace_keep_reason(o["metadata"]["name"], live[ref(o)])
                if keep:
                    logger.info("Keeping namespace", extra=kv(namespace=o["metadata"]["name"], reason=keep))
                    continue
            if self.delete_one(o):
                deleted.append(o)
        return deleted

    def _namespace_keep_reason(self, name: str, live: Obj | None) -> str | None:
        if not is_ours(live):
            return "not created by dynamic-scheduler"
        res = self.dyn.resources.get(api_version="apps/v1", kind="Deployment")
        try:
            items = (
                self.dyn.get(res, namespace=name, _request_timeout=REQUEST_TIMEOUT).to_dict().get("items")
                or []
            )
        except ApiException as e:
            raise DeployError(f"cannot list the Deployments of namespace {name}: {api_message(e)}") from None
        left = sorted(i["metadata"]["name"] for i in items if not i["metadata"].get("deletionTimestamp"))
        if left:
            return f"Deployments remain: {', '.join(left)}"
        logger.log(V(2), "Namespace holds no Deployment", extra=kv(namespace=name))
        return None
