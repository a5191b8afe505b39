"""``make bench``: scheduling throughput and latency of dynamic-scheduler against
kube-scheduler and against the API server's own limit, on kwok nodes.

Every contender schedules the same pods, in turn, on the same kind cluster:
kwok-simulated nodes registered in its API server (the ``kwok`` controller runs
as a local process and manages only the nodes annotated
``kwok.x-k8s.io/node=fake``, and the pods on them). The schedulers run as local
processes against the cluster's kubeconfig; each contender has its own
namespace and schedulerName. ``python -m bench --help`` lists the options;
the README's "Benchmark" section says what is measured and how.
"""
