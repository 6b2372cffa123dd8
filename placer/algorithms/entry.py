"""``place()``: the one entry point, owning every guard around the methods.

``place(instance, method=...)`` first rules out requests no placement can meet (a node larger than
every device, a concurrency no device holds, pins that cannot all hold, more devices needed than
the fleet has) and reports them as ``Status.INFEASIBLE`` with the reason and, where more live
requests are the cause, the largest concurrency that does fit. Otherwise it runs the method
(methods assume these checks passed and do not repeat them), re-checks the placement once in
exact bytes (:func:`placer.algorithms.check.check_placement`), refuses a count below the lower
bound, and attaches the bounds.
"""

from __future__ import annotations

import time
from dataclasses import replace

from placer.algorithms.bound import bounds
from placer.algorithms.check import PlacementBug, check_placement, requirement_violation
from placer.algorithms.deadline import Deadline, interrupt_scope, interrupted
from placer.algorithms.guards import infeasibility
from placer.algorithms.objectives import parse_objective
from placer.algorithms.quotient import quotient
from placer.algorithms.registry import method as method_row
from placer.algorithms.search import largest_true
from placer.problem.instance import Instance
from placer.problem.placement import Result, Status
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.workload import MAX_CONCURRENCY

__all__ = ["place", "infeasibility", "max_feasible_concurrency", "largest_feasible_concurrency", "decide_feasible",
           "PlacementBug"]

# seconds one CP-SAT probe of a concurrency search may take when no budget is given
PROBE_SECONDS = 2.0


def _check_method(instance: Instance, name: str):
    row = method_row(name)
    if instance.mode not in row.modes:
        raise InvalidSpec(ARGUMENT, "mode", f"{name} places in {' or '.join(row.modes)} mode, not {instance.mode}")
    return row


def place(instance: Instance, method: str = "cpsat", **opts) -> Result:
    """Place ``instance`` with ``method`` (see :mod:`placer.algorithms.registry`) and return a
    checked :class:`Result`.

    ``opts`` are the method's options (for ``cpsat``: :class:`~placer.algorithms.registry.CpsatOptions`);
    a method without options takes none (TypeError). Raises :class:`InvalidSpec` (field ``method``
    or ``mode``) for an unknown method or a mode the method does not place in,
    :class:`PlacementBug` when a method's placement fails the exact check or undercuts the bound.

    Ctrl-C (see :mod:`placer.algorithms.deadline`): a result is ``interrupted`` whenever one was
    noted during the call; called inside a caller's :func:`~placer.algorithms.deadline.interrupt_scope`
    with a Ctrl-C already noted, no method runs and the result is interrupted with no placement.
    """
    with interrupt_scope():
        result = _place(instance, method, opts)
        if interrupted() and not result.interrupted:
            # a Ctrl-C during this call that no method result carries (a concurrency probe, a guard)
            result = result.replace(interrupted=True)
        return result


def _place(instance: Instance, method: str, opts: dict) -> Result:
    t0 = time.perf_counter()
    row = _check_method(instance, method)
    options = row.parse_options(opts)
    if interrupted():
        # a Ctrl-C the caller that owns this sequence of solves has not seen yet: start nothing
        return Result(method, instance.mode, Status.UNKNOWN, message="interrupted before the solve started",
                      interrupted=True)
    if options is not None and hasattr(options, "deadline"):
        # one deadline for the method and the concurrency search after it (not a fresh limit each)
        options = replace(options, deadline=Deadline.of(options.deadline, options.time_limit))
    named = bounds(instance)
    lb = max(named.values())
    why = infeasibility(instance, named)
    if why is not None:
        reason, alone = why
        mc = None
        if not alone:
            mc, sure = largest_feasible_concurrency(instance, budget=_budget(options))
            if mc is not None and mc >= 0:
                reason += f"; the largest concurrency that fits is {mc}" + ("" if sure else " or more")
        return Result(method, instance.mode, Status.INFEASIBLE, lower_bound_devices=lb, message=reason,
                      max_concurrency=mc if mc is not None and mc >= 0 else None,
                      seconds=time.perf_counter() - t0, stats={"bounds": named})
    if method == "bound":
        which = max(named, key=named.get)
        return Result("bound", instance.mode, Status.UNKNOWN, lower_bound_devices=lb, bound=float(lb),
                      message=f"lower bound only ({which})", seconds=time.perf_counter() - t0,
                      stats={"bounds": named})
    kwargs = options.as_kwargs() if options is not None else {}
    result = _run_method(row, instance, lb, kwargs)
    broken = requirement_violation(instance, result.assignment) if result.assignment is not None else None
    if broken is not None:
        # a method that does not model the requirement: its placement is no answer, and claims nothing
        result = Result(method, instance.mode, Status.UNKNOWN, lower_bound_devices=result.lower_bound_devices,
                        message=f"{method} does not honour the requirement: {broken}; use cpsat",
                        seconds=result.seconds, stats=result.stats)
    stats = dict(result.stats)
    stats["bounds"] = named
    result = result.replace(lower_bound_devices=max(lb, result.lower_bound_devices or 0),
                            seconds=time.perf_counter() - t0, stats=stats)
    if result.assignment is not None:
        check_placement(instance, result)
        if result.devices_used < result.lower_bound_devices:
            raise PlacementBug(f"method {method} used {result.devices_used} devices, below the lower bound "
                               f"{result.lower_bound_devices}")
    elif result.status == Status.INFEASIBLE and result.max_concurrency is None:
        mc, sure = largest_feasible_concurrency(instance, budget=_budget(options))
        if mc is not None and 0 <= mc < instance.workload.concurrency:
            result = result.replace(max_concurrency=mc,
                                    message=f"{result.message}; the largest concurrency that fits is {mc}"
                                            + ("" if sure else " or more"))
    return result


