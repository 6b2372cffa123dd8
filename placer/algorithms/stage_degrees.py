"""Per-stage tensor-parallel degrees: a chain cut into stages, each a group of g devices of one node
with its own g, chosen from the allowed degrees, on fleets of mixed device types.

The problem (:class:`PerStageProblem`) is pure integers and latencies, built by
:mod:`placer.planning.stage_degrees` from the specs: per degree, every node's per-rank weight bytes and bytes per
live request (:mod:`placer.problem.parallel`); per fleet node (rack of one device type), its available
devices and, per degree, the per-rank capacity (memory minus the reserve and the activation
buffers); the hop latency between groups of two fleet nodes (and inside one).

A **candidate stage** ``(start, end, degree, node)`` runs model nodes ``start..end-1`` on ``degree``
devices of one fleet node; it exists only when the per-rank bytes of its layers at the base
concurrency fit the per-rank capacity, decided here in exact bytes. So the CP-SAT model
(:mod:`placer.algorithms.cpsat.stage_degrees`) needs no rounding of sizes at all: it picks a path of
candidates from node 0 to node n (one stage ends where the next begins), each fleet node
supplying at most its available devices, and its optimum *is* the exact optimum. Levels, in the
order asked (default devices, concurrency, latency): **devices** (GPUs, the sum of the degrees),
**concurrency** (the smallest chosen stage's live-request ceiling, exact per candidate), **hop
latency** (exact integers when the decimals allow one scale, else rounded down: a bound only).
A level is proven only when the exact value of a placement meets a bound of the exact model; a
level after an unproven one is reported with its value and no bound.

Every plan returned is re-checked here in exact bytes (:func:`check_plan`) before it leaves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

from placer.algorithms.check import PlacementBug
from placer.algorithms.deadline import Deadline, DeadlineReached, note_interrupt
from placer.algorithms.stage_chains import fewest_devices_bound, latency_bound, path_plan, reachable
from placer.problem.placement import Level, Status
from placer.specs.workload import MAX_CONCURRENCY

__all__ = ["FleetNode", "PerStageProblem", "Candidate", "PlanStage", "PerStageOutcome", "candidates",
           "plan_value", "check_plan", "solve_problem", "solve_per_stage", "PER_STAGE_LEVELS"]

PER_STAGE_LEVELS = ("devices", "concurrency", "latency")


@dataclass(frozen=True)
class FleetNode:
    """A node (rack) of one device type: its available device ids in slot order and, per degree, the
    per-rank capacity in bytes (memory minus reserve minus activation buffers; may be negative)."""

    rack: int
    type_name: str
    devices: tuple[str, ...]
    capacity: dict

    @property
    def size(self) -> int:
        return len(self.devices)


@dataclass(frozen=True)
class PerStageProblem:
    """``weights[g][i]`` / ``requests[g][i]``: per-rank weight bytes and bytes per live request of
    model node ``i`` at degree ``g``; ``latency[u][v]``: hop latency (us) from a group of fleet node
    ``u`` to one of ``v`` (``u == v``: two groups of one node), None when they have no direct link;
    ``attention``: when set, every stage holds one of these model nodes."""

    n: int
    degrees: tuple[int, ...]
    weights: dict
    requests: dict
    concurrency: int
    nodes: tuple[FleetNode, ...]
    latency: tuple[tuple[float | None, ...], ...]
    attention: tuple[int, ...] | None = None

    def __post_init__(self):
        if self.n < 1:
            raise ValueError("a model of at least one node")
        for g in self.degrees:
            if len(self.weights[g]) != self.n or len(self.requests[g]) != self.n:
                raise ValueError(f"degree {g}: bytes for {self.n} nodes expected")
        if len(self.latency) != len(self.nodes) or any(len(row) != len(self.nodes) for row in self.latency):
            raise ValueError("latency: one row and column per fleet node")


@dataclass(frozen=True)
class Candidate:
    start: int
    end: int
    degree: int
    node: int
    ceiling: int | None       # live requests the stage holds; None: no per-request memory

    @property
    def devices(self) -> int:
        return self.degree


@dataclass(frozen=True)
class PlanStage:
    """One stage of a plan: model nodes ``start..end-1`` on ``devices`` (of fleet node ``node``)."""

    start: int
    end: int
    degree: int
    node: int
    devices: tuple[str, ...]


@dataclass
class PerStageOutcome:
    status: Status
    stages: tuple[PlanStage, ...] | None = None
    levels: tuple[Level, ...] = ()
    message: str = ""
    interrupted: bool = False
    seconds: float = 0.0
    stats: dict = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return self.stages is not None

    @property
    def proven(self) -> bool:
        return (self.status == Status.OPTIMAL) and not self.interrupted

    def level(self, name: str) -> Level | None:
        return next((lv for lv in self.levels if lv.name == name), None)


def _ceiling(cap: int, weights: int, per_request: int) -> int | None:
    if per_request == 0:
        return None
    return (cap - weights) // per_request


def candidates(prob: PerStageProblem, concurrency: int | None = None, *, maximal: bool = False,
               deadline: Deadline | None = None) -> list[Candidate]:
    """Every stage that fits in exact bytes at ``concurrency`` (default the problem's) and, with
    ``attention``, holds an attention node. Feasibility is hereditary in the end (sizes are
    non-negative), so each (start, degree, node) grows its end until the stage no longer fits;
    ``maximal`` keeps only that longest stage (see :func:`solve_problem` for why that loses no
    optimum when there is no attention requirement)."""
    c = prob.concurrency if concurrency is None else concurrency
    wanted = set(prob.attention) if prob.attention is not None else None
    out: list[Candidate] = []
    for u, fn in enumerate(prob.nodes):
        for g in prob.degrees:
            if g > fn.size:
                continue
            cap = fn.capacity[g]
            w, r = prob.weights[g], prob.requests[g]
            for a in range(prob.n):
                if deadline is not None and a % 16 == 0:
                    deadline.check()
                weights = per = 0
                holds = False
                last = None
                for b in range(a + 1, prob.n + 1):
                    weights += w[b - 1]
                    per += r[b - 1]
                    if weights + c * per > cap:
                        break
                    holds = holds or wanted is None or (b - 1) in wanted
                    if holds:
                        last = Candidate(a, b, g, u, _ceiling(cap, weights, per))
                        if not maximal:
                            out.append(last)
                if maximal and last is not None:
                    out.append(last)
    return out


def plan_value(prob: PerStageProblem, stages) -> dict:
    """The exact levels of a plan: ``devices`` (the sum of degrees), ``concurrency`` (the smallest
    stage ceiling; None: unbounded) and ``latency`` (us, a Fraction of the decimals as written)."""
    ceilings = []
    for s in stages:
        w = sum(prob.weights[s.degree][s.start:s.end])
        r = sum(prob.requests[s.degree][s.start:s.end])
        ceilings.append(_ceiling(prob.nodes[s.node].capacity[s.degree], w, r))
    finite = [x for x in ceilings if x is not None]
    latency = Fraction(0)
    for s, t in zip(stages, stages[1:]):
        lat = prob.latency[s.node][t.node]
        latency += Fraction(repr(float(lat))) if lat is not None else 0
    return dict(devices=sum(s.degree for s in stages), concurrency=min(finite) if finite else None,
                latency=latency)


def check_plan(prob: PerStageProblem, stages) -> None:
    """Raise :class:`PlacementBug` unless the plan holds in exact bytes: stages cover the model
    nodes once in order, each a group of its degree's devices of one fleet node (no device twice),
    each within the per-rank capacity at the base concurrency, consecutive stages directly linked,
    every stage holding an attention node when asked."""

    def fail(msg):
        raise PlacementBug(f"per-stage CP-SAT returned a plan that fails the exact check: {msg}")

    if not stages:
        fail("no stage")
    at = 0
    used: set[str] = set()
    for k, s in enumerate(stages):
        if s.start != at or s.end <= s.start:
            fail(f"stage {k} holds nodes {s.start}..{s.end - 1}, expected to start at {at}")
        at = s.end
        if s.degree not in prob.degrees:
            fail(f"stage {k} at degree {s.degree}, not an allowed one")
        fn = prob.nodes[s.node]
        if len(s.devices) != s.degree or len(set(s.devices)) != s.degree or not set(s.devices) <= set(fn.devices):
            fail(f"stage {k}: group {s.devices} is not {s.degree} devices of node {fn.rack}")
        if used & set(s.devices):
            fail(f"stage {k} reuses {sorted(used & set(s.devices))}")
        used |= set(s.devices)
        w = sum(prob.weights[s.degree][s.start:s.end])
        r = sum(prob.requests[s.degree][s.start:s.end])
        if w + prob.concurrency * r > fn.capacity[s.degree]:
            fail(f"stage {k} needs {w + prob.concurrency * r:,} B per rank, capacity {fn.capacity[s.degree]:,} B")
        if prob.attention is not None and not set(range(s.start, s.end)) & set(prob.attention):
            fail(f"stage {k} holds no attention node")
        if k and prob.latency[stages[k - 1].node][s.node] is None:
            fail(f"stages {k - 1} and {k} are on unlinked nodes")
    if at != prob.n:
        fail(f"the stages end at node {at}, the model has {prob.n}")


def _allocate(prob: PerStageProblem, chosen) -> tuple[PlanStage, ...]:
    """Devices for the chosen candidates (in pipeline order): each fleet node's devices in slot order."""
    nxt = [0] * len(prob.nodes)
    out = []
    for c in chosen:
        fn = prob.nodes[c.node]
        out.append(PlanStage(c.start, c.end, c.degree, c.node, fn.devices[nxt[c.node]:nxt[c.node] + c.degree]))
        nxt[c.node] += c.degree
    return tuple(out)


def _describe(levels) -> str:
    unit = {"latency": " us", "concurrency": " live requests"}
    parts = []
    for lv in levels:
        value = f"{float(lv.value):g}" if isinstance(lv.value, (float, Fraction)) else f"{lv.value}"
        u = unit.get(lv.name, "")
        if lv.proven:
            parts.append(f"{lv.name} {value}{u} (proven)")
        elif lv.bound is None:
            parts.append(f"{lv.name} {value}{u} (not proven)")
        else:
            b = f"{float(lv.bound):g}" if isinstance(lv.bound, (float, Fraction)) else f"{lv.bound}"
            parts.append(f"{lv.name} {value}{u} (bound {b}{u}, not proven)")
    return ", ".join(parts)


def solve_problem(prob: PerStageProblem, *, order=("devices", "concurrency", "latency"), time_limit: float = 30.0,
                  seed: int = 0, threads: int = 2, progress=None, deadline: Deadline | None = None
                  ) -> PerStageOutcome:
    """The best plan of ``prob`` under the levels of ``order`` (a sequence of
    :data:`PER_STAGE_LEVELS`, devices first), each level solved with the earlier ones fixed at their
    proven optimum. Ctrl-C returns the best plan so far (``interrupted``).

    Without an attention requirement only the longest stage of each (start, degree, node) is a
    candidate: given any plan, growing each stage in turn to its longest (each next stage then
    starts later, and a stage that fits still fits with fewer layers) keeps the sequence of
    groups, so it uses no more devices, has the same hops (or fewer stages, hence fewer devices)
    and fits at the same concurrency. So every level's optimum is among plans of longest stages at
    the concurrency in force: the guaranteed concurrency is then the largest c at which such a plan
    meets the levels before it (exponential and binary search over c, each probe decided by CP-SAT
    on the model at c). With an attention requirement every stage is a candidate and concurrency
    is a variable of the model (the smallest chosen ceiling).
    """
    bad = [x for x in order if x not in PER_STAGE_LEVELS]
    if bad or not order or order[0] != "devices":
        raise ValueError(f"per-stage levels: devices first, then any of concurrency, latency (got {','.join(order)})")
    return _LevelSearch(prob, tuple(order), time_limit, seed, threads, progress, deadline).run()


solve_per_stage = solve_problem     # its name before placer.algorithms.stage_degrees; kept for one release


class _LevelSearch:
    """The state of one :func:`solve_problem`: the best plan so far (``best``: its concurrency and
    chosen candidates), the proven optimum of each level solved (``found``, fixed for the later
    levels), the levels reported, the concurrency in force and whether Ctrl-C was seen."""

    def __init__(self, prob, order, time_limit, seed, threads, progress, deadline):
        self.prob, self.order = prob, order
        self.seed, self.threads, self.progress = seed, threads, progress
        self.t0 = time.monotonic()
        self.deadline = Deadline.of(deadline, time_limit)
        self.stats: dict = dict(seed=seed, threads=threads, time_limit=time_limit, phases=[])
        self.best: tuple | None = None
        self.found: dict = {}
        self.levels: list[Level] = []
        self.interrupted = False
        self.c = prob.concurrency
        self.maximal = prob.attention is None
        self.models: dict = {}

    # ------------------------------------------------------------------ helpers
    def model_at(self, c):
        from placer.algorithms.cpsat.stage_degrees import PerStageModel

        if c not in self.models:
            self.models.clear()        # one model at a time: they can be large
            self.models[c] = PerStageModel(self.prob, candidates(self.prob, c, maximal=self.maximal,
                                                                 deadline=self.deadline),
                                           deadline=self.deadline, concurrency=not self.maximal)
            self.stats.setdefault("candidates", len(self.models[c].cands))
        return self.models[c]

    def plan(self):
        return None if self.best is None else self.best[1]

    def solve_level(self, model, name, share, c, target=None):
        out, got = model.solve_level(name, self.found, hint=self.plan(), time_limit=share, seed=self.seed,
                                     threads=self.threads, progress=self.progress, t0=self.t0, target=target)
        rec = dict(phase=name if c == self.prob.concurrency else f"{name} at concurrency {c}", **out.record())
        self.stats["phases"].append(rec)
        self.interrupted = self.interrupted or out.interrupted
        if got is not None:
            self.best = (c, got)
        return out

    def record(self, c, chosen):
        self.best = (c, chosen)
        self.stats["phases"].append(dict(phase=f"feasible at concurrency {c}", how="cheapest chain laid on nodes"))

    def proven_level(self, name, value) -> None:
        self.levels.append(Level(name, value, value, True))
        self.found[name] = value

    def finish(self, status, message) -> PerStageOutcome:
        prob = self.prob
        self.stats["seconds"] = round(time.monotonic() - self.t0, 4)
        self.stats["latency_scale"] = next((m.lat_scale for m in self.models.values()), None)
        stages = _allocate(prob, self.plan()) if self.plan() is not None else None
        out_levels = list(self.levels)
        if stages is not None:
            check_plan(prob, stages)
            values = plan_value(prob, stages)
            done = {lv.name for lv in out_levels}
            out_levels += [Level(name, values[name], None, False) for name in self.order if name not in done]
        out_levels = [Level(lv.name, float(lv.value), None if lv.bound is None else float(lv.bound), lv.proven)
                      if lv.name == "latency" else lv for lv in out_levels]
        if status == Status.OPTIMAL and not all(lv.proven for lv in out_levels):
            status = Status.FEASIBLE
        text = message or _describe(out_levels)
        if self.interrupted and stages is not None:
            text += "; interrupted: best plan so far"
        return PerStageOutcome(status, stages, tuple(out_levels), text, self.interrupted,
                               time.monotonic() - self.t0, self.stats)

    # ------------------------------------------------------------------ the levels
    def concurrency_level(self, share) -> bool:
        """The guaranteed concurrency by search over c; False when no plan was found."""
        from placer.algorithms.search import largest_true

        c_star, proven, upper, cap = _largest_concurrency(self.prob, self.found, self.model_at, self.solve_level,
                                                          share, self.deadline, largest_true, self.record)
        if c_star is None:
            return False
        self.c = c_star
        value = plan_value(self.prob, _allocate(self.prob, self.plan()))["concurrency"]
        # capped: the plan's own ceiling is the optimum only when it meets the upper bound
        met = proven and (value >= upper if cap is not None else value == c_star)
        self.levels.append(Level("concurrency", value, value if met else max(upper, value), bool(met), cap=cap))
        return True

    def devices_start(self, model):
        """The devices level's path bound (set on the model), and a first plan laid on the nodes."""
        target = fewest_devices_bound(self.prob, model.cands)
        self.stats["devices_path_bound"] = target
        if target is not None:
            model.at_least(target)
        if self.maximal and self.best is None:
            laid = path_plan(self.prob, model.cands)
            if laid is not None:
                self.best = (self.c, laid)
                self.stats["phases"].append(dict(phase="start", how="cheapest chain laid on nodes",
                                                 devices=sum(c.degree for c in laid)))
        return target

    def latency_start(self, model):
        """(the latency level's target in model units, its exact floor); the level is proven at once
        (returns None) when the relaxation's optimum is a plan."""
        lat_floor, chain = latency_bound(self.prob, model.cands, self.found["devices"])
        self.stats["latency_path_bound"] = None if lat_floor is None else float(lat_floor)
        target = model.latency_target(self.found["devices"])
        if lat_floor is not None:
            q = lat_floor * model.lat_scale
            target = max(target, q.numerator // q.denominator)
        if chain is not None and model.satisfies(chain, self.found):
            self.best = (self.c, chain)     # the relaxation's optimum is a plan: proven
            self.proven_level("latency", model.exact_value("latency", chain))
            return None
        return target, lat_floor

    def model_level(self, k, name, share):
        """A devices or latency level on the model at the concurrency in force: ``"stop"`` (no plan
        or not proven), ``"infeasible"`` (proven impossible at the first level) or ``"next"``."""
        model = self.model_at(self.c)
        target, lat_floor = None, None
        if name == "devices":
            target = self.devices_start(model)
            if self.plan() is not None and target is not None and sum(c.degree for c in self.plan()) <= target:
                self.proven_level(name, target)     # the start meets the bound: proven without a search
                return "next"
        if name == "latency" and "devices" in self.found:
            started = self.latency_start(model)
            if started is None:
                return "next"
            target, lat_floor = started
        out = self.solve_level(model, name, share, self.c, target)
        if out.status == "INFEASIBLE" and k == 0:
            return "infeasible"
        if self.plan() is None:
            return "stop"
        value = model.exact_value(name, self.plan())
        bound = model.level_bound(name, out, value)
        if name == "devices" and target is not None:
            bound = max(bound if bound is not None else target, min(target, value))
        if name == "latency" and target is not None:      # (latencies are never negative)
            floor = min(max(Fraction(target, model.lat_scale), lat_floor or 0), value)
            bound = floor if bound is None else max(bound, floor)
        self.levels.append(Level(name, value, bound, bound is not None and value == bound and not out.interrupted))
        return "solved"

    # ------------------------------------------------------------------ the search
    def run(self) -> PerStageOutcome:
        try:
            return self._run()
        except KeyboardInterrupt:
            note_interrupt()
            self.interrupted = True
            return self.finish(Status.FEASIBLE if self.plan() is not None else Status.UNKNOWN,
                               "" if self.plan() is not None else "interrupted before any plan was found")
        except DeadlineReached:
            return self.finish(Status.FEASIBLE if self.plan() is not None else Status.UNKNOWN,
                               "" if self.plan() is not None else "no plan found within the time limit (building "
                                                                  "the model took it all)")

    def _run(self) -> PerStageOutcome:
        prob, order = self.prob, self.order
        if not reachable(prob, candidates(prob, maximal=True, deadline=self.deadline)):
            return self.finish(Status.INFEASIBLE, "no chain of stages fits: some layers fit no group of any allowed "
                                                  "degree on any node at this concurrency")
        if not any(prob.requests[g][i] for g in prob.degrees for i in range(prob.n)):
            order = tuple(x for x in order if x != "concurrency")
        for k, name in enumerate(order):
            left = self.deadline.remaining()
            if left <= 0.05 or self.interrupted:
                break
            share = left if k == len(order) - 1 else left / 2
            if name == "concurrency" and self.maximal:
                if not self.concurrency_level(share):
                    break
            else:
                step = self.model_level(k, name, share)
                if step == "infeasible":
                    return self.finish(Status.INFEASIBLE, "CP-SAT proved that no per-stage plan exists: the groups "
                                                          "the nodes can supply cannot carry every layer")
                if step == "stop":
                    break
                if step == "next":
                    continue
            if not self.levels[-1].proven:
                break
            self.found[name] = self.levels[-1].value
        if self.plan() is None:
            why = "interrupted before any plan was found" if self.interrupted else "no plan found within the time limit"
            return self.finish(Status.UNKNOWN, why)
        return self.finish(Status.OPTIMAL if not self.interrupted else Status.FEASIBLE, "")


def _largest_concurrency(prob, found, model_at, run, share, deadline, largest_true, record):
    """(c*, proven, an upper bound): the largest concurrency at which a plan of longest stages meets
    the levels of ``found``; each probe a CP-SAT feasibility solve on the model at c."""
    stop = deadline.within(share)
    ruled_out: list[int] = []
    base = prob.concurrency
    # beyond this, some layer fits no group on its own
    top = None
    for i in range(prob.n):
        ceilings = [_ceiling(fn.capacity[g], prob.weights[g][i], prob.requests[g][i])
                    for fn in prob.nodes for g in prob.degrees if g <= fn.size]
        if ceilings and all(x is not None for x in ceilings):
            top = max(ceilings) if top is None else min(top, max(ceilings))
    top = max(base, top if top is not None else base)
    # no workload states more than MAX_CONCURRENCY live requests: the search stops there
    searched = min(top, MAX_CONCURRENCY)

    def decide(c: int) -> bool | None:
        if c == base and found:
            return True               # the earlier levels were solved at the base concurrency
        left = stop.remaining()
        if left <= 0.05:
            return None
        model = model_at(c)
        need = fewest_devices_bound(prob, model.cands)
        if need is None or ("devices" in found and need > found["devices"]):
            ruled_out.append(c)       # even with every node's supply unlimited it takes more devices
            return False
        if set(found) <= {"devices"}:
            laid = path_plan(prob, model.cands)
            if laid is not None and sum(x.degree for x in laid) <= found.get("devices", need):
                record(c, laid)
                return True
        out = run(model, "feasible", max(left / 3, 0.05), c)
        if out.status == "INFEASIBLE":
            ruled_out.append(c)
            return False
        if out.values is not None:
            return True
        return None

    c_star, proven = largest_true(decide, base, searched)
    upper = min(ruled_out) - 1 if ruled_out else top
    return c_star, proven, upper, (searched if c_star == searched < top else None)
