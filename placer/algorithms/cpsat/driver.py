"""Exact placement with OR-Tools CP-SAT, in every mode, with proofs.

``cpsat(instance)`` minimises lexicographically: **devices used**, then **hop latency** (sum over
model edges whose ends sit on different devices of the latency between them), optionally then the
**bottleneck stage load** (largest weight bytes on one device). It solves the levels one after the
other: a level's optimum, once proven, is fixed as a constraint and the next level starts from the
previous solution as a complete hint. (A single weighted objective would be exact too, but a time
limit then leaves no proven first level; two phases report "devices proven, latency not yet".)

Structure first, search second:

* **contiguous / split chains on identical devices, no pins**: next-fit gives the exact fewest
  stages S (feasibility is a sum, hence hereditary). A placement exists iff the fleet has a simple
  path of S linked devices, so the device level is proven without search; CP-SAT then finds the
  cheapest such path (``add_circuit`` over the devices, symmetry broken among twin devices, a rack
  cut), and the cuts minimise the bottleneck exactly (binary search).
* **contiguous / split otherwise** (different capacities, pins, DAGs): the full F2 model (stages
  along a fleet path). A Pareto dynamic program over capacity classes gives the exact fewest
  devices when the fleet could order devices freely: a proven lower bound, and a hint. When hop
  latency is an ultrametric (racks on a uniform fabric), a second DP over runs of stages inside
  one rack bounds the rack changes from below and its witness, laid on real racks, is the hint.
* **free**: nodes of equal size are interchangeable for the device count, so an arc-flow model
  over fill levels (no node symmetry, Gilmore-Gomory LP bound) gives the exact count in bytes,
  solved for exactly z devices from the lower bound up on a graph pruned to the waste z devices
  allow; the per-node F1 model then minimises hop latency with that count fixed (levels of an
  ultrametric fleet make a hop a few linear terms; interchangeable racks, then devices, are
  ordered by the first node they hold).

Symmetry is broken only among devices (or whole racks) that can swap without changing anything,
and every hint is relabelled to the canonical form first.

Honest reporting (:mod:`.levels`): a level is proven only when a placement's exact value (bytes
and latencies as written) meets a bound valid for the exact problem. Sizes are rounded up and
capacities down for the placements (feasible in bytes), and down / up for the bounds when that
rounding could lose a placement (the relaxed model); latencies are exact integers when their
decimals allow a common scale, else rounded down (bounds only). INFEASIBLE only when proven (with
a reason from an unsat core over capacity and pin literals); UNKNOWN when nothing was found.
``Result.levels`` holds value, bound and proof per level, ``Result.objective`` and
``Result.bound`` the device count and its proven lower bound, ``stats["phases"]`` each solver call
(status, objective, bound, wall and deterministic time, fingerprint), with seed, threads, time
limit, OR-Tools version and the quantization unit beside them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from placer.algorithms.bound import lower_bound as device_lower_bound
from placer.algorithms.cpsat.contiguous import contiguous
from placer.algorithms.cpsat.cost import cost_levels
from placer.algorithms.cpsat.free import free
from placer.algorithms.cpsat.identical_chain import identical_chain
from placer.algorithms.cpsat.moved import Previous, moved_levels
from placer.algorithms.cpsat.run import (
    Run,
    bottleneck_value,
    build_problem,
    finish,
    latency_value,
    no_placement,
    objective_levels,
    relaxed_problem,
    user_hint,
)
from placer.algorithms.deadline import Deadline, DeadlineReached, note_interrupt
from placer.algorithms.guards import infeasibility
from placer.algorithms.objectives import parse_objective
from placer.algorithms.search import largest_true
from placer.problem.instance import Instance
from placer.problem.placement import Level, Result, Status, evaluate
from placer.specs.workload import MAX_CONCURRENCY

__all__ = ["cpsat"]


def cpsat(instance: Instance, *, time_limit: float = 30.0, seed: int = 0, threads: int = 2, progress=None,
          hint=None, objective: str = "lex", lower_bound: int | None = None, deadline: Deadline | None = None,
          work_limit: float | None = None) -> Result:
    """Place ``instance`` optimally (see the module docstring).

    ``time_limit`` (s, whole call), ``seed`` and ``threads`` go to CP-SAT; ``progress`` is called
    with ``dict(best, bound, elapsed, phase)`` from the solution callback; ``hint``: a Result or
    an assignment to start from, or a :class:`~.moved.Previous` (the placement before a failure,
    which the ``moved`` level counts against); ``objective``: the levels in order, e.g.
    ``"devices,concurrency,latency"`` (what ``placer solve`` asks for), or ``"devices"``, ``"lex"``
    (devices, latency: the default), ``"lex3"`` (devices, latency, bottleneck); ``lower_bound``: a
    device lower bound already known; ``deadline``: a shared
    :class:`~placer.algorithms.deadline.Deadline` (the call ends by it and by ``time_limit``, model
    building included); ``work_limit``: CP-SAT's deterministic time for each search (machine-independent
    work units: with one worker and a fixed seed a search it cuts short ends the same way on every
    run, whatever the load). Ctrl-C stops the search and returns the best placement found so far
    (FEASIBLE). Call it through :func:`placer.algorithms.place`, which rules out the requests no
    placement can meet before any model is built.
    """
    order = parse_objective(objective)
    previous = hint.previous if isinstance(hint, Previous) else None
    hint = None if previous is not None else hint     # the moved models hint the surviving part themselves
    if ("moved" in order) != (previous is not None):
        raise ValueError("the moved level and the previous placement come together")
    if not time_limit or time_limit <= 0:
        raise ValueError("time_limit must be positive")
    if threads < 1:
        raise ValueError("threads must be at least 1")
    t0 = time.monotonic()
    deadline = Deadline(t0 + float(time_limit)) if deadline is None else deadline.within(time_limit)
    search = _Search(int(seed), int(threads), progress, deadline, work_limit,
                     None if previous is None else tuple(int(p) for p in previous))
    if "concurrency" in order and any(instance.request_bytes):
        return _with_concurrency(instance, order, search, hint=hint, lower_bound=lower_bound)
    return _solve(instance, tuple(x for x in order if x != "concurrency"), search, t0=t0,
                  time_limit=float(time_limit), hint=hint, lower_bound=lower_bound)


@dataclass(frozen=True)
class _Search:
    """The settings every CP-SAT search of one call shares: ``seed`` and ``threads`` for CP-SAT,
    the ``progress`` callback, the call's ``deadline`` and each search's ``work_limit``."""

    seed: int
    threads: int
    progress: object
    deadline: Deadline
    work_limit: float | None
    previous: tuple[int, ...] | None = None


def _solve(instance: Instance, order: tuple[str, ...], search: _Search, *, t0: float, time_limit: float, hint,
           lower_bound) -> Result:
    """The levels of ``order`` (moved or cost, devices, then latency, then bottleneck) by the strategy that fits."""
    run = Run(instance, t0, time_limit, search.seed, search.threads, search.progress, ",".join(order), order=order,
              deadline=search.deadline.within(time_limit), work_limit=search.work_limit)
    run.prob, run.quant = build_problem(instance)
    run.prob.deadline = run.deadline
    run.relaxed = run.prob if run.quant.faithful else relaxed_problem(run.prob, run.quant)
    run.pins_any = bool(run.prob.pins_to or run.prob.pins_same)
    run.stats.update(unit_bytes=run.quant.unit, unit_exact=run.quant.exact, unit_harmless=run.quant.harmless)
    run.lower = max(int(lower_bound) if lower_bound is not None else device_lower_bound(instance), 0)
    run.user_hint = user_hint(instance, hint)
    try:
        if "moved" in order:
            return moved_levels(run, search.previous)
        if "cost" in order:
            return cost_levels(run)
        if instance.mode == "free":
            return free(run)
        identical = len(set(instance.capacity_bytes)) == 1
        # requirements the next-fit cut does not model: a stage holding a kind of layer (together
        # groups are pins, so pins_any covers them; uniform-degree holds at one degree)
        if instance.model.is_chain and identical and not run.pins_any and not instance.cover_sets:
            return identical_chain(run)
        return contiguous(run)
    except KeyboardInterrupt:     # outside a CP-SAT search (which the adapter stops itself)
        note_interrupt()
        run.interrupted = True
        if run.best is not None:
            return finish(run, *run.best)
        return no_placement(run, Status.UNKNOWN, "interrupted before any placement was found")
    except DeadlineReached:     # a model too large to build in the time left
        run.record("time limit", note="reached while building a model; the best placement so far stands")
        if run.best is None:
            return no_placement(run, Status.UNKNOWN, "no placement found within the time limit")
        assignment, order, levels = run.best
        want_latency, want_bottleneck = objective_levels(run)
        levels = dict(levels)
        why = "not searched: the time limit was reached while building a model"
        if want_latency and "latency" not in levels:
            levels["latency"] = dict(value=latency_value(instance, assignment), bound=None, proven=False, note=why)
        if want_bottleneck and "bottleneck" not in levels:
            levels["bottleneck"] = dict(value=bottleneck_value(instance, assignment), bound=None, proven=False,
                                        note=why)
        return finish(run, assignment, order, levels)


def _with_concurrency(instance: Instance, order, search: _Search, *, hint, lower_bound):
    """The guaranteed-concurrency level: the largest live-request count c such that the levels
    before it keep their optimal values at c (a placement meets them and holds c requests on every
    stage), by exponential then binary search on c; then the levels after it at that c.

    A stage holds c live requests exactly when the placement fits the instance at concurrency c,
    so the smallest stage's ceiling is at least c iff the solve at c succeeds. Proven when every
    probe was decided; the bound is then the value itself, else the smallest c ruled out, minus 1.
    """
    pos = order.index("concurrency")
    before = tuple(order[:pos])
    after = tuple(x for x in order if x != "concurrency")
    base = instance.workload.concurrency
    left = search.deadline.remaining

    def sub(inst, levels, share, start, lb):
        limit = max(0.05, min(left(), share))
        return _solve(inst, levels, search, t0=time.monotonic(), time_limit=limit, hint=start, lower_bound=lb)

    first = sub(instance, before, left() / 3, hint, lower_bound) if before else None
    if first is not None and first.feasible and not first.interrupted and left() > 0.5 \
            and not all(lv.proven for lv in first.levels):
        # not settled in its share: the rest of the budget goes on, from the placement found
        first = sub(instance, before, left(), first, lower_bound)
    if first is not None and (not first.feasible or first.interrupted
                              or not all(lv.proven for lv in first.levels)):
        # the levels before concurrency are not settled: concurrency cannot be maximised under them
        return _attach(instance, first, order, Level("concurrency", first.concurrency_ceiling, None, False)) \
            if first.feasible else first
    target = {lv.name: lv.value for lv in first.levels} if first is not None else {}
    probes: dict[int, Result] = {}
    ruled_out: list[int] = []
    best = [first.assignment if first is not None else hint]
    stopped, settled = [False], []
    # the first placement meets the levels before concurrency and holds this many requests on
    # every stage: any c up to it is decided without a search
    held = first.concurrency_ceiling if first is not None else None

    def decide(c: int) -> bool | None:
        if c == base and first is not None:
            return True
        if held is not None and c <= held:
            settled.append(c)
            return True
        if stopped[0] or left() <= 0.05:
            return None
        inst = instance.with_concurrency(c)
        why = infeasibility(inst)
        if why is not None or ("devices" in target and device_lower_bound(inst) > target["devices"]):
            # bound first: no placement at c keeps the device count (or any fits): ruled out, no search
            ruled_out.append(c)
            return False
        r = sub(inst, before or ("devices",), max(left() / 4, 0.2), best[0],
                target.get("devices") if before else None)
        if r.interrupted:
            stopped[0] = True
            return None
        if r.status == Status.INFEASIBLE:
            ruled_out.append(c)
            return False
        if not r.feasible:
            return None
        ok = all(r.level(name) is not None and _meets(r.level(name).value, target[name]) for name in before)
        if ok:
            probes[c] = r
            best[0] = r.assignment
            return True
        if any(r.level(name) is not None and r.level(name).bound is not None
               and not _meets(r.level(name).bound, target[name]) for name in before):
            ruled_out.append(c)
            return False
        return None

    cmax = max(instance.capacity_bytes)
    ceiling = min((cmax - w) // r for w, r in zip(instance.weight_bytes, instance.request_bytes) if r > 0)
    # no workload states more than MAX_CONCURRENCY live requests: the search stops there
    top = min(max(ceiling, base), MAX_CONCURRENCY)
    search_top = _bound_first(instance, base, top, target.get("devices"))
    if search_top < top:
        ruled_out.append(search_top + 1)
    c_star, proven = largest_true(decide, base, search_top)
    if c_star is None:           # not even the base concurrency: the first solve says why
        return first if first is not None else sub(instance, after, left(), hint, lower_bound)
    start = probes[c_star].assignment if c_star in probes else best[0]
    lb = target.get("devices")
    final = sub(instance.with_concurrency(c_star), after, left(), start, lb)
    if not final.feasible:       # out of time at c_star: the best placement found on the way
        final = probes.get(c_star) or first
        if final is None:
            return sub(instance, after, left(), hint, lower_bound)
    upper = min(ruled_out) - 1 if ruled_out else max(ceiling, base)
    if settled:
        final.stats.setdefault("phases", []).append(dict(
            phase="concurrency", settled="the first placement holds these counts; no search", probes=len(settled),
            held=held))
    result = _attach(instance, final, order, None)
    value = result.concurrency_ceiling
    level = _concurrency_level(value, c_star, proven and not stopped[0], upper, top if c_star == top < ceiling else None)
    return _attach(instance, final, order, level)


def _concurrency_level(value, c_star: int, sure: bool, upper: int, cap: int | None) -> Level:
    """The level for a placement holding ``value`` requests, ``c_star`` the largest count found
    (``sure``: every probe decided), ``upper`` the least count ruled out less one. ``cap``: the
    search stopped at that limit, every probe up to it fitting; the placement's own ceiling (at
    least the limit) is the optimum only when it meets the per-node upper bound."""
    if cap is not None:
        met = sure and value is not None and value >= upper
        return Level("concurrency", value, value if met else max(upper, value or 0), bool(met), cap=cap)
    return Level("concurrency", value, value if sure and value == c_star else max(upper, value or 0),
                 bool(sure and value == c_star))


def _bound_first(instance: Instance, base: int, top: int, devices: int | None) -> int:
    """The largest count in ``[base, top]`` at which the device lower bound still allows
    ``devices`` devices (``top`` when no count is known): by the bounds alone, no solve. Above it
    no placement keeps the device count, so every count there is ruled out."""
    if devices is None:
        return top
    fits, _ = largest_true(lambda c: device_lower_bound(instance.with_concurrency(c)) <= devices, base, top)
    return top if fits is None else fits


def _meets(value, target) -> bool:
    return value is not None and target is not None and value <= target + 1e-9 * max(1.0, abs(target))


def _attach(instance: Instance, r: Result, order, level: Level | None) -> Result:
    """``r`` (solved at some concurrency >= the instance's) as a result for ``instance``: the same
    placement, its ceiling at ``instance``'s workload, the levels in ``order``."""
    again = evaluate(instance, r.assignment, method="cpsat", status=r.status, lower_bound=r.lower_bound_devices)
    levels = {lv.name: lv for lv in r.levels}
    if level is not None:
        levels["concurrency"] = level
    why = "not searched: " + ("interrupted" if r.interrupted else "a level before it is not proven")
    values = dict(devices=again.devices_used, latency=again.hop_latency_us,
                  bottleneck=bottleneck_value(instance, r.assignment))
    for name in order:          # a level requested but not solved is stated, never left out
        if name not in levels and name in values:
            levels[name] = Level(name, values[name], None, False, note=why)
    ordered = tuple(levels[name] for name in order if name in levels)
    proven = bool(ordered) and all(lv.proven for lv in ordered) and not r.interrupted
    msg = ", ".join(_describe(lv) for lv in ordered)
    if r.interrupted:
        msg += "; interrupted: best placement so far"
    return r.replace(mode=instance.mode, concurrency_ceiling=again.concurrency_ceiling, levels=ordered,
                     proven_optimal=proven, status=Status.OPTIMAL if proven else Status.FEASIBLE,
                     message=msg)


def _describe(lv: Level) -> str:
    return lv.describe()
