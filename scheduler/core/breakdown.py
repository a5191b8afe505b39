"""A cycle's score breakdown: which plugin decided between two nodes, and the log line that says so.

``Profile.score`` fills a :data:`Breakdown` when asked (``explain``, shadow
mode, or ``-v=5``); :func:`largest_lead` names the plugin that put one node
ahead of another, and :func:`log_top_nodes` writes the ``Scored nodes`` line
at ``-v=5`` (this module's logger), so that "why this node" can be answered
from the log.
"""

from __future__ import annotations

import logging

from scheduler.core.nodeinfo import NodeInfo
from scheduler.core.podinfo import PodInfo
from scheduler.logs import V, kv

logger = logging.getLogger(__name__)

EXPLAIN_LEVEL = V(5)
"""At ``-v=5`` each cycle logs its best nodes' totals and the plugin that decided (``log_top_nodes``)."""
TOP_NODES = 3


Breakdown = list[tuple[str, int, list[int], list[int]]]
"""Per score plugin (name, weight, raw scores, normalized scores), in the feasible nodes' order;
a plugin skipped at PreScore has empty lists (``Profile.score``'s ``breakdown``)."""


def largest_lead(breakdown: Breakdown, a: int, b: int) -> tuple[str, int] | None:
    """The score plugin that gives node ``a`` its largest weighted lead over node ``b`` (indexes
    into the feasible nodes), and that lead; None when every plugin was skipped."""
    leads = [((n[a] - n[b]) * weight, name) for name, weight, _, n in breakdown if n]
    if not leads:
        return None
    points, plugin = max(leads)
    return plugin, points


def log_top_nodes(
    pod: PodInfo,
    feasible: list[NodeInfo],
    totals: list[int],
    breakdown: Breakdown,
    chosen: str,
) -> None:
    """``Scored nodes``: the best ``TOP_NODES`` totals, and the plugin that gave the chosen node
    its largest lead over the runner-up (weighted points), so that "why this node" can be
    answered from the log, without annotations on the pod."""
    order = sorted(range(len(feasible)), key=lambda i: -totals[i])
    top = ",".join(f"{feasible[i].name}={totals[i]}" for i in order[:TOP_NODES])
    at = next(i for i, ni in enumerate(feasible) if ni.name == chosen)
    runner = next((i for i in order if i != at), None)
    decided = ""
    if runner is not None:
        rival = feasible[runner].name
        lead = largest_lead(breakdown, at, runner)
        if totals[at] == totals[runner]:
            decided = f"a tie with {rival}, broken at random"
        elif lead is not None:
            decided = f"{lead[0]} +{lead[1]} over {rival}"
    logger.log(
        EXPLAIN_LEVEL, "Scored nodes", extra=kv(pod=pod.key, node=chosen, top=top, decidedBy=decided or None)
    )


def breakdown_wanted() -> bool:
    """Whether cycles should collect their breakdown for :func:`log_top_nodes`."""
    return logger.isEnabledFor(EXPLAIN_LEVEL)
