"""kube-scheduler's ``noderesources`` plugins.

- ``fit``: ``NodeResourcesFit``, the filter on requests and its scoring strategies;
- ``balancedallocation``: ``NodeResourcesBalancedAllocation``;
- ``scoring``: what both score with (the resources configured, requested and allocatable).
"""

from scheduler.plugins.noderesources.balancedallocation import NodeResourcesBalancedAllocation
from scheduler.plugins.noderesources.fit import NodeResourcesFit

__all__ = ["NodeResourcesBalancedAllocation", "NodeResourcesFit"]
