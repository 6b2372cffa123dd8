"""Disaggregated prefill and decode: a prefill pool and a decode pool, each placed and proven by
the same machinery as a one-pool plan, and the ratio of their replicas chosen for a request rate.

What is modelled, per request of ``prompt_tokens`` (ISL) in and ``decode_tokens`` (OSL) out:

* **Prefill pool** (its own fleet: ``Pools.prefill_fleet``, a device type of a mixed fleet,
  or the decode fleet): a placement of the model whose workload holds, for each of the ``P``
  requests in flight in prefill, the prompt's KV cache (and recurrent state) being built
  (``context_tokens = ISL``, ``concurrency = P``), plus the activations of one chunk of
  ``min(ISL, token budget)`` tokens at every hop (the activation buffers' ``micro_batch``). A
  prompt is prefilled in chunks of the token budget (:func:`placer.simulate.prefill.prompt_time_us`,
  the simulator's prefill cost); alone it takes ``t_prefill`` us and holds its busiest device for
  ``s`` us, so a replica starts a prompt every ``s`` us (prompts pipeline through the stages) and
  ``P = ceil(t_prefill / s)`` prompts are in flight in it. ``P`` is found by re-placing until it is
  stable.
* **KV transfer**: the prompt's KV and state bytes (every layer, at the workload's KV bits) over the
  slowest link between the pools, ``latency + bytes / bandwidth`` (:func:`pool_link`), after the
  prefill (no layer-wise overlap: an upper bound on what Mooncake or NIXL take).
* **TTFT** = queueing + ``t_prefill`` + transfer. Queueing: arrivals at ``R / x`` per prefill
  replica (Poisson), served one every ``s`` us: the M/D/1 mean wait ``rho s / (2 (1 - rho))``,
  ``rho = R s / x``. The fewest ``x`` meeting the target: ``rho <= 2B / (s + 2B)`` with ``B`` the
  target less prefill and transfer. Batching prompts into one step is not credited.
* **Decode pool**: placements holding ``target`` live requests at ``ISL + OSL`` tokens of KV each
  (the reserve at the request's last token), for targets 1, 2, 4, ...; each shape's *held*
  requests are the most whose decode-only simulated per-user speed meets ``1 / TPOT``
  (:func:`placer.planning.speed.concurrency_at_speed`); its TPOT is the simulated mean token gap at
  that load. At a rate ``R`` the decode pool holds ``L = R x OSL x TPOT`` live requests (Little's
  law), so ``y = ceil(L / held)``; at a fixed concurrency ``C``, ``y = ceil(C / held)`` and the rate
  is the decode pool's completion rate ``C / (OSL x TPOT at C / y)``.

The plan is the pair of shapes and ``(x, y)`` with the fewest devices (or the least power, or the
least US dollars per hour of both pools' devices from the specs' ``price:`` blocks) whose
replicas fit their fleets side by side; among equals, the least power, then the shortest TTFT,
then the decode shape holding the most. Each pool's placement carries its own proof; the choice
among shapes is exhaustive over the shapes tried.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from placer.planning.disagg_check import choose_confirmed, queue_wait_us
from placer.planning.disagg_fit import fits_pair, most_rate
from placer.planning.layouts import device_layouts, layout_label
from placer.planning.requirements import Pools, Requirements, SolverSettings
from placer.planning.solve import Solved, build_instance, place_instance, speculative_model
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.fleet import Fleet
from placer.specs.model import LayerGraph
from placer.specs.workload import Workload

__all__ = ["PoolLink", "PrefillShape", "DecodeShape", "DisaggCandidate", "DisaggPlan", "pool_link",
           "prefill_fleet_of", "prompt_transfer_bytes", "prefill_replicas_for", "prefill_times", "plan_disagg"]

MAX_PREFILL_ROUNDS = 6      # re-placements while the prompts in flight grow


# ----------------------------------------------------------------------------- the link and the bytes moved
@dataclass(frozen=True)
class PoolLink:
    """The link a prompt's KV crosses from the prefill pool to the decode pool."""

    latency_us: float
    bandwidth: float            # bytes/s
    source: str                 # where the figures come from

    def time_us(self, nbytes: int) -> float:
        return self.latency_us + nbytes / self.bandwidth * 1e6


