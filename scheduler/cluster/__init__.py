"""Talking to the API server: the client, informers, binding and events, leader election.

- :mod:`scheduler.cluster.client`: ``new_api_client`` (kubeconfig or in-cluster, QPS/burst, timeouts)
- :mod:`scheduler.cluster.informers`: ``Informer`` (list+watch into a store of raw dicts)
- :mod:`scheduler.cluster.store`: the resources watched and the ``ObjectStore`` they go into
- :mod:`scheduler.cluster.binder`: ``Binder`` (pods/binding, the PodScheduled condition)
- :mod:`scheduler.cluster.events`: ``EventRecorder`` (asynchronous events.k8s.io/v1 events)
- :mod:`scheduler.cluster.leaderelection`: ``LeaderElector`` (client-go's Lease semantics)
- :mod:`scheduler.cluster.leases`: the Lease object, our annotations on it, the standby's watch
- :mod:`scheduler.cluster.takeover`: taking a Lease from a foreign holder, and giving it back
- :mod:`scheduler.cluster.preemption`: ``PreemptionExecutor`` (evicting victims)
"""
