"""kube-scheduler's ``VolumeBinding``: a pod's claims bound to volumes that fit its node.

- ``volumes``: the PersistentVolume(Claim) rules on the raw API objects;
- ``plugin``: PreFilter to PreBind, the decisions per node;
- ``api``: PreBind's writes, and the wait for the claims to be bound.
"""

from scheduler.plugins.volumebinding.plugin import VolumeBinding

__all__ = ["VolumeBinding"]
