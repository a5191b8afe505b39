"""kube-scheduler's ``InterPodAffinity``.

- ``terms``: pod (anti-)affinity terms compiled for matching;
- ``plugin``: the filter over existing pods' terms and the pod's own, and the score.
"""

from scheduler.plugins.interpodaffinity.plugin import InterPodAffinity

__all__ = ["InterPodAffinity"]
