"""dynamic-scheduler: a kube-scheduler-compatible scheduler with a load-aware plugin."""

__version__ = "0.1.0"
