"""``dynamic-scheduler explain``: the cluster listed once, and one pod's cycle with every verdict kept."""
