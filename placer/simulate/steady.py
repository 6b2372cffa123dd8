"""The simulator's fast path: the event run's continuous schedule without its per-visit machinery.

:mod:`placer.simulate.des` runs serving as simpy processes: every step is a process that yields
at each segment of the route and prices its visit there as it arrives; most of its time goes to
those events and prices. This module runs the same schedule, with the same semantics, on a plain
heap of events (``method`` ``"steady"`` in the result, :class:`SimResult` as the event run's):

* a step is priced once, when it is formed, for the whole route: per segment
  :func:`placer.simulate.prefill.step_time_us` (the verify and draft passes of speculative decoding
  as :meth:`Simulation._walk` prices them) and :meth:`~placer.simulate.cost.Segment.hop_time_us`,
  the functions the event run calls, so a change to the cost model reaches both paths. Prices are
  kept by what they depend on (the decodes' count and KV per window, the chunks), and steps that
  differ only in their decodes' total KV are priced from a line once three exact prices have been
  seen to lie on it (to 1e-9; a family off its line is priced exactly, call by call);
* the step books each device first come first served at its arrival there (the event run's
  visits, in time order), and walks on without an event while nothing else comes first;
* the entry's scheduler (a step of ``min(batch cap, ceil(live / stages))`` decodes, then prompt
  chunks within the token budget and seats, at most one step per stage in flight, woken after
  what else happens at the same instant), admission under the live cap, the closed loop's
  reissues, Poisson arrivals drawn from the run's seed and the measured window are the event run's;
* a closed loop stops once its window is over and every request has its first token: the figures
  measured over the window are the event run's, while ``stage_utilization``, ``bubble_fraction``,
  ``live_requests_mean`` and ``requests_completed`` cover the run up to there (the event run's go
  on until the last request is through).

Measured against the event run (``tests/simulate/test_steady.py`` asserts the battery of
``benchmarks/bench_steady.py`` within :data:`STATED_ERROR`): per-user tokens/s, aggregate tokens/s
(so tokens/s per MW: power is counted alike) and mean TTFT agree to 0.0 % on all 24 cases, and on
all 317 points of ``benchmarks/bench_frontier.py``; the stated bound leaves room for a run whose
steps meet at a device within float rounding of each other, which the line's prices can reorder.
The micro-batch schedule and context distributions are not modelled (:class:`Unsupported`;
:func:`simulate_with` runs the event path there). The result adds the mean TTFT (``ttft_mean_us``).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from placer.simulate import error_band
from placer.simulate.arguments import RunSettings, Serving, Traffic, split_options
from placer.simulate.cost import cached_tokens
from placer.simulate.des import Simulation
from placer.simulate.prefill import Chunk, step_time_us
from placer.simulate.result import SimResult, token_stats
from placer.specs.errors import ARGUMENT, InvalidSpec

__all__ = ["STATED_ERROR", "SIMS", "Unsupported", "check_sim", "simulate_with", "steady", "steady_group", "unsupported"]

SIMS = ("fast", "exact")    # how a study simulates: the fast path where it models the run, or the event run

VISIT, DONE, ENTRY, ARRIVE = range(4)       # the fast run's events, in a heap of (time, sequence, kind, ...)

# The relative error of the fast path against the event run that tests/simulate/test_steady.py
# allows on every case of its battery (measured: 0.0 %; tokens/s per MW carries the aggregate's).
STATED_ERROR = {"per_user_tokens_per_s": 0.01, "aggregate_tokens_per_s": 0.01}


class Unsupported(ValueError):
    """The traffic or schedule is outside what the fast path models (the event run covers it)."""


def unsupported(sim: Simulation) -> str | None:
    """Why the fast path does not model ``sim``'s run (None: it does)."""
    if not sim.continuous:
        return "the micro-batch schedule"
    if sim.shapes.fixed_context is None:
        return "a distribution of lengths or a trace (requests of one shape only)"
    return None


