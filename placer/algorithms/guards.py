"""Requests no placement can meet, found cheaply before any method runs.

:func:`infeasibility` is the guard :func:`placer.algorithms.place` runs first (methods rely on it
and do not repeat it); the concurrency search of the CP-SAT method runs it on every probe.
"""

from __future__ import annotations

from placer.algorithms.bound import bounds
from placer.algorithms.pins import PinConflict, pin_groups
from placer.algorithms.reach import reachability_infeasibility
from placer.problem.instance import Instance

__all__ = ["infeasibility"]


def infeasibility(instance: Instance, named: dict[str, int] | None = None) -> tuple[str, bool] | None:
    """Why no placement of ``instance`` can exist, or None when nothing rules one out.

    Returns (reason, weights_alone): ``weights_alone`` is true when even zero live requests would
    not fit, so lowering the concurrency cannot help. Cheap: per-node and per-pin checks, then the
    lower bound (``named``: :func:`placer.algorithms.bound.bounds`, when already computed) against
    the fleet size, then the pieces of a fleet cut by unavailable devices
    (:func:`placer.algorithms.reach.reachability_infeasibility`), and, with ``attention-per-stage``
    or ``decoder-per-stage``, the lower bound against the layers every stage must hold one of.
    """
    caps = instance.capacity_bytes
    cmax = max(caps)
    big = max(range(instance.n_devices), key=lambda d: (caps[d], -d))
    where = f"the largest device ({instance.devices[big].id}) holds {cmax:,} B after activation buffers"
    weights = instance.weight_bytes
    heaviest = max(range(instance.n_nodes), key=lambda i: weights[i])
    if weights[heaviest] > cmax:
        return (f"node {instance.nodes[heaviest].name} needs {weights[heaviest]:,} B for its weights alone; "
                f"{where}", True)
    demand = instance.demand_bytes
    worst = max(range(instance.n_nodes), key=lambda i: demand[i])
    c = instance.workload.concurrency
    if demand[worst] > cmax:
        return (f"node {instance.nodes[worst].name} needs {weights[worst]:,} B of weights + {c} live "
                f"requests x {instance.request_bytes[worst]:,} B = {demand[worst]:,} B; {where}", False)
    try:
        groups = pin_groups(instance)
    except PinConflict as exc:
        return str(exc), True
    for g in groups:
        d = big if g.device is None else g.device
        need = sum(demand[i] for i in g.nodes)
        if need > caps[d]:
            alone = sum(weights[i] for i in g.nodes) > caps[d]
            what = f"device {instance.devices[d].id}" if g.device is not None else "any device"
            return (f"the pinned nodes {instance.nodes[g.nodes[0]].name}..{instance.nodes[g.nodes[-1]].name} "
                    f"need {need:,} B together; {what} holds {caps[d]:,} B", alone)
    named = bounds(instance) if named is None else named
    lb = max(named.values())
    if lb > instance.n_devices:
        which = max(named, key=named.get)
        return (f"at least {instance.count_words(lb)} are needed ({which} bound); the fleet has "
                f"{instance.count_words(instance.n_devices, bare=True)} available", False)
    cut = reachability_infeasibility(instance, infeasibility)
    if cut is not None:
        return cut, False
    for name, nodes in instance.cover_sets:
        stages = len(nodes)
        if lb > stages:
            which = max(named, key=named.get)
            what = "full-attention" if name == "attention-per-stage" else "decoder"
            return (f"at least {instance.count_words(lb)} are needed ({which} bound), but the model has {stages} "
                    f"{what} layers, one for each stage at most ({name})", False)
    return None
