"""Deploying the scheduler in place of kube-scheduler, and the tools around it.

Commands (each module's ``main(argv) -> int``, reached through ``dynamic-scheduler <command>``):

- ``render`` (render.py): manifests/ + values -> YAML, no cluster;
- ``deploy`` (deploy.py): render, check access, dry-run all, apply, wait, take over;
- ``restore`` (restore.py): back to kube-scheduler, everything of ours removed;
- ``churn`` (churn.py): delete a namespace's pods on a timer;
- ``finalize-namespace`` (finalize_namespace.py): release a namespace stuck in Terminating.

Underneath: values.py (the values schema), templates.py (Jinja2 rendering and
apply order), kube.py (all-or-nothing apply and delete), waiting.py (waits with
deadlines), static.py and nodefs.py (the static-pod method's node files).
"""
