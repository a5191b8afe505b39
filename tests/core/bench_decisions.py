"""Micro-benchmark: CPU time of a shadow decision, of an ``explain``, and of a scheduling cycle.

    python tests/core/bench_decisions.py [--nodes 100 1000] [--repeat 30]

For each size, N nodes (32 CPUs, 128 GiB, three zones) with 5N bound pods of 100m/128Mi on
random nodes, the default profile, and fresh pending pods of 100m/64Mi: the median thread
CPU time of ``compare`` (what shadow mode runs per bind), of ``explain`` (every verdict
kept, what the explain command runs), and of ``Profile.schedule`` (a real cycle, with its
node sampling), and the process's peak RSS. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable

sys.path[:0] = [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))]

from scheduler.core.cache import Cache  # noqa: E402
from scheduler.core.explain import compare, explain  # noqa: E402
from scheduler.core.framework import CycleState  # noqa: E402
from tests.core.test_explain import default_profile  # noqa: E402
from tests.core.util import node, pinfo  # noqa: E402


def median_ms(fn: Callable[[int], object], repeat: int) -> float:
    times = []
    for k in range(repeat):
        start = time.thread_time()
        fn(k)
        times.append(time.thread_time() - start)
    return statistics.median(times) * 1000


def measure(cache: Cache, repeat: int) -> tuple[float, float, float]:
    prof = default_profile(cache)
    pods = [pinfo(f"p{k}", cpu="100m", memory="64Mi") for k in range(repeat)]
    shadow = median_ms(lambda k: compare(prof, pods[k], cache, "n3"), repeat)
    full = median_ms(lambda k: explain(prof, pods[k], cache), repeat)
    cycle = median_ms(lambda k: prof.schedule(CycleState(), pods[k], cache), repeat)
    return shadow, full, cycle


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--repeat", type=int, default=30)
    args = p.parse_args()
    rng = random.Random(1)
    for n in args.nodes:
        cache = Cache()
        for i in range(n):
            cache.add_node(
                node(f"n{i}", cpu="32", memory="128Gi", labels={"topology.kubernetes.io/zone": f"z{i % 3}"})
            )
        for j in range(5 * n):
            cache.add_pod(pinfo(f"b{j}", cpu="100m", memory="128Mi", node=f"n{rng.randrange(n)}"))
        shadow, full, cycle = measure(cache, args.repeat)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        sys.stdout.write(
            f"{n} nodes, {5 * n} pods: shadow decision {shadow:.1f} ms, explain {full:.1f} ms, "
            f"cycle {cycle:.1f} ms (medians of {args.repeat}); peak RSS {rss:.0f} MiB\n"
        )


if __name__ == "__main__":
    main()
