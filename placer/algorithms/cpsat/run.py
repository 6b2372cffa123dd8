"""The context every CP-SAT strategy shares: one :class:`Run` per call (limits, seed, threads, the
solver-unit problem, the best placement so far, the solver calls made) and the functions that
turn a placement and its levels into a checked :class:`~placer.problem.placement.Result`.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace

from placer.algorithms import ortools_adapter as ora
from placer.algorithms.check import acceptable, fits_bytes
from placer.algorithms.cpsat.fleet import FleetView, rack_groups
from placer.algorithms.cpsat.models import Problem
from placer.algorithms.deadline import Deadline
from placer.algorithms.pins import pin_groups
from placer.algorithms.quantize import Quantization, choose_unit
from placer.problem.instance import Instance
from placer.problem.placement import Level, Result, Status, evaluate, hops_of

LIGHT_F2 = True
LIGHT_F1 = True

__all__ = ["LIGHT_F1", "LIGHT_F2", "Run", "build_problem", "relaxed_problem", "user_hint", "capacity_classes", "finish", "no_placement",
           "latency_value", "device_level", "objective_levels", "bottleneck_value", "reachable", "tag",
           "fits_bytes", "acceptable"]


@dataclass
class Run:
    instance: Instance
    t0: float
    time_limit: float
    seed: int
    threads: int
    progress: object
    objective: str
    order: tuple = ("devices", "latency")
    prob: Problem | None = None
    relaxed: Problem | None = None    # demands rounded down, capacities up: bounds valid in bytes
    quant: Quantization | None = None
    lower: int = 0
    user_hint: tuple | None = None
    pins_any: bool = False
    interrupted: bool = False
    phases: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    best: tuple | None = None       # (assignment, order, levels) of the best placement so far
    levels: dict = field(default_factory=dict)
    deadline: Deadline | None = None  # shared with the caller's phases; None: time_limit alone
    work_limit: float | None = None   # CP-SAT deterministic time per search (reproducible cut-offs)

    def remaining(self) -> float:
        left = self.time_limit - (time.monotonic() - self.t0)
        return left if self.deadline is None else min(left, self.deadline.remaining())

    def solve(self, phase: str, model, watch, *, target=None, scale: float = 1.0, assumptions=(),
              time_cap: float | None = None, light_presolve: bool = False, quiet: bool = False):
        limit = max(self.remaining(), 0.05)
        if time_cap is not None:
            limit = max(min(limit, time_cap), 0.05)     # a cap taken from a spent budget is never <= 0
        params = ora.parameters(time_limit=limit, seed=self.seed, threads=self.threads, work_limit=self.work_limit,
                                assumptions=bool(assumptions), light_presolve=light_presolve)
        cb = None
        if self.progress is not None and not quiet:   # quiet: a search without an objective to report
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


def build_problem(instance: Instance) -> tuple[Problem, Quantization]:
    quant = choose_unit(instance.demand_bytes, instance.capacity_bytes)
    unit = quant.unit
    # bottleneck loads rounded down: the level's optimum in units x unit is a lower bound in bytes
    load = [w // unit for w in instance.weight_bytes]
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
        groups=rack_groups(instance),
        cover=[list(nodes) for _, nodes in instance.cover_sets])
    return prob, quant


def relaxed_problem(prob: Problem, quant: Quantization) -> Problem:
    """``prob`` with demands rounded down and capacities up: every placement feasible in bytes is
    feasible here, so any optimum or bound of this problem bounds the exact one."""
    return replace(prob, demand=list(quant.demand_down), capacity=list(quant.capacity_up))


def user_hint(instance: Instance, hint):
    if hint is None:
        return None
    assignment = getattr(hint, "assignment", hint)
    if assignment is None or len(assignment) != instance.n_nodes:
        return None
    assignment = [int(a) for a in assignment]
    if any(not 0 <= a < instance.n_devices for a in assignment):
        return None
    return assignment


def capacity_classes(instance: Instance) -> list[tuple[int, int]]:
    counts = Counter(instance.capacity_bytes)
    return sorted(counts.items(), reverse=True)


def finish(run: Run, assignment, order, levels: dict) -> Result:
    """The Result for a placement; ``levels``: per level, dict(value, bound, proven)."""
    instance = run.instance
    dev = levels["devices"]
    proven = all(lv["proven"] for lv in levels.values())
    if run.interrupted:
        proven = proven and False
    bound = dev["bound"]
    used = len(set(assignment))
    gap = (used - bound) / used if used and bound is not None else None
    run.stats.update(
        seed=run.seed, threads=run.threads, time_limit=run.time_limit, ortools_version=ora.ORTOOLS_VERSION,
        objective=run.objective, phases=run.phases,
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
    msg = [describe_levels(levels, run)]
    if may_cost:
        msg.append(f"sizes were rounded to {run.quant.unit} B units, which may have cost a device "
                   f"(the exact-bytes bound is {bound})")
    if run.interrupted:
        msg.append("interrupted: best placement so far")
    res = evaluate(instance, assignment, method="cpsat", status=Status.OPTIMAL if proven else Status.FEASIBLE,
                   seconds=time.monotonic() - run.t0, lower_bound=bound, objective=float(used),
                   bound=float(bound) if bound is not None else None, proven_optimal=proven,
                   gap=gap, message="; ".join(msg), stats=run.stats,
                   order=None if order is None else tuple(order), interrupted=run.interrupted,
                   levels=tuple(Level(k, v["value"], v["value"] if v["proven"] else v.get("bound"), bool(v["proven"]),
                                      note=v.get("note")) for k, v in levels.items()))
    return res


def describe_levels(levels: dict, run: Run) -> str:
    parts = []
    for name, lv in levels.items():
        unit = {"moved": " B", "cost": " $/h", "devices": "", "latency": " us", "bottleneck": " B"}[name]
        value = lv["value"]
        shown = f"{value:g}" if isinstance(value, float) else f"{value}"
        if lv["proven"]:
            parts.append(f"{name} {shown}{unit} (proven)")
        else:
            b = lv.get("bound")
            why = "" if lv.get("note") is None else f"; {lv['note']}"
            parts.append(f"{name} {shown}{unit} (bound {b:g}{unit}, not proven{why})" if b is not None
                         else f"{name} {shown}{unit} (not proven{why})")
    return ", ".join(parts)


def no_placement(run: Run, status: Status, message: str) -> Result:
    run.stats.update(seed=run.seed, threads=run.threads, time_limit=run.time_limit,
                     ortools_version=ora.ORTOOLS_VERSION, objective=run.objective, phases=run.phases)
    bound = max(run.lower, 0) or None
    return Result("cpsat", run.instance.mode, status, lower_bound_devices=bound,
                  bound=float(bound) if bound else None, message=message,
                  seconds=time.monotonic() - run.t0, stats=run.stats, interrupted=run.interrupted)


def latency_value(instance: Instance, assignment) -> float:
    return hops_of(instance, assignment)[1]


def device_level(run: Run, used: int, bound_bytes: int) -> dict:
    """The device level: proven exactly when the count meets a lower bound valid in bytes."""
    bound = max(bound_bytes, run.lower)
    proven = used <= bound
    return dict(value=used, bound=used if proven else bound, proven=proven)


def objective_levels(run: Run) -> tuple[bool, bool]:
    """(hop latency wanted, bottleneck wanted) after the device level."""
    return "latency" in run.order, "bottleneck" in run.order


def bottleneck_value(instance: Instance, assignment) -> int:
    load: dict[int, int] = {}
    for node, d in enumerate(assignment):
        load[d] = load.get(d, 0) + instance.weight_bytes[node]
    return max(load.values())


def reachable(prob: Problem, assignment) -> bool:
    """Every crossing edge joins devices with a route between them."""
    return all(prob.latency[assignment[u]][assignment[v]] is not None for u, v in prob.edges)


def tag(progress, phase):
    if progress is None:
        return None

    def cb(info):
        info["phase"] = phase
        progress(info)
    return cb