def _inter_rack(fleet: Fleet) -> tuple[float | None, float | None]:
    from placer.specs.units import parse_bandwidth

    f = (fleet.spec or {}).get("fleet", {})
    bw = f.get("inter_rack_bandwidth")
    return f.get("inter_rack_latency_us", 3.0), None if bw is None else parse_bandwidth(bw)


def pool_link(prefill: Fleet, decode: Fleet, same_fleet: bool) -> PoolLink:
    """The slowest link between the pools: on one fleet (pools of different types, or one type
    whose pools sit in different racks), the direct links between a prefill and a decode device,
    else the fleet's inter-rack link; between two fleets, the slower of their inter-rack links.
    Raises :class:`InvalidSpec` when no bandwidth is stated."""
    if same_fleet:
        p_ids = {d.id for d in prefill.available}
        d_ids = {d.id for d in decode.available}
        between = [(lat, bw) for (a, b), (lat, bw) in decode.link_table.items()
                   if ((a in p_ids and b in d_ids) or (a in d_ids and b in p_ids)) and bw is not None
                   and decode.by_id[a].rack != decode.by_id[b].rack]
        if between and p_ids.isdisjoint(d_ids):
            return PoolLink(max(x[0] for x in between), min(x[1] for x in between),
                            f"{decode.name}: links between the pools' racks")
        lat, bw = _inter_rack(decode)
        if bw is None:
            raise InvalidSpec(decode.source or decode.name, "fleet.inter_rack_bandwidth",
                              "needed to price the KV transfer between the prefill and decode pools")
        return PoolLink(float(lat), float(bw), f"{decode.name}: inter-rack link")
    figures = []
    for f in (prefill, decode):
        lat, bw = _inter_rack(f)
        if bw is None:
            raise InvalidSpec(f.source or f.name, "fleet.inter_rack_bandwidth",
                              "needed to price the KV transfer between the prefill and decode pools")
        figures.append((float(lat), float(bw)))
    return PoolLink(max(x[0] for x in figures), min(x[1] for x in figures),
                    f"the slower inter-rack link of {prefill.name} and {decode.name}")


def prompt_transfer_bytes(model: LayerGraph, workload: Workload, prompt_tokens: int) -> int:
    """Bytes of one request's KV cache and recurrent state after a ``prompt_tokens`` prefill, over
    every layer (what a prefill worker sends a decode worker)."""
    from placer.problem.memory import request_bytes

    wl = workload.replace(context_tokens=prompt_tokens)
    return sum(request_bytes(layer, wl) for layer in model.layers)


def prefill_fleet_of(fleet: Fleet, prefill: Fleet | str | None) -> tuple[Fleet, Fleet, bool]:
    """``(prefill fleet, decode fleet, same fleet)``: a second fleet as given; a device type of
    ``fleet`` splits it (the type prefills, the rest decodes); None: both pools on ``fleet``."""
    if prefill is None:
        return fleet, fleet, True
    if isinstance(prefill, Fleet):
        return prefill, fleet, False
    types = {d.type.name for d in fleet.available}
    if prefill not in types:
        raise InvalidSpec(ARGUMENT, "prefill_hardware", f"{prefill!r} is neither a hardware spec nor a device type "
                                                        f"of {fleet.name} ({', '.join(sorted(types))})")
    if types == {prefill}:
        return fleet, fleet, True
    p_out = [d.id for d in fleet.available if d.type.name != prefill]
    d_out = [d.id for d in fleet.available if d.type.name == prefill]
    return fleet.without(p_out), fleet.without(d_out), True


