"""The scheduling plugins, one module per kube-scheduler plugin.

``scheduler.plugins.registry`` maps the names a configuration uses to the
plugin classes. What several plugins share has its own module:
``labelselector`` (label selectors), ``nodeselector`` (node selector terms
and a pod's required node affinity), both built on ``labelrequirements``
(parsing and compiling label requirements), ``taints`` (taints and
tolerations) and ``topologycounts`` (per-node counts kept across cycles).
"""
