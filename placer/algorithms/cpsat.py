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

Honest reporting: ``proven_optimal`` only when every level solved is proven (objective == bound;
the device level in exact bytes); otherwise FEASIBLE with the bound and gap; INFEASIBLE only when
proven (with a reason from an unsat core over capacity and pin literals); UNKNOWN when nothing
was found. Every placement passes the exact-bytes check before it is returned. ``Result.objective``
and ``Result.bound`` are the device count and its proven lower bound; ``stats["levels"]`` gives
value, bound and proof per level, ``stats["phases"]`` each solver call (status, objective, bound,
wall and deterministic time, fingerprint), with seed, workers, time limit, OR-Tools version and
the quantization unit beside them.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field

from ..instance import Instance
from ..placement import Result, Status, evaluate
from . import ortools_adapter as ora
from .cpsat_binpack import build_arcflow, ffd_bins, max_fill_bins, prune_for_waste, solve_arcflow
from .cpsat_exact import chain_min_devices, min_bottleneck_cuts, next_fit
from .cpsat_fleet import FleetView, path_latency_bound, rack_groups
from .cpsat_models import ContiguousModel, FreeModel, PathModel, Problem
from .quantize import Quantization, choose_unit

__all__ = ["cpsat", "OBJECTIVES"]

OBJECTIVES = ("devices", "lex", "lex3")
LIGHT_F2 = True
LIGHT_F1 = True   # devices | devices, latency | devices, latency, bottleneck


