"""Plans for a speed: placements whose simulated per-user speed meets a floor.

A pipeline's per-user speed falls as it serves more requests at once, so a speed floor caps the
live requests one placement can hold at that speed. :func:`speed_search` answers "serve ``C``
live requests at no less than ``X`` tokens/s each, on this fleet, with the fewest devices (or the
least power, or the most tokens/s per MW)":

1. *shapes*: placements by the solver's public :func:`placer.algorithms.place` (through
   :func:`placer.planning.budget.min_devices`) for per-replica concurrency targets 1, 2, 4, ... (and ``C``)
   up to the fleet's ceiling, at every device layout the search allows (:func:`layouts`: each
   tensor-parallel degree of the model and the fleet's nodes, and for MoE models each degree
   with experts spread whole): a target of more live requests gives a placement with more KV
   reserve per stage, so more devices and shorter stages; a higher degree gives stages of more
   devices, each reading a smaller share of the weights per token, plus the group's collectives;
2. each shape's *held concurrency* at the floor (:func:`concurrency_at_speed`): the most live
   requests whose simulated per-user speed still meets ``X``, by exponential then binary search
   over discrete-event runs (the closed-form bound ``1 / unloaded token latency`` rules a shape
   out without simulating);
3. *candidates*: ``k = ceil(C / held)`` identical replicas of a shape on disjoint devices, each
   serving ``ceil(C / k)`` requests (re-simulated at that load), when the fleet forms ``k`` times
   the shape's groups; the objective picks one.

Device figures count devices (a stage of degree ``g`` is ``g`` devices); power is every member's.

When no shape meets the floor even with one request, the plan says so and names the fastest
shape with its single-request speed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from placer.algorithms.search import largest_true
from placer.planning.layouts import device_layouts, has_experts, layout_label
from placer.planning.requirements import Requirements, SolverSettings, floor_from
from placer.planning.solve import Solved, build_instance, place_instance
from placer.problem.instance import Instance
from placer.problem.placement import Result
from placer.simulate.arguments import shortest_prompt
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.fleet import Fleet
from placer.specs.model import LayerGraph
from placer.specs.workload import Workload

__all__ = ["Shape", "Candidate", "SpeedPlan", "concurrency_at_speed",
           "speed_search", "floor_from", "layouts", "has_experts"]


def layouts(model: LayerGraph, fleet: Fleet, degrees=None, ep: bool | None = None, mode: str = "contiguous",
            workload: Workload | None = None) -> tuple[list[tuple[int, bool]], dict[str, str]]:
    """The device layouts ``(tp, ep)`` a speed search tries on ``fleet`` and the refused ones by
    label (``{"tp 3": why}``): :func:`placer.planning.layouts.device_layouts`, experts both ways
    on MoE models unless ``ep`` says."""
    found = device_layouts(model, fleet, degrees=degrees, ep=ep, mode=mode, workload=workload)
    return list(found.allowed), found.refused_by_label()


@dataclass
class Shape:
    """One placement (a replica) and what it does at the floor.

    ``result`` is the solver's on ``instance`` (for a degree above 1, in groups: the instance's
    devices are groups of ``tp`` devices); ``devices`` and ``power_w`` count every device."""

    target: int                      # concurrency the placement was solved for
    instance: Instance
    result: Result
    devices: int
    ceiling: int                     # live requests its KV reserve holds
    power_w: float | None
    alone_tokens_per_s: float        # closed form: one request, 1 / unloaded token latency
    held: int = 0                    # most live requests at >= floor (0: not even one)
    sim_at_held: object = None       # SimResult at ``held``
    groups: int = 0                  # stages' groups used (devices / tp)
    available_groups: int = 0        # groups of ``tp`` the fleet forms

    @property
    def tp(self) -> int:
        return self.instance.tp

    @property
    def ep(self) -> bool:
        return self.instance.ep

    @property
    def layout(self) -> str:
        return layout_label(self.tp, self.ep, self.instance.attention_dp)

    solved: Solved | None = None     # the placement step that made it

    def mapping(self) -> dict:
        """The stage-mapping document of this placement (device figures in devices)."""
        return self.solved.mapping


@dataclass
class Candidate:
    shape: Shape
    replicas: int
    load: int                        # live requests per replica
    sim: object                      # SimResult of one replica at ``load``

    @property
    def devices(self) -> int:
        return self.replicas * self.shape.devices

    @property
    def power_w(self) -> float | None:
        return None if self.shape.power_w is None else self.replicas * self.shape.power_w

    @property
    def aggregate_tokens_per_s(self) -> float:
        return self.replicas * self.sim.aggregate_tokens_per_s

    @property
    def tokens_per_s_per_mw(self) -> float | None:
        p = self.power_w
        return self.aggregate_tokens_per_s / (p / 1e6) if p else None

    @property
    def held(self) -> int:
        return self.replicas * self.shape.held

    def row(self) -> dict:
        s = self.sim
        return dict(target=self.shape.target, tp=self.shape.tp, ep=self.shape.ep,
                    devices_per_replica=self.shape.devices, replicas=self.replicas,
                    devices=self.devices, load_per_replica=self.load, held_per_replica=self.shape.held,
                    held=self.held, per_user_tokens_per_s=s.per_user_tokens_per_s,
                    itl_p50_us=s.itl_p50_us, aggregate_tokens_per_s=self.aggregate_tokens_per_s,
                    power_w=self.power_w, tokens_per_s_per_mw=self.tokens_per_s_per_mw,
                    joules_per_token=(self.power_w / self.aggregate_tokens_per_s
                                      if self.power_w and self.aggregate_tokens_per_s else None),
                    error_band=getattr(s, "speed_error", None))     # the calibration's, for its run's regime


@dataclass
class SpeedPlan:
    floor_tokens_per_s: float
    objective: str
    concurrency: int                 # planned live requests (over all replicas)
    chosen: Candidate | None
    fastest: Shape | None            # the shape with the best single-request speed
    candidates: list[Candidate] = field(default_factory=list)
    shapes: list[Shape] = field(default_factory=list)
    message: str = ""
    refused: dict = field(default_factory=dict)     # device layouts not searched, with the reason

    @property
    def feasible(self) -> bool:
        return self.chosen is not None

    def to_dict(self) -> dict:
        f = self.fastest
        return dict(floor_tokens_per_s=self.floor_tokens_per_s, objective=self.objective,
                    concurrency=self.concurrency, feasible=self.feasible, message=self.message,
                    chosen=self.chosen.row() if self.chosen else None,
                    fastest=None if f is None else dict(devices=f.devices, target=f.target, tp=f.tp, ep=f.ep,
                                                        alone_tokens_per_s=f.alone_tokens_per_s),
                    candidates=[c.row() for c in self.candidates], refused=dict(self.refused))


def _simulate(instance: Instance, assignment, live: int, output_tokens: int, how: str = "exact", **sim):
    """``live`` requests of a replica simulated (a group's, under attention data parallelism: its
    heaviest rank runs its share and the figures are the group's, :mod:`placer.simulate.data_parallel`),
    by the event run or, ``how="fast"``, the fast path where it models the run
    (:func:`placer.simulate.steady.simulate_with`)."""
    from placer.simulate.steady import simulate_with

    return simulate_with(how, instance, assignment, requests=live, max_live=live, output_tokens=output_tokens, **sim)


def ttft_within(ttft_us: float | None, max_ttft_us: float | None) -> bool:
    """Whether a p99 time to first token meets a TTFT target (no target: always; no TTFT: never)."""
    return max_ttft_us is None or (ttft_us is not None and ttft_us <= max_ttft_us)


def meets(sim, floor: float, max_ttft_us: float | None = None) -> bool:
    """Whether a simulation's per-user speed is at least ``floor`` tokens/s and, with a TTFT
    target, its p99 time to first token at most ``max_ttft_us`` (the closed loop with prefill)."""
    v = sim.per_user_tokens_per_s
    if v is None or v < floor:
        return False
    return ttft_within(sim.ttft_p99_us, max_ttft_us)


def concurrency_at_speed(instance: Instance, assignment, floor: float, *, cap: int, output_tokens: int = 16,
                         alone: float | None = None, max_ttft_us: float | None = None, how: str = "exact",
                         **sim) -> tuple[int, object]:
    """The most live requests (at most ``cap``) whose simulated per-user speed is at least ``floor``
    tokens/s (and, with ``max_ttft_us``, whose p99 time to first token is at most that: :func:`meets`),
    and the event run at that load; ``(0, None)`` when not even one request reaches it.

    ``alone`` (the closed-form single-request speed) rules the placement out without simulating.
    Exponential then binary search (:func:`~placer.algorithms.search.largest_true`), assuming the
    speed does not rise with the load (batching more requests into a step never shortens it); the
    returned load's run meets the floor. ``how="fast"`` searches with the fast path
    (:mod:`placer.simulate.steady`) and confirms the load found with the event run, searching below
    it with event runs when the confirmation fails; ``"exact"`` searches with event runs.
    """
    if cap < 1 or (alone is not None and alone < floor):
        return 0, None
    runs: dict[tuple, object] = {}

    def ok(n: int, by: str = how) -> bool:
        if (by, n) not in runs:
            runs[by, n] = _simulate(instance, assignment, n, output_tokens, by, **sim)
        return meets(runs[by, n], floor, max_ttft_us)

    found, _ = largest_true(ok, 1, cap)
    if found is None:
        return 0, None
    if how == "exact" or ok(found, "exact"):
        return found, runs["exact", found]
    below, _ = largest_true(lambda n: ok(n, "exact"), 1, found - 1) if found > 1 else (None, None)
    return (0, None) if below is None else (below, runs["exact", below])


def _targets(concurrency: int, top: int) -> list[int]:
    out, t = [], 1
    while t <= top:
        out.append(t)
        t *= 2
    if concurrency <= top:
        out.append(concurrency)
    return sorted(set(out))


def _better(objective: str):
    if objective == "devices":
        return lambda c: (c.devices, -(c.sim.per_user_tokens_per_s or 0.0))
    if objective == "mw":
        return lambda c: (c.power_w if c.power_w is not None else math.inf, c.devices)
    if objective == "cost":         # US dollars per hour of every replica's devices (the specs' price: blocks)
        from placer.algorithms.cpsat.cost import price_of

        return lambda c: (c.replicas * price_of(c.shape.instance, c.shape.result.assignment), c.devices)
    return lambda c: (-(c.tokens_per_s_per_mw or 0.0), c.devices)


def _shape(solved: Solved, target: int, floor: float, output_tokens: int, max_ttft_us: float | None = None,
           how: str = "exact") -> Shape:
    """A placement and the live requests it holds at ``floor`` (every figure simulated; ``how``:
    :func:`concurrency_at_speed`'s)."""
    from placer.simulate import segments_of

    inst, r = solved.instance, solved.per_group
    segs = segments_of(inst, r.assignment)
    spec = getattr(inst, "speculation", None)
    one = None
    if spec is not None and spec.accept is not None:
        # drafts emit several tokens a step: the closed form of one plain step bounds nothing, so
        # one request is simulated with them (its speed is the shape's fastest: speed falls with load)
        one = _simulate(inst, r.assignment, 1, output_tokens, how).per_user_tokens_per_s
    if one:
        latency = 1e6 / one
    else:
        # one request at its shortest KV (the prompt): no run of this shape is faster
        shortest = shortest_prompt(inst, output_tokens)
        latency = sum(s.time_us([shortest]) + s.hop_time_us(1) for s in segs)
    used = sorted(set(r.assignment))
    powers = [None if inst.devices[d].type.power_w is None else inst.devices[d].type.power_w * len(inst.members(d))
              for d in used]
    shape = Shape(target=target, instance=inst, result=r, devices=r.devices_used * inst.tp,
                  ceiling=int(inst.group_requests(r.concurrency_ceiling) or inst.group_requests(target)),
                  power_w=float(sum(powers)) if all(powers) else None, alone_tokens_per_s=1e6 / latency,
                  groups=r.devices_used, available_groups=len(inst.devices), solved=solved)
    shape.held, shape.sim_at_held = concurrency_at_speed(
        inst, r.assignment, floor, cap=shape.ceiling, output_tokens=output_tokens, alone=shape.alone_tokens_per_s,
        max_ttft_us=max_ttft_us, how=how)
    return shape


def speed_search(model: LayerGraph, fleet: Fleet, workload: Workload, requirements: Requirements,
                 solver: SolverSettings, *, log: Callable[[str], None] | None = None,
                 max_concurrency: int | None = None) -> SpeedPlan:
    """Serve ``workload.concurrency`` live requests at the requirements' speed floor.

    The speed objective picks among the candidates: ``devices`` (fewest, then fastest), ``mw``
    (least power), ``tokens-per-mw`` (most aggregate tokens/s per MW at the planned load) or
    ``cost`` (least US dollars per hour of every replica's devices, from the specs' price: blocks).
    ``max_concurrency`` caps the shapes' targets (default: the planned concurrency x 4). The
    requirements' degrees and expert parallelism choose the device layouts searched
    (:func:`placer.planning.layouts.device_layouts`; default every degree the model and the nodes
    allow, and expert parallelism both ways for MoE models); every shape is an instance of
    :func:`~placer.planning.solve.build_instance` (the constraints, reserve and granularity of the
    requirements) placed by :func:`~placer.planning.solve.place_instance`. ``log(line)`` hears of
    every shape tried. The requirements' ``sim`` says how the held loads are searched (the fast
    path, :mod:`placer.simulate.steady`, each shape's answer confirmed by an event run; or event runs
    throughout); every candidate's figures come from a discrete-event run.
    """
    targets, placement = requirements.targets, requirements.placement
    floor = targets.speed_floor
    max_ttft_us = None if targets.max_ttft_ms is None else targets.max_ttft_ms * 1e3
    objective = targets.speed_objective
    output_tokens = targets.output_tokens
    total = workload.concurrency
    if total < 1:
        raise InvalidSpec(ARGUMENT, "concurrency", "a speed target needs at least 1 planned live request")
    mode = requirements.mode_for(solver.method or "cpsat")
    found = device_layouts(model, fleet, degrees=placement.layout_degrees, ep=placement.expert_parallel, mode=mode,
                           workload=workload, attention_dp=placement.attention_dp).require_some(model)
    refused = found.refused_by_label()
    top = max_concurrency if max_concurrency is not None else 4 * total
    say = log or (lambda _msg: None)
    shapes: list[Shape] = []
    for tp, spread, adp in found.every():
        base = build_instance(model, fleet, workload, requirements, tp=tp, ep=spread, attention_dp=adp)
        seen: set[tuple] = set()
        tag = layout_label(tp, spread, adp)
        # targets are a rank's live requests under attention data parallelism (the group holds tp times)
        for t in _targets(-(-total // base.requests_factor), -(-top // base.requests_factor)):
            solved = place_instance(base.with_concurrency(t), solver, reports=False, keep_interrupted=False)
            r = solved.per_group
            if not r.feasible:
                say(f"{tag}, target {t} live requests: no placement ({r.status})")
                break                               # more live requests only need more room
            key = tuple(r.assignment)
            if key in seen:
                continue
            seen.add(key)
            shape = _shape(solved, t, floor, output_tokens, max_ttft_us, targets.sim)
            say(f"{tag}, target {t}: {shape.devices} devices, {shape.alone_tokens_per_s:,.0f} tokens/s alone, "
                f"holds {shape.held} live requests at {floor:,.0f} tokens/s each")
            shapes.append(shape)
    return _choose(shapes, fleet, total, floor, objective, output_tokens, refused, max_ttft_us)


def _choose(shapes, fleet, total, floor, objective, output_tokens, refused, max_ttft_us=None) -> SpeedPlan:
    """The candidates (replicas of each shape that meet the floor at their load) and the chosen one."""
    fastest = max(shapes, key=lambda s: s.alone_tokens_per_s, default=None)
    candidates: list[Candidate] = []
    for s in shapes:
        if s.held < 1:
            continue
        k = -(-total // s.held)
        if k * s.groups > s.available_groups:
            continue
        load = -(-total // k)
        sim = s.sim_at_held if load == s.held else _simulate(s.instance, s.result.assignment, load, output_tokens)
        if not meets(sim, floor, max_ttft_us):
            continue                                # re-checked at the load it would serve
        candidates.append(Candidate(shape=s, replicas=k, load=load, sim=sim))
    chosen = min(candidates, key=_better(objective)) if candidates else None
    if chosen is not None:
        message = (f"{chosen.replicas} x {chosen.shape.devices} devices ({chosen.shape.layout}) serve {total} live "
                   f"requests at {chosen.sim.per_user_tokens_per_s:,.1f} tokens/s each (floor {floor:,.1f}); each "
                   f"replica holds {chosen.shape.held} at the floor")
    elif fastest is None:
        message = "no placement of the model fits the fleet"
    elif fastest.alone_tokens_per_s < floor:
        message = (f"the floor of {floor:,.1f} tokens/s per user cannot be met on {fleet.name}: the fastest "
                   f"placement ({fastest.devices} devices, {fastest.layout}) gives {fastest.alone_tokens_per_s:,.1f} "
                   f"tokens/s to a single request")
    else:
        best = max(shapes, key=lambda s: s.held * (s.available_groups // max(s.groups, 1)))
        k = best.available_groups // best.groups
        message = (f"the floor of {floor:,.1f} tokens/s per user is met, but not for {total} live requests on "
                   f"{fleet.name}: at most {best.held * k} ({k} replicas of {best.devices} devices, {best.layout})")
    return SpeedPlan(floor_tokens_per_s=floor, objective=objective, concurrency=total, chosen=chosen,
                     fastest=fastest, candidates=candidates, shapes=shapes, message=message, refused=refused)
