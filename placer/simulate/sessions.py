"""Sessions on a placement: turns that arrive, think, grow, park their KV in a tier and reload it.

:class:`SessionSimulation` drives the discrete-event engine of :mod:`placer.simulate.des` (its
steps, chunked prefill, decode and cost model) with session traffic
(:mod:`placer.simulate.session_traffic`) in place of independent requests:

* Each turn of a session is one request: its prompt is the session's whole context so far plus the
  turn's new input. Its TTFT runs from the moment the turn is issued (the end of the think time).
* **On the chip** (the prefix cache between turns): when a turn ends, the session's KV stays in
  the KV reserve, idle. An admission that does not fit evicts idle sessions, least recently used
  first, whole sessions at a time. A turn whose session is still on the chip prefills only its new
  tokens.
* **In the tier** (``tier``: ``host``, ``nvme`` or ``remote``, :mod:`placer.specs.tiers`),
  written through as SGLang's HiCache does by default (``write_through``): at the end of every turn the tokens the
  turn added are copied to the tier (bytes parked), so an eviction moves nothing. A turn whose
  session was evicted but has its copy in the tier reloads the KV of its context (bytes
  reloaded: only what the prefix cache no longer holds), priced per device at the tier's
  bandwidth and latency (:meth:`Tier.transfer_us`), the devices of a route in parallel, each
  device's link to its tier one reload at a time one way and one write at a time the other (a
  tier's bandwidth is one direction's; PCIe and NVLink-C2C are full duplex); the turn
  waits for the reload after admission, so it is charged to that turn's TTFT. A tier that is full
  drops its least recently used idle sessions' copies.
* Without a tier (or a copy dropped), an evicted session's next turn prefills its whole context again
  (tokens recomputed).

It reports, over the whole run: the sessions held (peak and time-mean live sessions), per-turn
TTFT p50/p99, tokens/s per user while generating, tier traffic, the tier bytes a device needed at
most, and tokens/s per MW at the fleet's power boundary with the tier's power added per device.

Assumptions stated with the figures: a reload does not slow the chip's steps (DMA beside compute);
a parked session's room is free at once (its copy is already in the tier); idle sessions leave the
chip whole (no partial, block-level eviction); a session's KV bytes per device are those of
:class:`~placer.simulate.requests.Reserve` (KV and per-request state).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from placer.problem.instance import Instance
from placer.simulate.arguments import RunSettings, Serving, Traffic
from placer.simulate.cost import cached_tokens
from placer.simulate.des import Simulation
from placer.simulate.prefill import step_time_us
from placer.simulate.requests import Request
from placer.simulate.result import Interval, SimResult
from placer.simulate.session_traffic import Sessions
from placer.specs.errors import ARGUMENT, InfeasiblePlacement, InvalidSpec
from placer.specs.tiers import Tier, tier_of

__all__ = ["SessionSimulation", "SessionResult", "simulate_sessions", "simulate_sessions_mapping", "route_tiers",
           "tier_power_w"]


@dataclass
class Turn(Request):
    session: int = 0
    reload: dict | None = None            # device -> bytes to reload before the turn may run
    reload_us: float = 0.0
    reused: int = 0                       # prompt tokens whose KV was in place (on the chip or reloaded)


@dataclass(frozen=True)
class SessionResult:
    """What a session run reports (:class:`SessionSimulation`); ``sim``: the engine's own figures
    (per-turn TTFT, per-user speed, power without the tier)."""

    sim: SimResult
    sessions: Sessions
    tier: str | None
    sessions_started: int
    sessions_ended: int
    sessions_held_peak: int
    sessions_held_mean: float
    turns: int
    turns_from_chip: int           # the session's KV still on the chip
    turns_reloaded: int            # reloaded from the tier
    turns_recomputed: int          # prefix lost: the whole context prefilled again
    bytes_parked: float            # written to the tier, all devices
    bytes_reloaded: float
    reload_us_mean: float | None
    tier_peak_bytes: float         # the most tier bytes one device held
    power_w: float | None          # the fleet's, the tier's added
    tokens_per_s_per_mw: float | None
    tier_text: str | None = None
    assumptions: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("sim", "sessions")}
        out["assumptions"] = list(self.assumptions)
        out["traffic"] = self.sessions.describe()
        sim = self.sim
        out.update(ttft_p50_us=sim.ttft_p50_us, ttft_p99_us=sim.ttft_p99_us, itl_p50_us=sim.itl_p50_us,
                   per_user_tokens_per_s=sim.per_user_tokens_per_s, aggregate_tokens_per_s=sim.aggregate_tokens_per_s,
                   power_boundary=sim.power_boundary, window_us=sim.window_us)
        return out


ASSUMPTIONS = ("a reload does not slow the chip's steps (DMA beside compute)",
               "the tier is written through: each turn's new KV is copied at the turn's end",
               "idle sessions leave the chip whole, least recently used first",
               "steps keep their order along the route (each device serves them as they entered)",
               "figures over the whole run, start-up included")


def route_tiers(instance: Instance, devices: Sequence[int], name: str) -> dict[int, Tier]:
    """The tier ``name`` of every device of a route, as one device (rank) of its stage's group sees
    it: a session's bytes on a device (:class:`~placer.simulate.requests.Reserve`) are one rank's,
    and every rank parks and reloads its own share over its own link, the group's ranks in
    parallel (their powers add up: :func:`tier_power_w`); an :class:`InvalidSpec` when a device has none."""
    out = {}
    for d in devices:
        t = tier_of(instance.devices[d].type, name)
        if t is None:
            have = [x.name for x in getattr(instance.devices[d].type, "tiers", ())]
            raise InvalidSpec(ARGUMENT, "tier", f"device type {instance.devices[d].type.name!r} has no {name!r} tier "
                                                f"(its hardware spec lists {', '.join(have) or 'none'})")
        out[d] = t
    return out


def tier_power_w(instance: Instance, tiers: dict[int, Tier]) -> float:
    """Watts the tiers of a route add: each device's (rank's) share, for every rank of its group."""
    return sum(t.power_w * len(instance.members(d)) for d, t in tiers.items())


class SessionSimulation(Simulation):
    """A :class:`~placer.simulate.des.Simulation` whose requests are the turns of ``sessions``, with
    idle sessions' KV kept on the chip, parked in ``tier`` (a tier name) or dropped (module docstring)."""

    def __init__(self, instance: Instance, assignment: Sequence[int], sessions: Sessions, tier: str | None = None,
                 serving: Serving = Serving(), run: RunSettings = RunSettings()):
        # the engine sized for one-token requests: the batch limit is the runtime's, the KV reserve admits
        super().__init__(instance, assignment, Traffic(prompt_tokens=1, output_tokens=1, requests=1, arrival_rate=1.0),
                         serving, run)
        self.sessions = sessions
        self.end_us = sessions.duration_s * 1e6 if sessions.duration_s is not None else None
        self.requests = 10**9
        self.tier_name = tier
        self.tiers = route_tiers(instance, self.reserve.devices, tier) if tier else {}
        self.traffic = Traffic(sessions=sessions)
        self.limit_tokens = instance.workload.context_tokens
        self.turn_rng = np.random.default_rng([run.seed, 7919])
        self.resident: OrderedDict[int, int] = OrderedDict()    # idle sessions on the chip: tokens
        self.copy: OrderedDict[int, int] = OrderedDict()        # sessions with a tier copy: tokens
        self.tier_used = dict.fromkeys(self.tiers, 0.0)
        self.link_free = dict.fromkeys(self.tiers, 0.0)      # reloads, tier to chip
        self.write_free = dict.fromkeys(self.tiers, 0.0)     # writes, chip to tier
        self.written: dict[int, float] = {}                   # when each session's last write is in the tier
        self.context: dict[int, int] = {}
        self.done_ev: dict[int, object] = {}
        self.count = dict(started=0, ended=0, chip=0, reloaded=0, recomputed=0)
        self.alive = self.alive_peak = 0
        self.alive_area = self.alive_since = 0.0
        self.bytes = dict(parked=0.0, reloaded=0.0, peak=0.0)
        self.reload_times: list[float] = []
        self.next_id = 0
        self.sessions_due = sessions.started
        self._twin_cache = None
        self._step_memo: dict = {}
        self._hop_memo: dict = {}

    # ------------------------------------------------------------------ sessions
    def _arrivals(self):
        s = self.sessions
        n = s.started
        if s.count is not None:         # a closed loop: the first sessions start within one think time
            spread = (s.shape.think_s if s.shape is not None else 1.0) * 1e6
            self.next_id = min(s.count, n)
            for i in range(self.next_id):
                self.env.process(self._session(i, float(self.turn_rng.uniform(0, spread))))
            return
        t = 0.0
        for i in range(n):
            if s.rate is not None:
                t += self.turn_rng.exponential(1e6 / s.rate)
            else:
                t = s.trace.sessions[i % len(s.trace.sessions)][0] * 1e6
            if self.end_us is not None and t > self.end_us:
                self.sessions_due = i
                break
            self.env.process(self._session(i, t))
        yield self.env.timeout(0)

    def _turns(self, i: int):
        s = self.sessions
        if s.shape is not None:
            return s.shape.turns_of(self.turn_rng, self.limit_tokens)
        turns = s.trace.sessions[i % len(s.trace.sessions)][1]
        return tuple(t for t in turns if t.prompt + t.output <= self.limit_tokens)

    def _alive(self, delta: int) -> None:
        now = self.env.now
        self.alive_area += self.alive * (now - self.alive_since)
        self.alive_since = now
        self.alive += delta
        self.alive_peak = max(self.alive_peak, self.alive)

    def _session(self, sid: int, delay_us: float):
        yield self.env.timeout(max(0.0, delay_us))
        turns = self._turns(sid)
        self.count["started"] += 1
        self._alive(+1)
        for k, turn in enumerate(turns):
            if k:
                yield self.env.timeout(turn.think_s * 1e6)
            ev = self._turn(sid, turn)
            yield ev
        self._end(sid)
        s = self.sessions
        if s.count is not None and self.next_id < s.started:     # an ended session is replaced at once
            self.env.process(self._session(self.next_id, 0.0))
            self.next_id += 1
        if self.count["ended"] >= self.sessions_due:
            self.arrivals_over = True
            self._check_all_done()

    def _end(self, sid: int) -> None:
        tokens = self.resident.pop(sid, None)
        if tokens is not None:
            self.reserve.take(tokens, -1)
        self._drop_copy(sid)
        self.written.pop(sid, None)
        self.context.pop(sid, None)
        self.count["ended"] += 1
        self._alive(-1)

    def _drop_copy(self, sid: int) -> None:
        tokens = self.copy.pop(sid, None)
        if tokens is not None:
            for d in self.tiers:
                self.tier_used[d] -= self.reserve.need(d, tokens)

    def _turn(self, sid: int, spec):
        """Issue one turn of session ``sid`` now; the event its request's end triggers."""
        prev = self.context.get(sid, 0)
        reused = min(prev, spec.prompt - 1)
        reload = None
        if sid in self.resident:                        # still on the chip: its prefix is in place
            self.reserve.take(self.resident.pop(sid), -1)
            self.count["chip"] += prev > 0
        elif prev and sid in self.copy:                 # parked: reload what the chip no longer holds
            reload = {d: float(self.reserve.need(d, reused)) for d in self.tiers}
            self.copy.move_to_end(sid)
            self.count["reloaded"] += 1
        elif prev:
            reused = 0
            self.count["recomputed"] += 1
        r = Turn(id=len(self.reqs), arrival=self.env.now, context=spec.prompt + spec.output, output=spec.output,
                 prompt=spec.prompt, user=sid, session=sid, reload=reload)
        r.prefilled = r.reused = reused
        self.reqs.append(r)
        self.waiting.append(r)
        ev = self.done_ev[r.id] = self.env.event()
        self._admit()
        return ev

    # ------------------------------------------------------------------ the engine's hooks
    def _admit(self) -> None:
        while True:
            while self.waiting and self.resident and not self.reserve.fits(self.waiting[0].context):
                self._evict(next(iter(self.resident)))
            n = len(self.waiting)
            super()._admit()
            if not self.waiting or len(self.waiting) == n or not self.resident:
                break
        for queue in (self.prefilling, self.ready):
            for r in [r for r in queue if getattr(r, "reload", None)]:
                queue.remove(r)
                self.env.process(self._reload(r, queue))

    def _evict(self, sid: int) -> None:
        self.reserve.take(self.resident.pop(sid), -1)

    def _reload(self, r: Turn, queue):
        """Bring ``r``'s context back from the tier (each device's link in turn, once the session's last
        write is in the tier), then let it run."""
        now, end = self.env.now, self.env.now
        written = self.written.get(r.session, 0.0)
        for d, nbytes in r.reload.items():
            t = self.tiers[d]
            begin = max(now, self.link_free[d], written)
            self.link_free[d] = begin + (nbytes / t.bandwidth * 1e6 if nbytes else 0.0)
            end = max(end, self.link_free[d] + (t.latency_us if nbytes else 0.0))
            self.bytes["reloaded"] += nbytes
        r.reload, r.reload_us = None, end - now
        self.reload_times.append(end - now)
        yield self.env.timeout(end - now)
        queue.append(r)
        self._wake()

    def _write(self, sid: int, tokens: int) -> None:
        """Write-through: the tokens the session gained since its last copy go to the tier."""
        before = self.copy.pop(sid, None)
        add = {d: self.reserve.need(d, tokens) - (self.reserve.need(d, before) if before else 0) for d in self.tiers}
        while any(self.tier_used[d] + add[d] > t.capacity_bytes for d, t in self.tiers.items()):
            idle = next((s for s in self.copy), None)
            if idle is None:                # the tier holds nothing else: the session stays uncopied
                if before is not None:
                    for d in self.tiers:
                        self.tier_used[d] -= self.reserve.need(d, before)
                return
            self._drop_copy(idle)
        for d, t in self.tiers.items():
            self.tier_used[d] += add[d]
            self.write_free[d] = max(self.env.now, self.write_free[d]) + add[d] / t.bandwidth * 1e6
            self.written[sid] = max(self.written.get(sid, 0.0), self.write_free[d] + (t.latency_us if add[d] else 0.0))
            self.bytes["parked"] += add[d]
            self.bytes["peak"] = max(self.bytes["peak"], self.tier_used[d])
        self.copy[sid] = tokens

    def _finish(self, r: Request) -> None:
        super()._finish(r)
        sid, tokens = r.user, r.context
        self.context[sid] = tokens
        self.reserve.take(tokens)                       # stays on the chip, idle, until evicted
        self.resident[sid] = tokens
        if self.tiers:
            self._write(sid, tokens)
        self.done_ev.pop(r.id).succeed()

    # ------------------------------------------------------------------ the step's walk, booked at once
    def _walk(self, slot: int, decodes, chunks):
        """The engine's walk of one step along the route, booked when the step enters it: each device
        from max(the step's arrival, when the device frees up), one event for the whole walk. Steps keep
        their order along the route (a pipeline runtime's batches leave every stage in the order they
        entered it), which is the engine's per-device first-come order whenever no step overtakes the
        one ahead between two devices. A step's time on a segment is computed once per distinct
        segment (:meth:`_twins`) and kept for the next step of the same batch, contexts and chunks
        (sessions of one shape run through the same steps)."""
        if self.spec_k or self.draft_segs:
            yield from super()._walk(slot, decodes, chunks)
            return
        env, b = self.env, len(decodes)
        parts = tuple(ch for _, ch in chunks)
        n = sum(ch.tokens for ch in parts)
        kinds, devices, stages = self._twins
        cached = cached_tokens([r.kv_len for r in decodes], self.windows)
        key = (b, tuple(sorted(cached.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))), parts)
        dts = self._step_memo.get(key)
        if dts is None:
            times = [step_time_us(s, b, cached, parts) for s in kinds[0]]
            dts = self._step_memo[key] = [times[j] for j in kinds[1]]
            if len(self._step_memo) > 200_000:
                self._step_memo.clear()
        hops = self._hop_memo.get(b + n)
        if hops is None:
            hops = self._hop_memo[b + n] = [s.hop_time_us(b + n) for s in self.target_segs]
        free, busy, trace = self.free_at, self.busy, self.trace
        t = env.now
        for dev, stage, dt, hop in zip(devices, stages, dts, hops):
            begin = free[dev] if free[dev] > t else t
            free[dev] = begin + dt
            busy[stage] += dt
            if trace is not None:
                trace.append(Interval(stage, begin, begin + dt, slot, n > 0, b, n))
            t = begin + dt + hop
        if b:
            k = len(devices)
            st = self.steps
            st[0] += k
            st[1] += b * k
            st[2] = max(st[2], b)
            st[3] += k if n > 0 else 0
        yield env.timeout(t - env.now)

    @property
    def _twins(self):
        """(the route's distinct segments and each segment's index among them, devices, stages):
        segments alike but for their names, places and hops (equal cost-model inputs) step alike."""
        if self._twin_cache is None:
            sig: dict = {}
            idx = []
            for s in self.target_segs:
                k = replace(s, index=0, device=0, device_id="", stage=0, nodes=(), hop_us=0.0,
                            hop_bytes_per_us=float("inf"), out_activation_bytes=0,
                            costs=tuple(replace(c, name="") for c in s.costs))
                idx.append(sig.setdefault(k, len(sig)))
            reps = [None] * len(sig)
            for s, j in zip(self.target_segs, idx):
                reps[j] = reps[j] or s
            self._twin_cache = ((reps, idx), [s.device for s in self.target_segs],
                                [s.stage for s in self.target_segs])
        return self._twin_cache

    # ------------------------------------------------------------------ the result
    def result(self) -> SessionResult:
        sim = self.run()
        self._alive(0)
        run = self._run_end() or 1.0
        fleet = self.instance.fleet
        extra = tier_power_w(self.instance, self.tiers)
        if getattr(fleet, "power_boundary", None) == "facility":
            extra *= fleet.pue if fleet.pue is not None else 1.56
        power = sim.power_w + extra if sim.power_w is not None else None
        agg = sim.aggregate_tokens_per_s
        t = next(iter(self.tiers.values()), None)
        c = self.count
        return SessionResult(
            sim=sim, sessions=self.sessions, tier=self.tier_name, sessions_started=c["started"],
            sessions_ended=c["ended"], sessions_held_peak=self.alive_peak, sessions_held_mean=self.alive_area / run,
            turns=len(self.reqs), turns_from_chip=c["chip"], turns_reloaded=c["reloaded"],
            turns_recomputed=c["recomputed"], bytes_parked=self.bytes["parked"], bytes_reloaded=self.bytes["reloaded"],
            reload_us_mean=float(np.mean(self.reload_times)) if self.reload_times else None,
            tier_peak_bytes=self.bytes["peak"], power_w=power,
            tokens_per_s_per_mw=agg / (power / 1e6) if power and agg else None,
            tier_text=t.describe() if t is not None else None, assumptions=ASSUMPTIONS)


