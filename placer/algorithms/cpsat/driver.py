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
(status, objective, bound, wall and deterministic time, fingerprint), with seed, workers, time
limit, OR-Tools version and the quantization unit beside them.
"""

from __future__ import annotations

import time

from ...instance import Instance
from ...placement import Result, Status
from ..bound import lower_bound as device_lower_bound
from ..deadline import Deadline, DeadlineReached, note_interrupt
from .contiguous import contiguous
from .free import free
from .identical_chain import identical_chain
from .run import (
    OBJECTIVES,
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

__all__ = ["cpsat", "OBJECTIVES"]


def cpsat(instance: Instance, *, time_limit: float = 30.0, seed: int = 0, workers: int = 2, progress=None,
          hint=None, objective: str = "lex", lower_bound: int | None = None, deadline: Deadline | None = None
          ) -> Result:
    """Place ``instance`` optimally (see the module docstring).

    ``time_limit`` (s, whole call), ``seed`` and ``workers`` go to CP-SAT; ``progress`` is called
    with ``dict(best, bound, elapsed, phase)`` from the solution callback; ``hint``: a Result or
    an assignment to start from; ``objective``: ``"devices"``, ``"lex"`` (default) or ``"lex3"``;
    ``lower_bound``: a device lower bound already known; ``deadline``: a shared
    :class:`~placer.algorithms.deadline.Deadline` (the call ends by it and by ``time_limit``, model
    building included). Ctrl-C stops the search and returns the best placement found so far
    (FEASIBLE). Call it through :func:`placer.algorithms.place`, which
    rules out the requests no placement can meet before any model is built.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if not time_limit or time_limit <= 0:
        raise ValueError("time_limit must be positive")
    if workers < 1:
        raise ValueError("workers must be at least 1")
    t0 = time.monotonic()
    run = Run(instance, t0, float(time_limit), int(seed), int(workers), progress, objective,
              deadline=Deadline(t0 + float(time_limit)) if deadline is None else deadline.within(time_limit))
    run.prob, run.quant = build_problem(instance)
    run.prob.deadline = run.deadline
    run.relaxed = run.prob if run.quant.faithful else relaxed_problem(run.prob, run.quant)
    run.pins_any = bool(run.prob.pins_to or run.prob.pins_same)
    run.stats.update(unit_bytes=run.quant.unit, unit_exact=run.quant.exact, unit_harmless=run.quant.harmless)
    run.lower = max(int(lower_bound) if lower_bound is not None else device_lower_bound(instance), 0)
    run.user_hint = user_hint(instance, hint)
    try:
        if instance.mode == "free":
            return free(run)
        identical = len(set(instance.capacity_bytes)) == 1
        if instance.model.is_chain and identical and not run.pins_any:
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
        if want_latency and "latency" not in levels:
            levels["latency"] = dict(value=latency_value(instance, assignment), bound=None, proven=False)
        if want_bottleneck and "bottleneck" not in levels:
            levels["bottleneck"] = dict(value=bottleneck_value(instance, assignment), bound=None, proven=False)
        return finish(run, assignment, order, levels)