# ----------------------------------------------------------------------------- shapes
@dataclass
class PrefillShape:
    """A prefill replica: its placement, a prompt's time alone (``prefill_us``), the busiest
    device's time per prompt (``interval_us``) and the prompts in flight it was placed for."""

    solved: Solved
    devices: int
    power_w: float | None
    prefill_us: float
    interval_us: float
    in_flight: int

    @property
    def layout(self) -> str:
        return layout_label(self.solved.instance.tp, self.solved.instance.ep)

    @property
    def prompts_per_s(self) -> float:
        return 1e6 / self.interval_us

    @property
    def price_per_hour(self) -> float | None:
        from placer.planning.disagg_price import replica_price

        return replica_price(self.solved)


@dataclass
class DecodeShape:
    """A decode replica: its placement, the live requests it holds at the TPOT target and the
    simulation at that load (decode only)."""

    solved: Solved
    devices: int
    power_w: float | None
    target: int
    held: int
    sim: object

    @property
    def layout(self) -> str:
        inst = self.solved.instance
        return layout_label(inst.tp, inst.ep, inst.attention_dp)

    @property
    def tpot_us(self) -> float:
        return 1e6 / self.sim.per_user_tokens_per_s

    @property
    def price_per_hour(self) -> float | None:
        from placer.planning.disagg_price import replica_price

        return replica_price(self.solved)


def _power(solved: Solved) -> float | None:
    inst, r = solved.instance, solved.per_group
    powers = [inst.devices[d].type.power_w for d in sorted(set(r.assignment))]
    if any(p is None for p in powers):
        return None
    return float(sum(p * len(inst.members(d)) for p, d in zip(powers, sorted(set(r.assignment)))))


def prefill_times(solved: Solved, prompt: int, budget: int) -> tuple[float, float]:
    """``(t_prefill, s)``: one prompt alone through the route, and the busiest device's share (the
    instance's prefix-cache hit is not computed)."""
    from placer.simulate import segments_of
    from placer.simulate.prefill import Chunk, prompt_time_us, step_time_us

    segs = segments_of(solved.instance, solved.per_group.assignment)
    busy: dict[int, float] = {}
    zero = {w: 0.0 for w in set().union(*(s.windows() for s in segs))}
    cached = min(solved.instance.cached_prompt_tokens, prompt - 1)
    start = cached
    while start < prompt:
        n = min(budget, prompt - start)
        for s in segs:
            busy[s.device] = busy.get(s.device, 0.0) + step_time_us(s, 0, zero, (Chunk(start, n),))
        start += n
    return prompt_time_us(segs, prompt, budget, cached), max(busy.values())


def prefill_shapes(model, fleet, workload, req: Requirements, solver: SolverSettings, prompt: int,
                   budget: int, say) -> list[PrefillShape]:
    """One prefill shape per device layout that places (see the module docstring)."""
    chunk = min(prompt, budget)
    base = workload.replace(context_tokens=prompt, micro_batch=chunk)
    out = []
    for tp, ep, _dp in _layouts(model, fleet, base, req):
        in_flight, shape = 1, None
        for _ in range(MAX_PREFILL_ROUNDS):
            inst = build_instance(model, fleet, base, req, tp=tp, ep=ep, concurrency=in_flight)
            solved = place_instance(inst, solver, objective=_level(req), reports=False, keep_interrupted=False)
            if not solved.result.feasible:
                break
            t, s = prefill_times(solved, prompt, budget)
            shape = PrefillShape(solved, solved.result.devices_used, _power(solved), t, s, in_flight)
            need = math.ceil(t / s - 1e-9)
            if need <= in_flight:
                break
            in_flight, shape = need, None
        if shape is None:
            say(f"prefill tp {tp}{' ep' if ep else ''}: no placement")
            continue
        say(f"prefill {shape.layout}: {shape.devices} devices, {shape.prefill_us / 1e3:,.1f} ms per prompt, one "
            f"every {shape.interval_us / 1e3:,.1f} ms, {shape.in_flight} in flight")
        out.append(shape)
    return out