def simulate_sessions(instance: Instance, assignment: Sequence[int], sessions: Sessions, tier: str | None = None,
                      serving: Serving = Serving(), run: RunSettings = RunSettings()) -> SessionResult:
    """Run ``sessions`` on ``instance`` placed by ``assignment``, idle KV parked in ``tier`` (or none)."""
    sim = SessionSimulation(instance, assignment, sessions, tier, serving, run)
    if sim.reserve.ceiling(2) == 0:
        raise InfeasiblePlacement("no KV room on the placement's devices", max_concurrency=0)
    return sim.result()


def simulate_sessions_mapping(doc, sessions: Sessions, tier: str | None = None, *, model=None, hardware=None,
                              power: str | None = None, pue: float | None = None,
                              serving: Serving = Serving(), run: RunSettings = RunSettings()) -> SessionResult:
    """:func:`simulate_sessions` for a one-pool stage mapping (``placer simulate MAPPING --sessions``);
    ``power`` and ``pue``: the boundary the power figures are counted at (default the fleet's)."""
    from placer.mapping import instance_from_mapping, specs_from_mapping
    from placer.mapping.view import MappingView, mapping_view

    view = mapping_view(doc)
    if not isinstance(view, MappingView):
        raise InvalidSpec("<mapping>", "/pools", "a two-pool mapping: sessions run on one-pool mappings")
    if power is not None or pue is not None:
        m, fleet, _wl = specs_from_mapping(view.doc, model=model, hardware=hardware)
        model, hardware = m, fleet.with_power(power or fleet.power_boundary, pue)
    _m, _f, _wl, inst = instance_from_mapping(view.doc, model=model, hardware=hardware)
    index = inst.device_index
    unknown = [d for d in view.route if d not in index]
    if unknown or len(view.route) != inst.n_nodes:
        raise InvalidSpec("<mapping>", "route", f"expected {inst.n_nodes} known devices, one per node")
    return simulate_sessions(inst, [index[d] for d in view.route], sessions, tier, serving, run)
