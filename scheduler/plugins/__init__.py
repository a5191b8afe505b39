"""The scheduling plugins, one module per kube-scheduler plugin, or one package for a plugin
with parts of its own (``volumebinding``, ``podtopologyspread``, ``interpodaffinity``,
``noderesources``, ``dynamicresources``, ``dynamic``).

``scheduler.plugins.registry`` maps the names a configuration uses to the
plugin classes. What several plugins share has its own module:
``labelselector`` (label selectors), ``nodeselector`` (node selector terms
and a pod's required node affinity), both built on ``labelrequirements``
(parsing and compiling label requirements), ``taints`` (taints and
tolerations) and ``topologycounts`` (per-node counts kept across cycles).
"""