def decode_shapes(model, fleet, workload, req: Requirements, solver: SolverSettings, context: int, floor: float,
                  top: int, say) -> list[DecodeShape]:
    """Decode shapes at targets 1, 2, 4, ... up to ``top`` at every layout, with the live
    requests each holds at ``floor`` tokens/s per user (decode-only simulations)."""
    from placer.planning.speed import concurrency_at_speed

    base_wl = workload.replace(context_tokens=context)
    out = []
    for tp, ep, adp in _layouts(model, fleet, base_wl, req, decode=True):
        seen: set[tuple] = set()
        target = 1
        while target <= top:      # a rank's live requests under attention data parallelism
            inst = build_instance(model, fleet, base_wl, req, tp=tp, ep=ep, concurrency=target, attention_dp=adp)
            solved = place_instance(inst, solver, objective=_level(req), reports=False, keep_interrupted=False)
            if not solved.result.feasible:
                break
            key = tuple(solved.per_group.assignment)
            if key not in seen:
                seen.add(key)
                cap = int(inst.group_requests(solved.per_group.concurrency_ceiling) or inst.group_requests(target))
                held, sim = concurrency_at_speed(inst, solved.per_group.assignment, floor, cap=cap,
                                                 output_tokens=req.targets.output_tokens, decode_only=True)
                if held:
                    shape = DecodeShape(solved, solved.result.devices_used, _power(solved), target, held, sim)
                    say(f"decode {shape.layout}, target {target}: {shape.devices} devices, holds {held} at "
                        f"{shape.tpot_us / 1e3:,.2f} ms per token")
                    out.append(shape)
            target *= 2
    return out


def _level(req: Requirements) -> str | None:
    """CP-SAT's levels for each pool's replica: the price of its devices first under ``--objective
    cost`` (on a mixed fleet a replica may then take more devices of a cheaper type), else the default."""
    return "cost" if req.targets.speed_objective == "cost" else None


def _layouts(model, fleet, workload, req: Requirements, decode: bool = False):
    """``(tp, ep, attention_dp)`` of every layout a pool tries: attention data parallelism (as
    ``req.placement.attention_dp`` says) in the decode pool only (a prefill replica's ranks would each
    prefill their own prompts, which the prefill model does not price)."""
    p = req.placement
    return device_layouts(model, fleet, degrees=p.degrees, ep=p.expert_parallel, mode=req.mode_for("cpsat"),
                          workload=workload, attention_dp=p.attention_dp if decode else False).require_some(model).every()


# ----------------------------------------------------------------------------- the ratio
def prefill_replicas_for(rate: float, interval_us: float, slack_us: float) -> int | None:
    """The fewest prefill replicas whose M/D/1 mean wait at ``rate`` requests/s (split evenly),
    one prompt every ``interval_us`` each, is at most ``slack_us``; None when ``slack_us`` < 0."""
    if slack_us < 0:
        return None
    rho_max = 2 * slack_us / (interval_us + 2 * slack_us)
    if rho_max <= 0:
        return None
    load = rate * interval_us / 1e6
    x = max(1, math.ceil(load / rho_max - 1e-12))
    while x * rho_max < load:           # guard the float rounding of the ceiling
        x += 1
    return x


@dataclass
class DisaggCandidate:
    prefill: PrefillShape
    decode: DecodeShape
    x: int                          # prefill replicas
    y: int                          # decode replicas
    rate: float                     # requests/s served
    live_decode: float              # live requests in the decode pool (Little's law)
    load: int                       # live requests per decode replica
    tpot_us: float                  # at that load (simulated)
    queue_us: float
    transfer_us: float
    decode_sim: object = None
    closed_x: int | None = None     # the closed form's prefill replicas, when the event run raised x
    event_miss: bool = False        # the event run's median TTFT missed the target at every x that fits

    @property
    def ttft_us(self) -> float:
        return self.queue_us + self.prefill.prefill_us + self.transfer_us

    @property
    def devices(self) -> int:
        return self.x * self.prefill.devices + self.y * self.decode.devices

    @property
    def power_w(self) -> float | None:
        if self.prefill.power_w is None or self.decode.power_w is None:
            return None
        return self.x * self.prefill.power_w + self.y * self.decode.power_w

    @property
    def price_per_hour(self) -> float | None:
        """US dollars per hour of every replica of both pools (None: a device type has no price)."""
        p, d = self.prefill.price_per_hour, self.decode.price_per_hour
        return None if p is None or d is None else self.x * p + self.y * d

    def row(self) -> dict:
        return dict(prefill_layout=self.prefill.layout, prefill_devices=self.prefill.devices,
                    decode_layout=self.decode.layout, decode_devices=self.decode.devices, x=self.x, y=self.y,
                    devices=self.devices, power_w=self.power_w, price_per_hour=self.price_per_hour,
                    rate=self.rate, ttft_ms=self.ttft_us / 1e3, tpot_ms=self.tpot_us / 1e3,
                    load_per_decode_replica=self.load)


