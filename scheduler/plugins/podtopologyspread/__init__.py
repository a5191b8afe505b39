"""kube-scheduler's ``PodTopologySpread``.

- ``constraints``: a pod's constraints (or the profile's defaults) and what each node counts;
- ``plugin``: the filter (maxSkew) and the score.
"""

from scheduler.plugins.podtopologyspread.plugin import PodTopologySpread

__all__ = ["PodTopologySpread"]