def cpsat(instance: Instance, *, time_limit: float = 30.0, seed: int = 0, workers: int = 2, progress=None,
          hint=None, objective: str = "lex", lower_bound: int | None = None) -> Result:
    """Place ``instance`` optimally (see the module docstring).

    ``time_limit`` (s, whole call), ``seed`` and ``workers`` go to CP-SAT; ``progress`` is called
    with ``dict(best, bound, elapsed, phase)`` from the solution callback; ``hint``: a Result or
    an assignment to start from; ``objective``: ``"devices"``, ``"lex"`` (default) or ``"lex3"``;
    ``lower_bound``: a device lower bound already known. Ctrl-C stops the search and returns the
    best placement found so far (FEASIBLE).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if not time_limit or time_limit <= 0:
        raise ValueError("time_limit must be positive")
    if workers < 1:
        raise ValueError("workers must be at least 1")
    run = _Run(instance, time.monotonic(), float(time_limit), int(seed), int(workers), progress, objective)
    early = _precheck(run)
    if early is not None:
        return early
    run.prob, run.quant = _problem(instance)
    run.stats.update(unit_bytes=run.quant.unit, unit_exact=run.quant.exact, unit_harmless=run.quant.harmless)
    run.lower = max(int(lower_bound or 0), _baseline_bound(instance))
    run.user_hint = _user_hint(instance, hint)
    try:
        if instance.mode == "free":
            return _free(run)
        identical = len(set(instance.capacity_bytes)) == 1
        if instance.model.is_chain and identical and not run.pins_any:
            return _identical_chain(run)
        return _contiguous(run)
    except KeyboardInterrupt:
        run.interrupted = True
        if run.best is not None:
            return _finish(run, *run.best)
        return _result_without_placement(run, Status.UNKNOWN, "interrupted before any placement was found")


# ------------------------------------------------------------------------------------------ context
@dataclass
class _Run:
    instance: Instance
    t0: float
    time_limit: float
    seed: int
    workers: int
    progress: object
    objective: str
    prob: Problem | None = None
    quant: Quantization | None = None
    lower: int = 0
    user_hint: tuple | None = None
    pins_any: bool = False
    interrupted: bool = False
    phases: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    best: tuple | None = None       # (assignment, order, levels) of the best placement so far
    levels: dict = field(default_factory=dict)

    def remaining(self) -> float:
        return self.time_limit - (time.monotonic() - self.t0)

    def solve(self, phase: str, model, watch, *, target=None, scale: float = 1.0, assumptions=(),
              time_cap: float | None = None, light_presolve: bool = False):
        limit = max(self.remaining(), 0.05)
        if time_cap is not None:
            limit = min(limit, time_cap)
        params = ora.parameters(time_limit=limit, seed=self.seed, workers=self.workers,
                                assumptions=bool(assumptions), light_presolve=light_presolve)
        cb = None
        if self.progress is not None:
            user = self.progress

            def cb(info):
                info["phase"] = phase
                if target is not None and info.get("bound") is not None:
                    # CP-SAT's own bound can trail the lower bound proved before the search (the
                    # target); the level's bound is the larger of the two, as the result states it
                    info["bound"] = max(info["bound"], target / scale)
                user(info)
        out = ora.solve(model, watch, params=params, progress=cb, target=target, assumptions=assumptions,
                        report_scale=scale, t0=self.t0)
        rec = out.record()
        rec["phase"] = phase
        if scale != 1 and rec["objective"] is not None:
            rec["objective"] = rec["objective"] / scale
        if scale != 1 and rec["bound"] is not None:
            rec["bound"] = rec["bound"] / scale
        self.phases.append(rec)
        if out.interrupted:
            self.interrupted = True
        return out

    def record(self, name: str, **info):
        self.phases.append(dict(phase=name, **info))


def _precheck(run: _Run) -> Result | None:
    """Requests no placement can meet (oversized node, conflicting pins, too few devices)."""
    from . import infeasibility
    from .pins import PinConflict, pin_groups

    instance = run.instance
    why = infeasibility(instance)
    if why is not None:
        return _result_without_placement(run, Status.INFEASIBLE, why[0])
    try:
        groups = pin_groups(instance)
    except PinConflict as exc:      # also caught by infeasibility(); kept for direct callers
        return _result_without_placement(run, Status.INFEASIBLE, str(exc))
    run.pins_any = bool(groups)
    return None


def _baseline_bound(instance: Instance) -> int:
    from .bound import lower_bound
    return lower_bound(instance)


def _problem(instance: Instance) -> tuple[Problem, Quantization]:
    from .pins import pin_groups

    quant = choose_unit(instance.demand_bytes, instance.capacity_bytes)
    unit = quant.unit
    load = [-(-w // unit) for w in instance.weight_bytes]
    pins_to: dict[int, int] = {}
    same: list[list[int]] = []
    pinned_devices = set()
    for g in pin_groups(instance):
        if len(g.nodes) > 1:
            same.append(list(g.nodes))
        if g.device is not None:
            pinned_devices.add(g.device)
            for node in g.nodes:
                pins_to[node] = g.device
    prob = Problem(
        n=instance.n_nodes, edges=list(instance.edges), is_chain=instance.model.is_chain,
        demand=list(quant.demand), capacity=list(quant.capacity), load=load,
        demand_bytes=list(instance.demand_bytes), capacity_bytes=list(instance.capacity_bytes),
        view=FleetView(instance, exclude=pinned_devices), pins_to=pins_to, pins_same=same,
        groups=rack_groups(instance))
    return prob, quant


def _user_hint(instance: Instance, hint):
    if hint is None:
        return None
    assignment = getattr(hint, "assignment", hint)
    if assignment is None or len(assignment) != instance.n_nodes:
        return None
    assignment = [int(a) for a in assignment]
    if any(not 0 <= a < instance.n_devices for a in assignment):
        return None
    return assignment


def _capacity_classes(instance: Instance) -> list[tuple[int, int]]:
    counts = Counter(instance.capacity_bytes)
    return sorted(counts.items(), reverse=True)


# ------------------------------------------------------------------------------------------ results
def _finish(run: _Run, assignment, order, levels: dict) -> Result:
    """The Result for a placement; ``levels``: per level, dict(value, bound, proven)."""
    from .check import check_placement

    instance = run.instance
    dev = levels["devices"]
    proven = all(lv["proven"] for lv in levels.values())
    if run.interrupted:
        proven = proven and False
    bound = dev["bound"]
    used = len(set(assignment))
    gap = (used - bound) / used if used and bound is not None else None
    run.stats.update(
        seed=run.seed, workers=run.workers, time_limit=run.time_limit, ortools_version=ora.ORTOOLS_VERSION,
        objective=run.objective, phases=run.phases, interrupted=run.interrupted,
        levels={k: dict(v) for k, v in levels.items()},
        solution_fingerprint=next((p.get("solution_fingerprint") for p in reversed(run.phases)
                                   if p.get("solution_fingerprint")), None))
    cache = run.prob.view._cache if run.prob is not None else {}
    if "twins" in cache:
        run.stats.update(twin_classes=len(cache["twins"]), twin_devices=sum(len(c) for c in cache["twins"]))
    if "hierarchy" in cache:
        run.stats["latency_levels"] = None if cache["hierarchy"] is None else len(cache["hierarchy"])
    if "scale" in cache:
        run.stats["latency_scale"] = cache["scale"]
    may_cost = bool(run.quant is not None and run.quant.rounding_may_cost_device and used > (bound or 0))
    run.stats["rounding_may_cost_device"] = may_cost
    if order is not None:
        run.stats["order"] = list(order)
    msg = [_describe_levels(levels, run)]
    if may_cost:
        msg.append(f"sizes were rounded to {run.quant.unit} B units, which may have cost a device "
                   f"(the exact-bytes bound is {bound})")
    if run.interrupted:
        msg.append("interrupted: best placement so far")
    res = evaluate(instance, assignment, method="cpsat", status=Status.OPTIMAL if proven else Status.FEASIBLE,
                   seconds=time.monotonic() - run.t0, lower_bound=bound, objective=float(used),
                   bound=float(bound) if bound is not None else None, proven_optimal=proven,
                   gap=gap, message="; ".join(msg), stats=run.stats)
    check_placement(instance, res)
    return res


def _describe_levels(levels: dict, run: _Run) -> str:
    parts = []
    for name, lv in levels.items():
        unit = {"devices": "", "latency": " us", "bottleneck": " B"}[name]
        value = lv["value"]
        shown = f"{value:g}" if isinstance(value, float) else f"{value}"
        if lv["proven"]:
            parts.append(f"{name} {shown}{unit} (proven)")
        else:
            b = lv.get("bound")
            parts.append(f"{name} {shown}{unit} (bound {b:g}{unit}, not proven)" if b is not None
                         else f"{name} {shown}{unit} (not proven)")
    return ", ".join(parts)


def _result_without_placement(run: _Run, status: Status, message: str) -> Result:
    run.stats.update(seed=run.seed, workers=run.workers, time_limit=run.time_limit,
                     ortools_version=ora.ORTOOLS_VERSION, objective=run.objective, phases=run.phases)
    bound = max(run.lower, 0) or None
    return Result("cpsat", run.instance.mode, status, lower_bound_devices=bound,
                  bound=float(bound) if bound else None, message=message,
                  seconds=time.monotonic() - run.t0, stats=run.stats)


def _latency_value(instance: Instance, assignment) -> float:
    from ..placement import hops_of
    return hops_of(instance, assignment)[1]


def _device_level(run: _Run, used: int, bound_bytes: int, cp_proven: bool) -> dict:
    """The device level: proven when it meets a bound valid in bytes, or CP-SAT proved it on a model
    whose rounding is harmless (then units and bytes admit the same placements)."""
    exact_model = run.quant is None or run.quant.exact or run.quant.harmless
    bound = max(bound_bytes, run.lower)
    proven = used <= bound or (cp_proven and exact_model)
    if proven:
        bound = used
    return dict(value=used, bound=bound, proven=proven)


def _objective_levels(run: _Run) -> tuple[bool, bool]:
    return run.objective in ("lex", "lex3"), run.objective == "lex3"


# ------------------------------------------------------------------------------------------ contiguous
def _identical_chain(run: _Run) -> Result:
    """Chains on identical devices: exact stage count by next-fit, then the cheapest fleet path."""
    instance, prob = run.instance, run.prob
    cap = instance.capacity_bytes[0]
    segments = next_fit(instance.demand_bytes, cap)
    count = len(segments)
    run.record("stages", method="next-fit (exact)", devices=count)
    if count > instance.n_devices:
        return _result_without_placement(
            run, Status.INFEASIBLE, f"a contiguous pipeline needs {count} stages; the fleet has "
                                    f"{instance.n_devices} available devices")
    want_latency, want_bottleneck = _objective_levels(run)
    model = PathModel(prob, count)
    target = None
    if want_latency:
        model.m.minimize(model.latency())
        target = path_latency_bound(prob.link, prob.groups, count)
    start = _path_hint(instance, count)
    if start is not None:
        model.hint(start)
    out = run.solve("path", model.m, model.watch(), scale=prob.lat_scale, target=target, light_presolve=True)
    if out.status == "INFEASIBLE":
        return _result_without_placement(
            run, Status.INFEASIBLE, f"a contiguous pipeline needs {count} stages, but the fleet graph has no "
                                    f"simple path of {count} linked devices")
    if out.values is None:
        if start is None:
            return _result_without_placement(
                run, Status.UNKNOWN, f"{count} stages needed; no path of {count} linked devices found in time")
        order = list(start)
        lat_level = dict(value=None, bound=None, proven=False)
    else:
        order = model.order(out.values)
        proven = out.proven or (out.stopped_at_target and target is not None)
        bound = out.bound if not proven else out.objective
        lat_level = dict(value=None, bound=bound / prob.lat_scale if bound is not None else None,
                         proven=proven)
    cuts = min_bottleneck_cuts(instance.demand_bytes, instance.weight_bytes, cap, count)
    assignment = [0] * instance.n_nodes
    for k, (a, b) in enumerate(cuts):
        for node in range(a, b):
            assignment[node] = order[k]
    levels = {"devices": dict(value=count, bound=count, proven=True)}
    if want_latency:
        lat_level["value"] = _latency_value(instance, assignment)
        levels["latency"] = lat_level
    if want_bottleneck:
        top = max(sum(instance.weight_bytes[a:b]) for a, b in cuts)
        levels["bottleneck"] = dict(value=top, bound=top, proven=True)
    run.stats["strategy"] = "identical-chain: next-fit stages + CP-SAT fleet path"
    return _finish(run, assignment, order, levels)


def _path_hint(instance: Instance, count: int):
    from .paths import find_path
    try:
        found = find_path(instance, count, budget=20_000)
    except Exception:   # a heuristic hint is optional
        return None
    return found.path


def _contiguous(run: _Run) -> Result:
    """F2 on heterogeneous fleets, with pins, or on DAGs."""
    instance, prob = run.instance, run.prob
    want_latency, want_bottleneck = _objective_levels(run)
    classes = _capacity_classes(instance)
    bound_bytes = run.lower
    dp_segments = None
    if prob.is_chain:
        count, segs = chain_min_devices(instance.demand_bytes, classes)
        if count is None:
            return _result_without_placement(
                run, Status.INFEASIBLE, "no contiguous cover of the chain fits the fleet's devices, "
                                        "whatever their order")
        if count != "unknown":
            bound_bytes = max(bound_bytes, count)
            dp_segments = (segs, classes)
    run.record("bound", devices=bound_bytes)
    start = _contiguous_hints(run, dp_segments)
    s_max = min(prob.n, prob.d, len(set(start[0])) if start else prob.d)
    model = ContiguousModel(prob, s_max=s_max, bottleneck=want_bottleneck)
    if want_latency and not model.latency_supported:
        run.record("latency", note="fleet too large for the per-edge latency table; latency not optimised")
        want_latency = False
    # level 1: devices
    if start is not None and len(set(start[0])) <= bound_bytes:
        assignment, order = start
        run.record("devices", status="OPTIMAL", objective=len(set(assignment)), bound=bound_bytes,
                   note="the hint meets the lower bound")
        cp_proven = True
    else:
        model.m.minimize(model.devices_count())
        if start is not None:
            model.hint(*start)
        out = run.solve("devices", model.m, model.watch(), target=bound_bytes, light_presolve=LIGHT_F2)
        if out.status == "INFEASIBLE":
            return _explain_infeasible(run, "contiguous")
        if out.values is None:
            if start is None:
                return _result_without_placement(run, Status.UNKNOWN, "no placement found within the time limit")
            assignment, order = start
            cp_proven = False
        else:
            assignment, order = model.read(out.values)
            cp_proven = out.proven or out.stopped_at_target
            if out.bound is not None:
                bound_bytes = max(bound_bytes, math.ceil(out.bound - 1e-6)) if cp_proven or \
                    (run.quant.exact or run.quant.harmless) else bound_bytes
    used = len(set(assignment))
    levels = {"devices": _device_level(run, used, bound_bytes, cp_proven)}
    run.best = (assignment, order, dict(levels))
    run.stats["strategy"] = "F2: contiguous stages along a fleet path"
    if not want_latency or run.interrupted or not levels["devices"]["proven"]:
        if want_latency:
            levels["latency"] = dict(value=_latency_value(instance, assignment), bound=None, proven=False)
        return _finish(run, assignment, order, levels)
    # level 2: hop latency with the device count fixed
    cuts, target, witness = _level_bounds(run, used)
    if witness is not None and _latency_value(instance, witness[0]) < _latency_value(instance, assignment):
        assignment, order = witness
    model.fix_count(used, cuts)
    model.m.minimize(model.latency())
    model.hint(assignment, order)
    out = run.solve("latency", model.m, model.watch(), scale=prob.lat_scale, target=target,
                    light_presolve=LIGHT_F2)
    lat_proven = (out.proven or (out.stopped_at_target and target is not None)) and \
        (run.quant.exact or run.quant.harmless)
    if out.values is not None:
        assignment, order = model.read(out.values)
    lat_bound = out.objective if lat_proven else max(out.bound or 0, target or 0)
    levels["latency"] = dict(value=_latency_value(instance, assignment), bound=lat_bound / prob.lat_scale,
                             proven=lat_proven)
    run.best = (assignment, order, dict(levels))
    if not want_bottleneck or run.interrupted or not lat_proven:
        if want_bottleneck:
            levels["bottleneck"] = dict(value=_bottleneck(instance, assignment), bound=None, proven=False)
        return _finish(run, assignment, order, levels)
    # level 3: bottleneck with latency fixed
    _fix_latency(model, round(out.objective))
    model.m.minimize(model.bottleneck)
    model.hint(assignment, order)
    out = run.solve("bottleneck", model.m, model.watch())
    if out.values is not None:
        assignment, order = model.read(out.values)
    levels["bottleneck"] = dict(value=_bottleneck(instance, assignment),
                                bound=out.bound * run.quant.unit if out.bound is not None else None,
                                proven=out.proven and run.quant.exact)
    return _finish(run, assignment, order, levels)


def _level_bounds(run: _Run, count: int):
    """Cuts and a latency lower bound for a chain's path of ``count`` devices on an ultrametric
    fleet, where latency = sum over hierarchy levels of step x (arcs leaving a group of that level).

    At the device level the path has ``count - 1`` arcs. At a higher level whose groups each hold
    one device capacity, :func:`min_group_runs` gives the fewest runs of consecutive stages inside
    one group (a lower bound on the group changes + 1) and a witness, laid out on the fleet as a
    hint when it packs into the groups; other levels get the fewest groups holding ``count``
    devices. Returns ``(cuts, target, witness)``; ``cuts`` None and ``target`` None when latency is
    not an ultrametric or the model is not a chain.
    """
    from .cpsat_exact import min_group_runs
    from .cpsat_fleet import min_groups_covering

    instance, prob = run.instance, run.prob
    if prob.hierarchy is None or not prob.is_chain or count < 1:
        return None, None, None
    cuts, target, witness = [], 0, None
    for step, labels in prob.hierarchy:
        if step is None:
            continue
        groups: dict[int, list[int]] = {}
        for d, g in enumerate(labels):
            groups.setdefault(g, []).append(d)
        if len(groups) == len(labels):
            target += step * (count - 1)
            continue
        caps = instance.capacity_bytes
        homogeneous = all(len({caps[d] for d in members}) == 1 for members in groups.values())
        need = min_groups_covering([len(g) for g in groups.values()], count)
        if homogeneous:
            kinds = {}
            for members in groups.values():
                cap = caps[members[0]]
                size, total = kinds.get(cap, (0, 0))
                kinds[cap] = (max(size, len(members)), total + len(members))
            kind_list = sorted(((c, g, t) for c, (g, t) in kinds.items()), reverse=True)
            runs, trail = min_group_runs(instance.demand_bytes, kind_list, count)
            if isinstance(runs, int):
                need = max(need, runs)
                if witness is None and trail is not None:
                    witness = _realize_runs(instance, trail, kind_list, groups)
        cuts.append((labels, need - 1))
        target += step * (need - 1)
    return cuts, target, witness


def _realize_runs(instance: Instance, trail, kinds, groups):
    """Lay the runs of :func:`min_group_runs` on real groups (first-fit decreasing by devices) and
    devices (lowest index first); None when they do not pack or a needed link is missing."""
    caps = instance.capacity_bytes
    free = {}
    for members in groups.values():
        free.setdefault(caps[members[0]], []).append(sorted(members))
    where = {}
    for r in sorted(range(len(trail)), key=lambda r: -trail[r][3]):
        _, _, k, m = trail[r]
        for members in free[kinds[k][0]]:
            if len(members) >= m:
                where[r] = members[:m]
                del members[:m]
                break
        else:
            return None
    assignment = [0] * instance.n_nodes
    order = []
    for r, (i, j, k, m) in enumerate(trail):
        segments = next_fit(instance.demand_bytes[i:j], kinds[k][0])
        if segments is None or len(segments) != m:
            return None
        for (a, b), d in zip(segments, where[r]):
            for node in range(i + a, i + b):
                assignment[node] = d
            order.append(d)
    if any((a, b) not in instance.link_us for a, b in zip(order, order[1:])):
        return None
    if not _fits_bytes(instance, assignment):
        return None
    return assignment, order


def _fix_latency(model, value: int):
    """Fix the proven latency for the bottleneck level (its coefficients checked like any row)."""
    from .quantize import check_row
    expr = model.latency()
    coeffs = sum(abs(c) for c in _coefficients(expr))
    check_row(coeffs + abs(value), "latency row")
    model.m.add(expr == value)


def _coefficients(expr):
    from ortools.sat.python import cp_model_helper
    return list(cp_model_helper.FlatIntExpr(expr).coeffs)


def _bottleneck(instance: Instance, assignment) -> int:
    load: dict[int, int] = {}
    for node, d in enumerate(assignment):
        load[d] = load.get(d, 0) + instance.weight_bytes[node]
    return max(load.values())


def _contiguous_hints(run: _Run, dp_segments):
    """The best valid contiguous start: the user's hint, the Pareto DP's cover laid on a fleet path,
    or the dp / greedy baselines. Returns (assignment, order) or None."""
    from .check import stage_order

    instance = run.instance
    candidates = []
    if run.user_hint is not None:
        candidates.append(run.user_hint)
    if dp_segments is not None and not run.pins_any:
        laid = _lay_segments(instance, *dp_segments)
        if laid is not None:
            candidates.append(laid)
    for name in ("dp", "greedy"):
        try:
            import importlib
            fn = getattr(importlib.import_module(f".{name}", __package__), name)
            res = fn(instance)
        except Exception:   # baselines are optional hints
            continue
        if res.assignment is not None:
            candidates.append(list(res.assignment))
    best = None
    for assignment in candidates:
        if not _fits_bytes(instance, assignment):
            continue
        order = stage_order(instance, assignment)
        if order is None or not _next_stage_only(instance, assignment, order):
            continue
        if best is None or len(set(assignment)) < len(set(best[0])):
            best = (list(assignment), order)
    return best


def _next_stage_only(instance, assignment, order) -> bool:
    """The model requires chain edges to go to the same or the next stage."""
    if not instance.model.is_chain:
        return True
    pos = {d: k for k, d in enumerate(order)}
    return all(0 <= pos[assignment[v]] - pos[assignment[u]] <= 1 for u, v in instance.edges)


def _fits_bytes(instance: Instance, assignment) -> bool:
    load = [0] * instance.n_devices
    for node, d in enumerate(assignment):
        load[d] += instance.demand_bytes[node]
    if any(load[d] > instance.capacity_bytes[d] for d in range(instance.n_devices)):
        return False
    for pin in instance.pins:
        on = {assignment[i] for i in pin.nodes}
        if len(on) > 1 or (pin.device is not None and instance.devices[on.pop()].id != pin.device):
            return False
    return True


def _lay_segments(instance: Instance, segments, classes):
    """Place the DP's segments (each needing a device of a class) on a simple fleet path, by a
    depth-first search that prefers cheap links; None if the budget runs out."""
    caps = instance.capacity_bytes
    need = [classes[t][0] for _, _, t in segments]
    demand = [sum(instance.demand_bytes[a:b]) for a, b, _ in segments]
    adj: dict[int, list[tuple[float, int]]] = {d: [] for d in range(instance.n_devices)}
    for (a, b), lat in instance.link_us.items():
        adj[a].append((lat, b))
    for lst in adj.values():
        lst.sort()
    k_total = len(segments)
    budget = [20_000]

    def dfs(path, seen):
        if len(path) == k_total:
            return list(path)
        budget[0] -= 1
        if budget[0] < 0:
            return None
        k = len(path)
        # the DP's class first (its counts are known to suffice), cheap links first
        options = sorted(((caps[d] != need[k], lat, d) for lat, d in adj[path[-1]]
                          if d not in seen and caps[d] >= demand[k]))
        for _, _, d in options:
            seen.add(d)
            path.append(d)
            found = dfs(path, seen)
            if found:
                return found
            path.pop()
            seen.discard(d)
        return None

    starts = sorted((d for d in range(instance.n_devices) if caps[d] >= demand[0]),
                    key=lambda d: (caps[d] != need[0], d))
    for s in starts[:50]:
        found = dfs([s], {s})
        if found:
            assignment = [0] * instance.n_nodes
            for (a, b, _), d in zip(segments, found):
                for node in range(a, b):
                    assignment[node] = d
            return assignment
        if budget[0] < 0:
            break
    return None


# ------------------------------------------------------------------------------------------ free
def _free(run: _Run) -> Result:
    instance, prob = run.instance, run.prob
    want_latency, want_bottleneck = _objective_levels(run)
    classes = _capacity_classes(instance)
    disconnected = prob.view.unreachable
    bound_bytes = run.lower
    arc = build_arcflow(instance.demand_bytes, classes)
    bins = None
    if arc is not None:
        run.record("arcflow-size", arcs=arc.n_arcs, sizes=len(arc.sizes))
        bins, bound_bytes, infeasible = _arcflow_devices(run, arc, classes, bound_bytes)
        if infeasible:
            return _result_without_placement(
                run, Status.INFEASIBLE, f"the nodes cannot be packed into the fleet's {instance.n_devices} "
                                        "devices (proven by the arc-flow model)")
    candidates = []
    if bins is not None and not run.pins_any and not disconnected:
        candidates.append(_free_start(run, bins))
    if run.user_hint is not None:
        candidates.append(run.user_hint)
    try:
        from .ffd import ffd
        candidates.append(ffd(instance).assignment)
    except Exception:   # a baseline start is optional
        pass
    start = None
    for cand in candidates:
        if cand is None or not _fits_bytes(instance, cand) or not _reachable(prob, cand):
            continue
        key = (len(set(cand)), _latency_value(instance, cand))
        if start is None or key < start[0]:
            start = (key, list(cand))
    start = start[1] if start is not None else None
    model = None

    def per_node_model():
        nonlocal model, want_latency
        if model is None:
            model = FreeModel(prob, bottleneck=want_bottleneck, latency=want_latency)
            if want_latency and not model.latency_supported:
                run.record("latency", note="fleet too large for the per-edge latency table; latency not optimised")
                want_latency = False
        return model

    def count_model():
        # the device count alone needs no latency terms, unless they keep edges inside components
        if disconnected:
            return per_node_model()
        return FreeModel(prob, latency=False)

    run.stats["strategy"] = "free: arc-flow device count + F1 hop latency"
    if start is not None and len(set(start)) <= bound_bytes:
        assignment = start
        cp_proven = True
    else:
        # pins, a disconnected fleet, or an arc-flow model too large: devices on the per-node model
        counting = count_model()
        counting.m.minimize(counting.devices_count())
        if start is not None:
            counting.hint(start)
        out = run.solve("devices", counting.m, counting.watch(), target=bound_bytes, light_presolve=LIGHT_F1)
        if out.status == "INFEASIBLE":
            return _explain_infeasible(run, "free")
        if out.values is None:
            if start is None:
                return _result_without_placement(run, Status.UNKNOWN, "no placement found within the time limit")
            assignment, cp_proven = start, False
        else:
            assignment = counting.read(out.values)
            cp_proven = out.proven or out.stopped_at_target
    used = len(set(assignment))
    levels = {"devices": _device_level(run, used, bound_bytes, cp_proven)}
    run.best = (assignment, None, dict(levels))
    if not want_latency or run.interrupted or not levels["devices"]["proven"]:
        if want_latency:
            levels["latency"] = dict(value=_latency_value(instance, assignment), bound=None, proven=False)
        return _finish(run, assignment, None, levels)
    model = per_node_model()
    if not want_latency:
        levels["latency"] = dict(value=_latency_value(instance, assignment), bound=None, proven=False)
        return _finish(run, assignment, None, levels)
    model.fix_count(used)
    model.m.minimize(model.latency())
    assignment = model.hint(assignment)
    out = run.solve("latency", model.m, model.watch(), scale=prob.lat_scale, light_presolve=LIGHT_F1)
    if out.values is not None:
        assignment = model.read(out.values)
    lat_proven = out.proven and (run.quant.exact or run.quant.harmless)
    levels["latency"] = dict(value=_latency_value(instance, assignment),
                             bound=out.bound / prob.lat_scale if out.bound is not None else None,
                             proven=lat_proven)
    run.best = (assignment, None, dict(levels))
    if not want_bottleneck or run.interrupted or not lat_proven:
        if want_bottleneck:
            levels["bottleneck"] = dict(value=_bottleneck(instance, assignment), bound=None, proven=False)
        return _finish(run, assignment, None, levels)
    _fix_latency(model, round(out.objective))
    model.m.minimize(model.bottleneck)
    assignment = model.hint(assignment)
    out = run.solve("bottleneck", model.m, model.watch())
    if out.values is not None:
        assignment = model.read(out.values)
    levels["bottleneck"] = dict(value=_bottleneck(instance, assignment),
                                bound=out.bound * run.quant.unit if out.bound is not None else None,
                                proven=out.proven and run.quant.exact)
    return _finish(run, assignment, None, levels)


def _arcflow_devices(run: _Run, arc, classes, lower: int):
    """Fewest devices by arc flow, raising the bound one device at a time.

    For each candidate count z from the lower bound up, the graph is pruned to packings of at most
    z devices (:func:`prune_for_waste`) and solved for exactly z: a solution is optimal (z is a
    bound), INFEASIBLE proves z + 1 is a bound. Stops at the heuristic's count (then optimal), at
    the time limit, or when the pruned graph cannot be built. Returns (bins, bound, infeasible).
    """
    demand = run.instance.demand_bytes
    best = _best_bins(demand, classes)
    fleet_size = sum(c for _, c in classes)
    z = max(lower, 1)
    while True:
        if best is not None and len(best) <= z:
            run.record("devices (heuristic)", devices=len(best), bound=z)
            return best, len(best), False
        if z > fleet_size:
            return None, z, True            # every count up to the fleet size is proven impossible
        if run.remaining() <= 0.05 or run.interrupted:
            return best, z, False
        pruned = prune_for_waste(arc, z)
        if pruned is None:                  # z devices cannot even hold the volume
            z += 1
            continue
        params = ora.parameters(time_limit=max(run.remaining(), 0.05), seed=run.seed, workers=run.workers)
        out, bins = solve_arcflow(pruned, params=params, lower_bound=z, max_bins=z,
                                  progress=_tag(run.progress, "devices"), t0=run.t0)
        rec = out.record()
        rec.update(phase="devices (arc-flow)", devices_tried=z, arcs=pruned.n_arcs)
        run.phases.append(rec)
        run.interrupted = run.interrupted or out.interrupted
        if bins is not None:
            return bins, z, False
        if out.status != "INFEASIBLE":
            return best, z, False
        z += 1


def _best_bins(demand, classes):
    """The better of first-fit decreasing and the minimum-slack greedy, as an arc-flow hint."""
    found = [b for b in (ffd_bins(demand, classes), max_fill_bins(demand, classes)) if b is not None]
    return min(found, key=len) if found else None


def _reachable(prob: Problem, assignment) -> bool:
    """Every crossing edge joins devices with a route between them."""
    return all(prob.latency[assignment[u]][assignment[v]] is not None for u, v in prob.edges)


def _tag(progress, phase):
    if progress is None:
        return None

    def cb(info):
        info["phase"] = phase
        progress(info)
    return cb


def _free_start(run: _Run, bins):
    """A free placement with exactly ``len(bins)`` devices and few crossings: cut the chain into
    next-fit runs and pack the runs first-fit decreasing; if that needs more devices, fill the
    arc-flow bins with nodes in pipeline order. Devices are taken rack by rack."""
    instance = run.instance
    classes = _capacity_classes(instance)
    target = len(bins)
    demand = instance.demand_bytes
    packed = None
    if instance.model.is_chain:
        runs = next_fit(demand, max(instance.capacity_bytes))
        sizes = [sum(demand[a:b]) for a, b in runs]
        packing = _ffd_index(sizes, classes)
        if packing is not None and len(packing) <= target:
            packed = [(c, [node for r in members for node in range(*runs[r])]) for c, members in packing]
    if packed is None:
        queues: dict[int, list[int]] = {}
        for node, d in enumerate(demand):
            queues.setdefault(d, []).append(node)
        packed = []
        for c, items in bins:
            nodes = [queues[s].pop(0) for s in items]
            packed.append((c, sorted(nodes)))
    packed.sort(key=lambda cb: min(cb[1]))
    free_devices = {c: [d for d in range(instance.n_devices) if instance.capacity_bytes[d] == cap]
                    for c, (cap, _) in enumerate(classes)}
    assignment = [0] * instance.n_nodes
    for c, nodes in packed:
        d = free_devices[c].pop(0)
        for node in nodes:
            assignment[node] = d
    return assignment if _fits_bytes(instance, assignment) else None


def _ffd_index(sizes, classes):
    """First-fit decreasing of item indices into devices of the classes (largest first)."""
    bins = []   # [class, free, members]
    left = [n for _, n in classes]
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        for b in bins:
            if b[1] >= sizes[i]:
                b[1] -= sizes[i]
                b[2].append(i)
                break
        else:
            for c, (cap, _) in enumerate(classes):
                if left[c] > 0 and cap >= sizes[i]:
                    left[c] -= 1
                    bins.append([c, cap - sizes[i], [i]])
                    break
            else:
                return None
    return [(c, members) for c, _, members in bins]


# ------------------------------------------------------------------------------------------ infeasible
def _explain_infeasible(run: _Run, kind: str) -> Result:
    """CP-SAT proved infeasibility: find a small set of capacity and pin constraints to blame."""
    instance, prob = run.instance, run.prob
    if kind == "free":
        model = FreeModel(prob, explain=True, latency=False)
    else:
        model = ContiguousModel(prob, s_max=min(prob.n, prob.d), explain=True, latency=False)
    lits = model.assumptions()
    names = {}
    for d, lit in model.capacity_lits.items():
        names[lit.index] = f"capacity of {instance.devices[d].id}"
    for lit, (what, dev, nodes) in zip(model.pin_lits, model.pin_names):
        first, last = instance.nodes[nodes[0]].name, instance.nodes[nodes[-1]].name
        span = first if len(nodes) == 1 else f"{first}..{last}"
        names[lit.index] = (f"pin of {span} to {instance.devices[dev].id}" if what == "device"
                            else f"pin of {span} to one device")
    out = run.solve("explain", model.m, {"used": model.used}, assumptions=lits, time_cap=10.0)
    base = f"CP-SAT proved that no {instance.mode} placement exists"
    if out.status == "INFEASIBLE" and out.core:
        blamed = [names.get(i, f"literal {i}") for i in out.core]
        if len(blamed) > 8:
            blamed = blamed[:8] + [f"and {len(out.core) - 8} more"]
        reason = f"{base}: these constraints conflict: {', '.join(blamed)}"
    elif out.status == "INFEASIBLE":
        reason = (f"{base}: the fleet's links cannot carry a contiguous pipeline of these stages"
                  if kind != "free" else f"{base} on this fleet")
    else:
        reason = base
    return _result_without_placement(run, Status.INFEASIBLE, reason)