@dataclass
class _Req:
    """A request as :func:`token_stats` reads it."""

    user: int
    arrival: float
    left: int                      # prompt tokens still to prefill
    prefilled: int                 # of the prompt, in the KV cache
    generated: int = 0
    credit: float = 0.0
    busy: bool = False             # a chunk of its prompt is in a step on its way
    first: float | None = None
    last: float | None = None
    times: list = field(default_factory=list)

    _done: bool = False

    @property
    def done(self) -> bool:
        return self._done


class _Run:
    """One run of the event simulation's schedule on a plain event heap, each step priced once for
    the whole route (the resolved settings of a :class:`Simulation` that is never run)."""

    def __init__(self, sim: Simulation):
        self.sim = sim
        # every request alike (unsupported() refuses the rest): the event run's draw of any one
        self.prompt, self.out, cached = sim.shapes.draw(np.random.default_rng(0), 0)
        self.start = self.prompt if sim.decode_only else cached
        self.k, self.accept = sim.spec_k, sim.spec_accept
        self.cap = sim.live_cap if sim.live_cap is not None else math.inf
        self.stages = [s.stage for s in sim.target_segs] + [s.stage for s in sim.draft_segs]
        self.prices: dict = {}
        self.lines: dict = {}        # (decodes, chunks) -> exact prices seen, the line, or "exact"
        self.busy = [0.0] * sim.n_stages
        self.counts = [0, 0, 0, 0]       # decode steps, their decodes, largest, with a chunk
        self.free = [0.0] * sim.n_stages
        self.heap: list = []
        self.seq = itertools.count()

    def price(self, kvs: list[int], chunks: tuple) -> tuple[list[float], list[float]]:
        """(times on the devices, hops after them), segment by segment, of a step decoding requests
        whose KV lengths are ``kvs`` and prefilling ``chunks`` ``((start, tokens), ...)``: the
        pricing of :meth:`Simulation._walk`, kept by what it depends on (the decodes' count and KV
        per window, or with speculative decoding their lengths; the chunks). A family of steps that
        differ only in their decodes' total KV (one window) is priced from a line through three of
        its exact prices once a third one lies on the line through the first two (to 1e-9): the
        cost model is affine in the KV read today, and if it stops being so the family is priced
        exactly, call by call."""
        sim, b, k = self.sim, len(kvs), self.k
        cached = cached_tokens(kvs, sim.windows)
        x = tuple(cached.values())
        key = (b, tuple(sorted(kvs)) if k else x, chunks)
        hit = self.prices.get(key)
        if hit is not None:
            return hit
        family = (b, chunks) if b and not k and len(x) == 1 else None
        line = self.lines.get(family) if family is not None else None
        if isinstance(line, tuple):
            x0, d0, slope, hops = line
            return [d + g * (x[0] - x0) for d, g in zip(d0, slope)], hops
        parts = tuple(Chunk(s, n) for s, n in chunks)
        n = sum(t for _, t in chunks)
        out = []
        if k and b:
            verify = tuple(Chunk(kv, k + 1) for kv in kvs)
            zero = dict.fromkeys(cached, 0.0)
        for s in sim.target_segs:
            dt = step_time_us(s, 0, zero, verify + parts) if k and b else step_time_us(s, b, cached, parts)
            out.append((dt, s.hop_time_us(b * (k + 1) + n)))
        out += [(k * s.duration_us(s.terms_for(b, cached)), 0.0) for s in (sim.draft_segs if b else ())]
        legs = self.prices[key] = [d for d, _ in out], [h for _, h in out]
        if family is not None and line != "exact":
            self._learn(family, x[0], legs)
        return legs

    def _learn(self, family: tuple, x: float, legs: tuple[list[float], list[float]]) -> None:
        """Keep an exact price of ``family`` at total KV ``x``; at the third, the line through the
        first two if the third lies on it, else price the family exactly from then on."""
        seen = self.lines.setdefault(family, [])
        seen.append((x, legs[0]))
        if len(seen) < 3:
            return
        (x0, d0), (x1, d1), (x2, d2) = seen
        if x1 == x0:
            del seen[1]
            return
        slope = [(b - a) / (x1 - x0) for a, b in zip(d0, d1)]
        on_line = all(abs(a + g * (x2 - x0) - c) <= 1e-9 * max(1.0, abs(c)) for a, g, c in zip(d0, slope, d2))
        self.lines[family] = (x0, d0, slope, legs[1]) if on_line else "exact"

    def push(self, t: float, kind: int, x=None, i: int = 0) -> None:
        """An event at ``t``: a step's visit (``VISIT``, the step and its segment), a step through
        (``DONE``), the entry's scheduler (``ENTRY``) or an arrival (``ARRIVE``, its index)."""
        heapq.heappush(self.heap, (t, next(self.seq), kind, x, i))

    # ------------------------------------------------------------------ requests
    def issue(self, user: int, now: float) -> None:
        r = _Req(user=user, arrival=now, left=self.prompt - self.start, prefilled=self.start)
        self.reqs.append(r)
        self.waiting.append(r)
        if len(self.reqs) >= self.sim.requests:
            self.arrivals_over = True
            if self.t_stop is None:
                self.t_stop = now

    def set_live(self, now: float, delta: int) -> None:
        self.area += self.live * (now - self.last_change)
        self.last_change = now
        self.live += delta
        self.peak = max(self.peak, self.live)

    def admit(self, now: float) -> None:
        while self.waiting and self.live < self.cap:
            r = self.waiting.popleft()
            self.set_live(now, +1)
            (self.prefilling if r.left else self.ready).append(r)
        self.wake(now)

    def token(self, r: _Req, t: float, n: int) -> None:
        r.generated += n
        r.times.extend([t] * n)
        if r.first is None:
            r.first = t
            self.firsts_given += 1
        r.last = t
        r._done = r.generated >= self.out

    def finish(self, r: _Req, now: float) -> None:
        self.set_live(now, -1)
        self.completed += 1
        if self.sim.closed_loop:
            self.firsts.add(r.user)
            if self.t_warm is None and len(self.firsts) == self.sim.users:
                self.t_warm = now
            if len(self.reqs) < self.sim.requests:
                self.issue(r.user, now)

    def stepped(self, step, now: float) -> None:
        """A step is through the route (:meth:`Simulation._stepped`, then :meth:`Simulation._step`)."""
        decodes, chunks = step[0], step[1]
        self.in_flight -= 1
        out = self.out
        if self.k:
            for r in decodes:
                r.credit += self.accept
                n = max(1, min(int(r.credit + 1e-9), self.k + 1, self.out - r.generated))
                r.credit -= n
                self.token(r, now, n)
        else:
            for r in decodes:           # :meth:`token` of one, inline: the commonest thing a run does
                r.generated += 1
                r.times.append(now)
                if r.first is None:
                    r.first = now
                    self.firsts_given += 1
                r.last = now
                r._done = r.generated >= out
        for r, n in chunks:
            r.busy = False
            r.left -= n
            r.prefilled += n
            if not r.left:
                self.prefilling.remove(r)
                self.token(r, now, 1)
        members = decodes + [r for r, _ in chunks if not r.left]
        done = [r for r in members if r._done]
        for r in done:
            self.finish(r, now)
        if done:
            self.admit(now)
        self.ready.extend(r for r in members if not r._done)
        self.wake(now)

    # ------------------------------------------------------------------ steps
    def take_chunks(self, budget: float, seats: float) -> list:
        out = []
        for r in self.prefilling:
            if budget <= 0 or seats <= 0:
                break
            if r.busy:
                continue
            n = int(min(r.left, budget))
            out.append((r, n))
            r.busy = True
            budget -= n
            seats -= 1
        return out

    def wake(self, now: float) -> None:
        """Wake the entry's scheduler at ``now``, after what else happens at this instant (the
        event run's ``entry_ready`` event), unless it waits already."""
        if not self.pending:
            self.pending = True
            self.push(now, ENTRY)

    def schedule(self, now: float) -> None:
        """The entry forms steps while it is free (:meth:`Simulation._scheduler`)."""
        sim = self.sim
        self.pending = False
        while True:
            if self.free[0] > now:
                self.pending = True
                self.push(self.free[0], ENTRY)
                return
            if not sim.decode_only and self.in_flight >= sim.n_stages:
                return
            share = int(min(sim.batch_cap, -(-self.live // sim.n_stages)))
            decodes = [self.ready.popleft() for _ in range(min(share, len(self.ready)))]
            chunks = self.take_chunks(sim.budget - len(decodes) * (1 + self.k), sim.batch_cap - len(decodes))
            if not decodes and not chunks:
                return
            self.in_flight += 1
            legs = self.price([r.prefilled + r.generated for r in decodes], tuple((r.prefilled, n) for r, n in chunks))
            b = len(decodes)
            if b:
                c = self.counts
                c[0] += len(sim.target_segs)
                c[1] += b * len(sim.target_segs)
                c[2] = max(c[2], b)
                c[3] += len(sim.target_segs) * bool(chunks)
            heapq.heappush(self.heap, self.walk((decodes, chunks, legs[0], legs[1]), 0, now))

    def walk(self, step, i: int, t: float) -> tuple:
        """The step arrives at its ``i``-th segment at ``t``: it books the device first come first
        served and goes on while no other event comes first (as the event run's visits, in time
        order); returns its next event (its next visit, or it is through)."""
        dts, hops, stages, heap, free, busy = step[2], step[3], self.stages, self.heap, self.free, self.busy
        last = len(dts)
        while True:
            stage, dt = stages[i], dts[i]
            begin = free[stage]
            if t > begin:
                begin = t
            free[stage] = begin + dt
            busy[stage] += dt
            t = begin + dt + hops[i]
            i += 1
            if i == last:
                return t, next(self.seq), DONE, step, 0
            if heap and heap[0][0] <= t:
                return t, next(self.seq), VISIT, step, i

    # ------------------------------------------------------------------ the run
    def run(self) -> dict:
        """Every request of the run; the times the event run's window needs."""
        sim = self.sim
        self.reqs: list[_Req] = []
        self.waiting: deque = deque()
        self.prefilling: list[_Req] = []
        self.ready: deque = deque()
        self.live = self.peak = self.completed = self.in_flight = 0
        self.area = self.last_change = 0.0
        self.firsts: set[int] = set()
        self.t_warm = self.t_stop = None
        self.arrivals_over = self.pending = False
        self.stopped = None
        self.firsts_given = 0
        arrivals: list[float] = []
        if sim.closed_loop:
            for u in range(sim.users):
                self.issue(u, 0.0)
            self.admit(0.0)
        elif sim.arrival_rate is not None:
            arrivals = self._arrivals()
            if arrivals:
                self.push(arrivals[0], ARRIVE, 0)
            else:
                self.arrivals_over = True
        else:
            for i in range(sim.requests):
                self.issue(i, 0.0)
            self.admit(0.0)
            self.arrivals_over = True
        now = self._loop(arrivals)
        self.set_live(now, 0)
        end = sim.end_us if sim.end_us is not None else self.stopped if self.stopped is not None else \
            max((r.last for r in self.reqs if r.last is not None), default=0.0)
        return dict(reqs=self.reqs, t_warm=self.t_warm, t_stop=self.t_stop, end=end, peak=self.peak, area=self.area)

    def _loop(self, arrivals: list[float]) -> float:
        """Events in time order until the run is over (or a closed loop's window is and every
        request has its first token: nothing later is measured); returns the time it ended."""
        sim, heap, pop, pushpop, walk = self.sim, self.heap, heapq.heappop, heapq.heappushpop, self.walk
        end_us = sim.end_us if sim.end_us is not None else math.inf
        horizon = end_us            # visits before it need no other check (only other events change the state)
        now = 0.0
        item = pop(heap) if heap else None
        while item is not None:
            t, _, kind, x, i = item
            if kind == VISIT and t <= horizon:
                item = pushpop(heap, walk(x, i, t))     # its next event, or whatever comes first
                continue
            if t > end_us:
                return end_us
            if t > horizon:
                self.stopped = t
                return t
            now = t
            if kind == DONE:
                self.stepped(x, t)
            elif kind == ENTRY:
                self.schedule(t)
            else:
                self.issue(x, t)
                self.admit(t)
                if x + 1 < len(arrivals):
                    self.push(arrivals[x + 1], ARRIVE, x + 1)
                else:
                    self.arrivals_over = True
            if self.arrivals_over and self.completed == len(self.reqs):
                break
            if sim.end_us is None and self.t_stop is not None and self.t_warm is not None \
                    and self.t_warm < self.t_stop and self.firsts_given == len(self.reqs):
                horizon = self.t_stop
            item = pop(heap) if heap else None
        return now

    def _arrivals(self) -> list[float]:
        """A Poisson stream's arrival times, drawn as the event run draws them (same generator)."""
        sim, out, t = self.sim, [], 0.0
        scale = 1e6 / sim.arrival_rate
        while len(out) < sim.requests:
            for gap in sim.rng.exponential(scale, size=min(4096, sim.requests - len(out))):
                t += gap
                if sim.end_us is not None and t > sim.end_us:
                    return out
                out.append(float(t))
        return out


def steady(instance, assignment, traffic: Traffic = Traffic(), serving: Serving = Serving(),
           run: RunSettings = RunSettings()) -> SimResult:
    """:func:`placer.simulate.des.simulate`'s run, a round at a time: the same arguments (checked
    and resolved by a :class:`Simulation` that is never run), the same :class:`SimResult`, its
    ``method`` ``"steady"``. :class:`Unsupported` outside the modelled schedule and traffic."""
    sim = Simulation(instance, assignment, traffic, serving, run)
    why = unsupported(sim)
    if why is not None:
        raise Unsupported(f"the fast path does not model {why}; run the event simulation")
    run_ = _Run(sim)
    return _result(sim, run_, run_.run())


def _window(sim: Simulation, state: dict) -> tuple[float, float]:
    """The event run's measured window (:meth:`Simulation._window`) over this run's times."""
    end, warm = state["end"], state["t_warm"]
    if sim.closed_loop and warm is not None:
        hi = end if sim.end_us is not None else state["t_stop"]
        if hi is not None and hi > warm:
            return warm, hi
    return 0.0, end


def _result(sim: Simulation, rounds: _Run, state: dict) -> SimResult:
    """The run's figures as the event run states them (its anchors: stage times, unloaded latency,
    pipeline bound and power, computed as :meth:`Simulation._result` does)."""
    inst, segs = sim.instance, sim.segs
    lo, hi = _window(sim, state)
    window = hi - lo
    st = token_stats(state["reqs"], lo, hi, ttft=not sim.decode_only, arrivals_from=lo)
    run_end = state["end"]
    util = [float(b) / run_end if run_end > 0 else 0.0 for b in rounds.busy]
    powers = [None if inst.devices[d].type.power_w is None else
              inst.devices[d].type.power_w * len(inst.members(d)) for d in sorted(set(sim.assignment))]
    power = float(sum(powers)) if all(p for p in powers) else None
    agg = st.tokens / window * 1e6 if window > 0 else 0.0
    c = rounds.counts
    if sim.arrival_rate is not None:
        B = max(1, c[2])
    else:
        live = min(sim.base_requests, sim.live_cap) if sim.live_cap is not None else sim.base_requests
        B = int(min(live, sim.batch_cap, -(-live // sim.n_stages)))
    mean_ctx = max(1, int(sim.shapes.mean_context) - sim.output_tokens // 2)
    stage_time = [0.0] * sim.n_stages
    stage_ids = [None] * sim.n_stages
    for s in segs:
        stage_time[s.stage] += s.time_us([mean_ctx] * B)
        stage_ids[s.stage] = s.device_id
    p50, p99 = st.percentiles(st.gaps)
    t50, t99 = st.percentiles(st.ttft)
    reqs = state["reqs"]
    return SimResult(
        per_user_tokens_per_s=float(np.mean(st.rates)) if st.rates else None, aggregate_tokens_per_s=agg,
        itl_p50_us=p50, itl_p99_us=p99, ttft_p50_us=t50, ttft_p99_us=t99, stage_utilization=util,
        bubble_fraction=1.0 - float(np.mean(util)) if util else 0.0, live_requests=state["peak"],
        live_requests_mean=state["area"] / run_end if run_end > 0 else 0.0, power_w=power,
        tokens_per_s_per_mw=agg / (power / 1e6) if power and agg else None,
        joules_per_token=power / agg if power and agg else None, requests=len(reqs),
        requests_completed=sum(1 for r in reqs if r._done), tokens=st.tokens, window_us=window,
        micro_batch=sim.micro_batch, concurrency_cap=sim.live_cap, stages=stage_ids, segments=len(segs),
        hop_latency_us=sum(s.hop_us for s in segs),
        unloaded_token_latency_us=sum(s.time_us([mean_ctx]) for s in segs) + sum(s.hop_time_us(1) for s in segs),
        stage_time_us=stage_time, pipeline_bound_tokens_per_s=B * 1e6 / max(stage_time) if stage_time else 0.0,
        context=sim.shapes.describe(), output_tokens=sim.output_tokens,
        completion_mean_us=float(np.mean(st.completions)) if st.completions else None, schedule=sim.schedule,
        max_batch=sim.max_batch, batch_mean=c[1] / c[0] if c[0] else 0.0, runtime=sim.runtime,
        decode_only=sim.decode_only, closed_loop=sim.closed_loop, users=sim.users,
        max_num_batched_tokens=None if sim.decode_only else sim.budget, window_start_us=lo,
        prefill_step_fraction=c[3] / c[0] if c[0] else 0.0, power_boundary=getattr(inst.fleet, "power_boundary", None),
        pue=getattr(inst.fleet, "pue", None), spec_k=sim.spec_k, spec_accept=sim.spec_accept,
        cached_prompt_tokens=0 if sim.decode_only else sim.cached_prompt, traffic=sim.traffic, method="steady",
        speed_error=error_band.error_band(inst, max(1, round(c[1] / c[0])) if c[0] else 1, int(sim.shapes.mean_context), sim.assignment),
        ttft_mean_us=float(np.mean(st.ttft)) if st.ttft else None)


def steady_group(instance, assignment, **options) -> SimResult:
    """:func:`steady` with its options by name, stated for an attention-data-parallel group as
    :func:`placer.simulate.des.simulate_group` states the event run."""
    from placer.simulate.data_parallel import for_group, rank_traffic

    traffic, serving, run = split_options(**options)
    return for_group(steady(instance, assignment, rank_traffic(traffic, instance), serving, run), instance)


def check_sim(how: str) -> None:
    """:class:`InvalidSpec` (``--sim``) for anything but :data:`SIMS`."""
    if how not in SIMS:
        raise InvalidSpec(ARGUMENT, "sim", f"unknown simulation {how!r} (use {' or '.join(SIMS)})")


def simulate_with(how: str, instance, assignment, **options) -> SimResult:
    """A run with :func:`placer.simulate.des.simulate_group`'s options, by the fast path
    (:func:`steady_group`, ``method`` ``"steady"``) when ``how`` is ``"fast"`` and it models the
    run, else by the event run (``method`` ``"event"``)."""
    from placer.simulate.des import simulate_group

    check_sim(how)
    if how == "fast":
        try:
            return steady_group(instance, assignment, **options)
        except Unsupported:
            pass
    return simulate_group(instance, assignment, **options)