def _run_method(row, instance: Instance, lb: int, kwargs: dict) -> Result:
    """The method on a quotient of the fleet where that is an exact reduction
    (:mod:`placer.algorithms.quotient`: devices first among the levels, a large fleet of
    interchangeable devices), its answer laid back on the real devices; else, or when the plan
    found breaks the quotient's premise, on the whole fleet."""
    objective = kwargs.get("objective")
    q = quotient(instance) if objective is None or parse_objective(objective)[0] == "devices" else None
    if q is not None:
        hint = kwargs.get("hint")
        assignment = getattr(hint, "assignment", hint)
        inside = {d: k for k, d in enumerate(q.kept)}
        mapped = None if assignment is None or any(d not in inside for d in assignment) else \
            [inside[d] for d in assignment]
        got = row.function(q.instance, lower_bound=lb, **{**kwargs, "hint": mapped} if "hint" in kwargs else kwargs)
        if q.exact_for(got):
            return q.expand(got)
    return row.function(instance, lower_bound=lb, **kwargs)


def _budget(options) -> float:
    deadline = getattr(options, "deadline", None)
    if deadline is not None:
        return deadline.remaining()
    return float(getattr(options, "time_limit", None) or 10.0)


def decide_feasible(instance: Instance, *, time_limit: float = PROBE_SECONDS, method: str | None = None
                    ) -> bool | None:
    """Whether ``instance`` has a placement: True, False, or None (undecided within ``time_limit``).

    The cheap checks first, then the fast method of the mode (``ffd`` / ``dp``: a placement it finds
    settles the question), then CP-SAT, the exact method. ``method``: decide with that method alone
    (``bound``: only the lower bounds; True means "not ruled out").
    """
    named = bounds(instance)
    if infeasibility(instance, named) is not None:
        return False
    lb = max(named.values())
    if method == "bound":
        return True
    if method is not None:
        r = method_row(method).function(instance, lower_bound=lb)
        return True if r.feasible else (False if r.status == Status.INFEASIBLE else None)
    fast = "ffd" if instance.mode == "free" else "dp"
    r = method_row(fast).function(instance, lower_bound=lb)
    if r.feasible:
        return True
    if r.status == Status.INFEASIBLE:
        return False
    if time_limit <= 0.05:
        return None
    r = method_row("cpsat").function(instance, lower_bound=lb, time_limit=time_limit, seed=0, threads=1,
                                     objective="devices")
    if r.feasible:
        return True
    if r.status == Status.INFEASIBLE:
        return False
    return None


def largest_feasible_concurrency(instance: Instance, method: str | None = None, *, budget: float = 10.0
                                 ) -> tuple[int | None, bool]:
    """The largest live-request count for which a placement exists: ``(value, proven)``.

    Decided by :func:`decide_feasible` (the fast method, then the exact CP-SAT, each probe within
    the time left of ``budget`` seconds); a probe left undecided counts as "does not fit" and makes
    the value a lower bound (``proven`` False). ``method`` decides with that method alone
    (``"bound"``: the largest concurrency the lower bounds do not rule out, an upper bound).
    Value -1 when not even zero live requests fit, None when no node holds per-request memory
    (no limit).
    """
    if method is not None:
        _check_method(instance, method)
    cmax = max(instance.capacity_bytes)
    per_node = [(cmax - w) // r for w, r in zip(instance.weight_bytes, instance.request_bytes) if r > 0]
    stop = Deadline.after(max(budget, 0.0))

    def decide(c: int) -> bool | None:
        if interrupted():       # Ctrl-C: no further probes; what is known stands (a lower bound)
            return None
        left = stop.remaining()
        return decide_feasible(instance.with_concurrency(c), time_limit=min(left, max(PROBE_SECONDS, left / 4)),
                               method=method)

    if not per_node:
        ok = decide(0)
        return (None, True) if ok else (-1, ok is False)
    ceiling = max(min(per_node), 0)   # beyond it some node fits no device on its own
    # no workload states more than MAX_CONCURRENCY live requests: past it, a lower bound only
    value, proven = largest_true(decide, 0, min(ceiling, MAX_CONCURRENCY))
    if value == MAX_CONCURRENCY < ceiling:
        proven = False
    return (-1 if value is None else value), proven


def max_feasible_concurrency(instance: Instance, method: str | None = None, *, budget: float = 10.0
                             ) -> int | None:
    """The value of :func:`largest_feasible_concurrency` (a lower bound when not proven)."""
    return largest_feasible_concurrency(instance, method, budget=budget)[0]