@dataclass
class DisaggPlan:
    """The chosen candidate (None: no pair meets the targets), every candidate, the shapes tried,
    the link and bytes of the transfer, and what was asked."""

    chosen: DisaggCandidate | None
    candidates: list[DisaggCandidate]
    prefill_shapes: list[PrefillShape]
    decode_shapes: list[DecodeShape]
    link: PoolLink
    transfer_bytes: int
    prompt_tokens: int
    decode_tokens: int
    max_ttft_ms: float
    tpot_ms: float
    rate: float | None
    concurrency: int | None
    prefill_fleet: Fleet
    decode_fleet: Fleet
    same_fleet: bool
    budget_tokens: int
    message: str = ""
    prefill_sim: object = None
    decode_solved: Solved | None = None        # the decode replica on devices apart from the prefill replica
    mapping: dict | None = field(default=None, repr=False)

    @property
    def feasible(self) -> bool:
        return self.chosen is not None

    @property
    def price_per_hour(self) -> float | None:
        """US dollars per hour of both pools (:func:`placer.planning.disagg_price.plan_price`)."""
        from placer.planning.disagg_price import plan_price

        return plan_price(self)

    @property
    def usd_per_million_tokens(self) -> float | None:
        """US dollars per million output tokens (:func:`placer.planning.disagg_price.plan_usd_per_million_tokens`)."""
        from placer.planning.disagg_price import plan_usd_per_million_tokens

        return plan_usd_per_million_tokens(self)

    @property
    def proven(self) -> bool:
        c = self.chosen
        return bool(c) and c.prefill.solved.result.proven_optimal and (self.decode_solved or
                                                                       c.decode.solved).result.proven_optimal

    def to_dict(self) -> dict:
        c = self.chosen
        ps = self.prefill_sim
        return dict(feasible=self.feasible, message=self.message, prompt_tokens=self.prompt_tokens,
                    decode_tokens=self.decode_tokens, max_ttft_ms=self.max_ttft_ms, tpot_ms=self.tpot_ms,
                    rate=self.rate, concurrency=self.concurrency, budget_tokens=self.budget_tokens,
                    transfer=dict(bytes=self.transfer_bytes, latency_us=self.link.latency_us,
                                  bandwidth_bytes_per_s=self.link.bandwidth, link=self.link.source,
                                  time_us=self.link.time_us(self.transfer_bytes)),
                    chosen=None if c is None else {**c.row(), "prefill_us": c.prefill.prefill_us,
                                                   "prefill_interval_us": c.prefill.interval_us,
                                                   "prefill_in_flight": c.prefill.in_flight,
                                                   "queue_us": c.queue_us, "transfer_us": c.transfer_us,
                                                   "decode_held": c.decode.held,
                                                   "price_per_hour": self.price_per_hour,
                                                   "usd_per_million_tokens": self.usd_per_million_tokens,
                                                   "simulated_prefill_ttft_p50_ms": None if ps is None or
                                                   ps.ttft_p50_us is None else ps.ttft_p50_us / 1e3},
                    proven=self.proven, candidates=[x.row() for x in self.candidates])


