"""``python -m bench.soak``: ours leading for hours under churn (``make soak``).

The lease method deployed on kind (three replicas, kube-scheduler a standby),
kwok nodes, and for the soak's length: pods created and deleted at a steady
rate (``churn``), kwok nodes added and removed, the leader's pod deleted every
ten minutes, Prometheus restarted once (``plan``). Every minute ``sample``
reads each replica's RSS and CPU (crictl on its kind node), the leader's queue
lengths (its ``/metrics``) and the pods Pending; a watch of the pods and of
their ``Scheduled`` events says whether each pod was bound once, where it fit.
``report`` states the goals (``bench/results/soak/latest.{json,md,png}``).
"""
