"""The scheduling plugins, one module per kube-scheduler plugin.

``scheduler.plugins.registry`` maps the names a configuration uses to the
plugin classes; ``scheduler.plugins.helpers`` holds the selector and taint
matching the plugins share.
"""
