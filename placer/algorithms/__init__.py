"""Placement methods: pure functions ``Instance -> Result``, behind one entry point.

``place(instance, method=...)`` first rules out requests no placement can meet (a node larger than
every device, a concurrency no device holds, pins that cannot all hold, more devices needed than
the fleet has) and reports them as ``Status.INFEASIBLE`` with the reason and, where more live
requests are the cause, the largest concurrency that does fit. Otherwise it runs the method,
re-checks the placement in exact bytes (:func:`placer.algorithms.check.check_placement`) and
attaches the lower bound.

Methods: ``cpsat`` (exact, with proofs), ``dp`` (exact contiguous chains), ``greedy`` (contiguous
next-fit), ``typepack`` (the published rule), ``ffd`` (first-fit decreasing), ``bound`` (lower
bounds only).
"""

from __future__ import annotations

import importlib
from time import perf_counter

from ..errors import InvalidSpec
from ..instance import Instance
from ..placement import Result, Status
from .bound import bounds
from .check import PlacementBug, check_placement
from .pins import PinConflict, pin_groups

__all__ = ["place", "METHODS", "MODES_OF", "default_mode", "max_feasible_concurrency", "infeasibility",
           "PlacementBug"]

METHODS = ("cpsat", "dp", "greedy", "typepack", "ffd", "bound")

# the modes each method places in
MODES_OF = {
    "cpsat": ("contiguous", "free", "split"),
    "dp": ("contiguous", "split"),
    "greedy": ("contiguous", "split"),
    "typepack": ("free",),
    "ffd": ("free",),
    "bound": ("contiguous", "free", "split"),
}

# options of the exact solver; the other methods take none and ignore these
SOLVER_OPTIONS = ("time_limit", "seed", "workers", "progress", "hint", "objective")


def default_mode(method: str) -> str:
    """The mode ``method`` places in when none is asked for."""
    return MODES_OF.get(method, ("contiguous",))[0]


def _method(name: str):
    if name == "cpsat":   # imported on use: OR-Tools is heavy to load
        return importlib.import_module(".cpsat", __name__).cpsat
    module = importlib.import_module(f".{name}", __name__)
    return getattr(module, name)


def infeasibility(instance: Instance, named: dict[str, int] | None = None) -> tuple[str, bool] | None:
    """Why no placement of ``instance`` can exist, or None when nothing rules one out.

    Returns (reason, weights_alone): ``weights_alone`` is true when even zero live requests would
    not fit, so lowering the concurrency cannot help. Cheap: per-node and per-pin checks, then the
    lower bound (``named``: :func:`placer.algorithms.bound.bounds`, when already computed) against
    the fleet size.
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
        return (f"at least {lb} devices are needed ({which} bound); the fleet has {instance.n_devices} "
                f"available", False)
    return None


def _check_method(instance: Instance, method: str) -> None:
    if method not in METHODS:
        raise InvalidSpec("--method", "method", f"unknown method {method!r} (one of {', '.join(METHODS)})")
    if instance.mode not in MODES_OF[method]:
        raise InvalidSpec("--mode", "mode", f"{method} places in {' or '.join(MODES_OF[method])} mode, "
                                            f"not {instance.mode}")


def _solve(instance: Instance, method: str, opts: dict, lb: int | None = None) -> Result:
    fn = _method(method)
    return fn(instance, lower_bound=lb, **(opts if method == "cpsat" else {}))


def place(instance: Instance, method: str = "cpsat", **opts) -> Result:
    """Place ``instance`` with ``method`` (see :data:`METHODS`) and return a checked :class:`Result`.

    ``opts`` go to ``cpsat`` (``time_limit`` seconds, ``seed``, ``workers``, ``progress`` callable,
    ``hint``); the other methods take none. Raises :class:`InvalidSpec` for an unknown method or a
    mode the method does not place in, :class:`PlacementBug` when a method's placement fails the
    exact check.
    """
    t0 = perf_counter()
    _check_method(instance, method)
    unknown = set(opts) - set(SOLVER_OPTIONS)
    if unknown:
        raise TypeError(f"unknown option(s) for place(): {', '.join(sorted(unknown))}")
    named = bounds(instance)
    lb = max(named.values())
    why = infeasibility(instance, named)
    if why is not None:
        reason, alone = why
        mc = None if alone else max_feasible_concurrency(instance)
        if mc is not None and mc >= 0:
            reason += f"; the largest concurrency that fits is {mc}"
        return Result(method, instance.mode, Status.INFEASIBLE, lower_bound_devices=lb, message=reason,
                      max_concurrency=mc if mc is not None and mc >= 0 else None,
                      seconds=perf_counter() - t0, stats={"bounds": named})
    if method == "bound":
        which = max(named, key=named.get)
        return Result("bound", instance.mode, Status.UNKNOWN, lower_bound_devices=lb, bound=float(lb),
                      message=f"lower bound only ({which})", seconds=perf_counter() - t0,
                      stats={"bounds": named})
    result = _solve(instance, method, opts, lb)
    stats = dict(result.stats)
    stats["bounds"] = named
    result = result.replace(lower_bound_devices=max(lb, result.lower_bound_devices or 0),
                            seconds=perf_counter() - t0, stats=stats)
    if result.assignment is not None:
        check_placement(instance, result)
        if result.devices_used < result.lower_bound_devices:
            raise PlacementBug(f"method {method} used {result.devices_used} devices, below the lower bound "
                               f"{result.lower_bound_devices}")
    elif result.status == Status.INFEASIBLE and result.max_concurrency is None:
        mc = max_feasible_concurrency(instance)
        if mc is not None and mc >= 0 and mc < instance.workload.concurrency:
            result = result.replace(max_concurrency=mc,
                                    message=f"{result.message}; the largest concurrency that fits is {mc}")
    return result


def max_feasible_concurrency(instance: Instance, method: str | None = None) -> int | None:
    """The largest live-request count for which ``method`` (default: ``dp`` for contiguous and split
    modes, ``ffd`` for free mode) finds a placement, by exponential then binary search.

    Exact when the method is exact for the instance (``dp`` on identical devices and a chain); with
    a heuristic it is the largest concurrency the heuristic places (a value that surely fits).
    ``method="bound"`` gives the other side: the largest concurrency the lower bounds do not rule
    out (no larger value can fit). Returns -1 when not even zero live requests fit, None when no
    node holds per-request memory (no limit).
    """
    method = method or ("ffd" if instance.mode == "free" else "dp")
    _check_method(instance, method)
    cmax = max(instance.capacity_bytes)
    per_node = [(cmax - w) // r for w, r in zip(instance.weight_bytes, instance.request_bytes) if r > 0]

    def fits(c: int) -> bool:
        probe = instance.with_concurrency(c)
        named = bounds(probe)
        if infeasibility(probe, named) is not None:
            return False
        return method == "bound" or _solve(probe, method, {}, max(named.values())).feasible

    if not fits(0):
        return -1
    if not per_node:
        return None
    ceiling = min(per_node)   # beyond it some node fits no device on its own
    lo, step = 0, 1
    while True:
        c = min(step, ceiling)
        if c <= lo or not fits(c):
            hi = c if c > lo else ceiling + 1
            break
        lo = c
        if c == ceiling:
            return lo
        step *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo
