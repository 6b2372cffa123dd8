"""Plans for a speed: placements whose simulated per-user speed meets a floor.

A pipeline's per-user speed falls as it serves more requests at once, so a speed floor caps the
live requests one placement can hold at that speed. :func:`plan_for_speed` answers "serve ``C``
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

from ..algorithms.search import largest_true
from ..errors import ARGUMENT, InvalidSpec
from ..fleet import Fleet
from ..groups import default_degrees, node_sizes, per_device
from ..instance import Instance, make_instance
from ..model import LayerGraph
from ..parallel import allowed_degrees
from ..placement import Result
from ..reserve import Reserve
from ..workload import Workload
from .budget import min_devices

__all__ = ["OBJECTIVES", "Shape", "Candidate", "SpeedPlan", "concurrency_at_speed", "plan_for_speed",
           "floor_from", "layouts", "has_experts"]

OBJECTIVES = ("devices", "mw", "tokens-per-mw")


def floor_from(min_user_tps: float | None = None, max_itl_ms: float | None = None) -> float:
    """The per-user floor in tokens/s from ``--min-user-tps`` or ``--max-itl-ms`` (one of them)."""
    if (min_user_tps is None) == (max_itl_ms is None):
        raise InvalidSpec(ARGUMENT, "min_user_tps", "give --min-user-tps or --max-itl-ms, not both")
    if min_user_tps is not None:
        if not min_user_tps > 0 or not math.isfinite(min_user_tps):
            raise InvalidSpec(ARGUMENT, "min_user_tps", "must be a positive number of tokens/s")
        return float(min_user_tps)
    if not max_itl_ms > 0 or not math.isfinite(max_itl_ms):
        raise InvalidSpec(ARGUMENT, "max_itl_ms", "must be a positive number of milliseconds")
    return 1000.0 / max_itl_ms


def has_experts(model: LayerGraph) -> bool:
    """Whether ``model`` has MoE layers with the dimensions expert parallelism spreads."""
    return any(x.ffn == "moe" and x.ffn_dims for x in model.layers)


def layouts(model: LayerGraph, fleet: Fleet, degrees=None, ep: bool | None = None, mode: str = "contiguous",
            workload: Workload | None = None) -> tuple[list[tuple[int, bool]], dict[str, str]]:
    """The device layouts ``(tp, ep)`` a search over degrees tries on ``fleet``, and the refused
    ones with their reasons (``{"tp 3": why}``).

    Degrees: ``degrees`` (default :func:`placer.groups.default_degrees`: the divisors of the
    largest node's size the model's heads allow; 1 on wafer fleets and in split mode), each at most
    the largest node (under ``workload`` when given: see :func:`placer.parallel.allowed_degrees`).
    ``ep``: None tries, for a model with MoE layers, every degree above 1 both
    with experts tensor-split and spread whole; True only spread whole (tp 1 stays, unsplit);
    False only tensor-split.
    """
    refused: dict[str, str] = {}
    gpu = any(d.type.kind == "gpu" for d in fleet.available)
    if mode == "split" or not gpu:
        if degrees is not None and any(g != 1 for g in degrees):
            why = "split mode runs at tp 1" if mode == "split" else f"{fleet.name} is no GPU fleet (a stage is one device)"
            refused.update({f"tp {g}": why for g in sorted(set(degrees)) if g != 1})
        return [(1, False)], refused
    experts = has_experts(model)
    largest = max(node_sizes(fleet).values())
    out: list[tuple[int, bool]] = []
    for spread in ((False,) if ep is False or not experts else (True,) if ep else (False, True)):
        if degrees is None:
            ok, bad = default_degrees(model, fleet, spread, workload)
        else:
            ok, bad = allowed_degrees(model, degrees, spread, workload)
        tag = " ep" if spread else ""
        refused.update({f"tp {g}{tag}": why for g, why in bad.items()})
        for g in ok:
            if spread and g == 1:            # experts spread over one device: tp 1 itself
                if ep:
                    out.append((1, False))
                continue
            if g > largest:
                refused[f"tp {g}{tag}"] = f"no node of {fleet.name} has {g} available devices (the largest has {largest})"
                continue
            out.append((g, spread))
    if ep and not experts:
        refused["ep"] = f"{model.name} has no MoE layers to spread"
    out.sort()
    return out, refused


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
        return f"tp {self.tp}" + (" ep" if self.ep else "")

    def mapping(self) -> dict:
        """The stage-mapping document of this placement (device figures in devices)."""
        from ..mapping import build_mapping

        return build_mapping(self.instance, per_device(self.result, self.instance))


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
                                      if self.power_w and self.aggregate_tokens_per_s else None))


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


def _simulate(instance: Instance, assignment, live: int, output_tokens: int, **sim):
    from ..simulate import simulate

    return simulate(instance, assignment, requests=live, max_live=live, output_tokens=output_tokens, **sim)


def concurrency_at_speed(instance: Instance, assignment, floor: float, *, cap: int, output_tokens: int = 16,
                         alone: float | None = None, **sim) -> tuple[int, object]:
    """The most live requests (at most ``cap``) whose simulated per-user speed is at least ``floor``
    tokens/s, and the simulation at that load; ``(0, None)`` when not even one request reaches it.

    ``alone`` (the closed-form single-request speed) rules the placement out without simulating.
    Exponential then binary search (:func:`~placer.algorithms.search.largest_true`), assuming the
    speed does not rise with the load (batching more requests into a step never shortens it); the
    returned load's run meets the floor.
    """
    if cap < 1 or (alone is not None and alone < floor):
        return 0, None
    runs: dict[int, object] = {}

    def ok(n: int) -> bool:
        if n not in runs:
            runs[n] = _simulate(instance, assignment, n, output_tokens, **sim)
        v = runs[n].per_user_tokens_per_s
        return v is not None and v >= floor

    found, _ = largest_true(ok, 1, cap)
    return (0, None) if found is None else (found, runs[found])


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
    return lambda c: (-(c.tokens_per_s_per_mw or 0.0), c.devices)


def _shape(inst: Instance, r: Result, target: int, floor: float, output_tokens: int) -> Shape:
    """A placement of ``inst`` and the live requests it holds at ``floor`` (every figure simulated)."""
    from ..simulate import segments_of

    segs = segments_of(inst, r.assignment)
    # one request at its shortest KV (the prompt): no run of this shape is faster
    shortest = max(1, inst.workload.context_tokens - output_tokens)
    latency = sum(s.time_us([shortest]) + s.hop_time_us(1) for s in segs)
    used = sorted(set(r.assignment))
    powers = [None if inst.devices[d].type.power_w is None else inst.devices[d].type.power_w * len(inst.members(d))
              for d in used]
    shape = Shape(target=target, instance=inst, result=r, devices=r.devices_used * inst.tp,
                  ceiling=int(r.concurrency_ceiling or target),
                  power_w=float(sum(powers)) if all(powers) else None, alone_tokens_per_s=1e6 / latency,
                  groups=r.devices_used, available_groups=len(inst.devices))
    shape.held, shape.sim_at_held = concurrency_at_speed(
        inst, r.assignment, floor, cap=shape.ceiling, output_tokens=output_tokens, alone=shape.alone_tokens_per_s)
    return shape


def plan_for_speed(model: LayerGraph, fleet: Fleet, workload: Workload, *, min_user_tps: float,
                   objective: str = "devices", mode: str = "contiguous", granularity: str | None = None,
                   method: str | None = None, output_tokens: int = 16, max_concurrency: int | None = None,
                   progress: Callable[[str], None] | None = None, degrees=None, ep: bool | None = None,
                   reserve: Reserve | None = None, **solver_options) -> SpeedPlan:
    """Serve ``workload.concurrency`` live requests at ``>= min_user_tps`` tokens/s each.

    ``objective``: ``devices`` (fewest, then fastest), ``mw`` (least power) or ``tokens-per-mw``
    (most aggregate tokens/s per MW at the planned load). ``max_concurrency`` caps the shapes'
    targets (default: the planned concurrency x 4). ``degrees`` and ``ep`` choose the device
    layouts searched (:func:`layouts`; default every degree the model and the nodes allow, and
    expert parallelism both ways for MoE models); ``reserve`` overrides the device types' runtime
    reserve. ``solver_options`` go to :func:`min_devices` (time_limit, seed, workers). Every
    candidate's figures come from a discrete-event run.
    """
    if objective not in OBJECTIVES:
        raise InvalidSpec(ARGUMENT, "objective", f"unknown objective {objective!r} "
                                                      f"(choose from {', '.join(OBJECTIVES)})")
    floor = floor_from(min_user_tps=min_user_tps)
    total = workload.concurrency
    if total < 1:
        raise InvalidSpec(ARGUMENT, "concurrency", "a speed target needs at least 1 planned live request")
    found, refused = layouts(model, fleet, degrees, ep, mode, workload)
    if not found:
        why = "; ".join(f"{k}: {v}" for k, v in refused.items())
        raise InvalidSpec(ARGUMENT, "tp", f"{model.name} runs at none of the degrees asked for ({why})")
    top = max_concurrency if max_concurrency is not None else 4 * total
    say = progress or (lambda _msg: None)
    shapes: list[Shape] = []
    for tp, spread in found:
        base = make_instance(model, fleet, workload, mode=mode, tp=tp, ep=spread, reserve=reserve,
                             granularity=granularity or ("shards:4" if mode == "split" else "layer"))
        seen: set[tuple] = set()
        tag = f"tp {tp}{' ep' if spread else ''}"
        for t in _targets(total, top):
            inst = base.with_concurrency(t)
            r = min_devices(inst, method, **solver_options)
            if not r.feasible:
                say(f"{tag}, target {t} live requests: no placement ({r.status})")
                break                               # more live requests only need more room
            key = tuple(r.assignment)
            if key in seen:
                continue
            seen.add(key)
            shape = _shape(inst, r, t, floor, output_tokens)
            say(f"{tag}, target {t}: {shape.devices} devices, {shape.alone_tokens_per_s:,.0f} tokens/s alone, "
                f"holds {shape.held} live requests at {floor:,.0f} tokens/s each")
            shapes.append(shape)
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
        if sim.per_user_tokens_per_s is None or sim.per_user_tokens_per_s < floor:
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