def _candidate(p: PrefillShape, d: DecodeShape, rate: float | None, concurrency: int | None, osl: int,
               ttft_us: float, transfer_us: float, output_tokens: int) -> DisaggCandidate | None:
    """The fewest replicas of ``p`` and ``d`` meeting the targets at ``rate`` (or ``concurrency``)."""
    if rate is not None:
        live = rate * osl * d.tpot_us / 1e6
        y = max(1, math.ceil(live / d.held - 1e-9))
        load, tpot, sim = min(d.held, math.ceil(live / y - 1e-9)) or 1, d.tpot_us, d.sim
    else:
        y = -(-concurrency // d.held)
        load = -(-concurrency // y)
        sim = d.sim if load == d.held else _decode_sim(d, load, output_tokens)
        tpot = 1e6 / sim.per_user_tokens_per_s
        live = concurrency
        rate = concurrency / (osl * tpot / 1e6)
    x = prefill_replicas_for(rate, p.interval_us, ttft_us - p.prefill_us - transfer_us)
    if x is None:
        return None
    return DisaggCandidate(p, d, x, y, rate, live, load, tpot, queue_wait_us(rate, p.interval_us, x), transfer_us,
                           sim)


def _settle_load(c: DisaggCandidate, osl: int, output_tokens: int, rounds: int = 4) -> None:
    """At a rate, the decode replicas were counted with the TPOT at the held load (an upper bound);
    the live requests they then carry give a faster TPOT, so fewer live requests: iterate
    ``load = ceil(R x OSL x TPOT(load) / y)`` down to its fixed point (a few decode-only runs) for
    the figures the plan reports."""
    for _ in range(rounds):
        sim = _decode_sim(c.decode, c.load, output_tokens)
        if not sim.per_user_tokens_per_s:
            return
        c.tpot_us, c.decode_sim = 1e6 / sim.per_user_tokens_per_s, sim
        c.live_decode = c.rate * osl * c.tpot_us / 1e6
        nxt = max(1, math.ceil(c.live_decode / c.y - 1e-9))
        if nxt >= c.load:
            return
        c.load = nxt


def _decode_sim(d: DecodeShape, load: int, output_tokens: int):
    from placer.planning.speed import _simulate

    return _simulate(d.solved.instance, d.solved.per_group.assignment, load, output_tokens, decode_only=True)


def plan_disagg(model: LayerGraph, fleet: Fleet, workload: Workload, req: Requirements, solver: SolverSettings, *,
                log=None) -> DisaggPlan:
    """The disaggregated plan the requirements ask for (see the module docstring): ``req.pools.rate``
    requests/s (or ``workload.concurrency`` live decode requests), TTFT at most
    ``req.targets.max_ttft_ms``, TPOT at most ``1 / req.targets.speed_floor``, fewest devices
    (``speed_objective`` ``mw``: least power)."""
    from placer.simulate.des import DEFAULT_MAX_NUM_BATCHED_TOKENS

    say = log or (lambda _m: None)
    pools, targets = req.pools or Pools(), req.targets
    isl = pools.prompt_tokens if pools.prompt_tokens is not None else workload.context_tokens
    osl = pools.decode_tokens
    budget = pools.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
    floor = targets.speed_floor
    rate = pools.rate
    concurrency = None if rate is not None else workload.concurrency
    if rate is None and not concurrency and not pools.maximize_rate:
        raise InvalidSpec(ARGUMENT, "rate", "a disaggregated plan needs a request rate or a concurrency of at least 1")
    pf, df, same = prefill_fleet_of(fleet, pools.prefill_fleet)
    link = pool_link(pf, df, same)
    # the drafter's KV and state move with the target's (its nodes are placed in both pools)
    nbytes = prompt_transfer_bytes(speculative_model(model, req)[0], workload, isl)
    transfer_us = link.time_us(nbytes)
    ttft_us = targets.max_ttft_ms * 1e3
    pre = prefill_shapes(model, pf, workload, req, solver, isl, budget, say)
    if pools.maximize_rate:
        top = len(df.available) * 4096      # every target until the fleet's memory stops the placement
    else:
        live_guess = concurrency if concurrency is not None else math.ceil(rate * osl / floor)
        top = max(1, min(4 * live_guess, len(df.available) * 4096))
    dec = decode_shapes(model, df, workload, req, solver, isl + osl, floor, top, say)
    if pools.maximize_rate:
        rate = most_rate(pre, dec, pf, df, osl, ttft_us, transfer_us)
        concurrency = None
    cands = []
    for p in pre:
        for d in dec:
            if rate is None and concurrency is None:
                continue
            c = _candidate(p, d, rate, concurrency, osl, ttft_us, transfer_us, targets.output_tokens)
            if c is None:
                continue
            if fits_pair(pf, df, p, c.x, d, c.y):
                cands.append(c)
    from placer.planning.disagg_price import candidate_key

    key = candidate_key(targets.speed_objective, pre, dec)
    if cands:
        chosen, sim, note = choose_confirmed(cands, key, budget, ttft_us,
                                             lambda c, x: fits_pair(pf, df, c.prefill, x, c.decode, c.y))
    else:
        chosen, sim, note = None, None, ""
    plan = DisaggPlan(chosen, cands, pre, dec, link, nbytes, isl, osl, targets.max_ttft_ms, 1e3 / floor, rate,
                      concurrency, pf, df, same, budget)
    if chosen is not None and rate is not None:
        _settle_load(chosen, osl, targets.output_tokens)
    plan.prefill_sim = sim
    plan.message = _message(plan, transfer_us, ttft_us) + note
    if chosen is not None:
        plan.decode_solved = _decode_apart(model, df, workload, req, solver, chosen, pf is df, isl + osl)
        from placer.mapping.pools import build_pooled_mapping

        plan.mapping = build_pooled_mapping(plan)
    return plan


def _decode_apart(model, fleet, workload, req, solver, c: DisaggCandidate, shared: bool, context: int) -> Solved:
    """The decode replica's placement on devices the prefill replica does not use (re-placed by the
    same machinery, at the same layout and target, when the two overlap on one fleet)."""
    d = c.decode.solved
    if not shared:
        return d
    p_used, d_used = _devices_used(c.prefill.solved), _devices_used(d)     # fleet devices, not group ids
    if p_used.isdisjoint(d_used):
        return d
    inst = d.instance
    rebuilt = build_instance(model, fleet.without(p_used), workload.replace(context_tokens=context), req,
                             tp=inst.tp, ep=inst.ep, concurrency=c.decode.target, attention_dp=inst.attention_dp)
    again = place_instance(rebuilt, solver, objective=_level(req), reports=False, keep_interrupted=False)
    return again if again.result.feasible else d


def _devices_used(solved: Solved) -> set[str]:
    """Ids of the fleet devices a placement uses (every member of each device group)."""
    inst = solved.instance
    return {m for d in set(solved.per_group.assignment) for m in inst.members(d)}


def _message(plan: DisaggPlan, transfer_us: float, ttft_us: float) -> str:
    c = plan.chosen
    if c is not None:
        return (f"{c.x} prefill x {c.prefill.devices} devices ({c.prefill.layout}) + {c.y} decode x "
                f"{c.decode.devices} devices ({c.decode.layout}) = {c.devices} devices serve {c.rate:,.2f} requests/s: "
                f"TTFT {c.ttft_us / 1e3:,.1f} ms (queue {c.queue_us / 1e3:,.1f} + prefill "
                f"{c.prefill.prefill_us / 1e3:,.1f} + transfer {c.transfer_us / 1e3:,.2f}), TPOT {c.tpot_us / 1e3:,.2f} ms")
    if not plan.prefill_shapes:
        return "no prefill placement of the model fits the prefill fleet"
    if not plan.decode_shapes:
        return f"no decode placement meets the TPOT of {plan.tpot_ms:,.2f} ms even with one request"
    fastest = min(p.prefill_us for p in plan.prefill_shapes)
    if fastest + transfer_us > ttft_us:
        return (f"the TTFT of {plan.max_ttft_ms:,.0f} ms cannot be met: the fastest prefill takes "
                f"{fastest / 1e3:,.1f} ms and the KV transfer {transfer_us / 1e3:,.2f} ms")
    return "the targets are met by some pools, but not at this rate within the fleet"
