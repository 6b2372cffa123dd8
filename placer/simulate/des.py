"""Discrete-event simulation (simpy) of serving on a full-size placement: prefill and decode.

Requests arrive (all at once, or as a Poisson stream of ``arrival_rate`` per second), each with a
total context drawn from a distribution (``fixed:256k``, ``uniform:64k:256k``,
``lognormal:32k:1.0``, ``choice:8k,32k,256k``; default the workload's ``context_tokens``) of which
the last ``output_tokens`` are generated and the rest is the prompt. A request is admitted when
every device of the route still has room for its KV cache and state at its full context (the KV
reserve: with the mapping's own context this admits exactly its concurrency ceiling) and,
optionally, fewer than ``max_live`` are live.

**Prefill** (unless ``decode_only``) runs on the same devices, chunked as vLLM V1 does it: a step
holds the running decodes first (one token each), then prompt chunks of the admitted requests in
admission order, each ``min(remaining prompt, remaining budget)`` tokens of the step's token budget
``max_num_batched_tokens``; decodes and chunks run as one forward pass
(:mod:`placer.simulate.prefill` prices the chunk part). With ``cached_prompt_tokens`` the leading
tokens of every prompt are a prefix-cache hit (their KV in place on admission, as vLLM's and SGLang's
prefix caches give an agent's repeated context): only the rest is prefilled, its attention reading
the cached part. The step that ends a prompt gives its first
token. Inter-token latency under load therefore includes the prefill chunks that share a step, and
the time to first token (TTFT) is reported beside it.

**Closed loop**: without ``arrival_rate``, the simulation holds a fixed concurrency of ``users``
(the requests asked for, at most what the KV reserve or ``max_live`` holds): a finished request is
replaced at once by its user's next one (as ``vllm bench serve --max-concurrency`` or genai-perf
drive a server), at least ``rounds`` requests per user, and the figures are measured over the
steady part of the run: from the moment every user's first request has finished to the moment the
last request is issued. With ``decode_only`` the requests are the prompts' KV already in place: all
of them arrive at once and are admitted as room frees (the decode-only simulation of earlier
releases, figure for figure).

Steps are formed under one of two schedules:

* ``continuous`` (the default, as serving runtimes batch): whenever the route's first device is
  free, a step takes the requests waiting for it up to the batch limit ``max_batch`` (default:
  the modelled runtime's, :data:`RUNTIME_MAX_BATCH`, never more than the requests the smallest KV
  reserve on the route holds at the context; a runtime cuts every stage to it), and at most
  ``ceil(live / stages)`` decodes: a pipeline-parallel runtime keeps one batch per stage in flight
  (vLLM's virtual engines; SGLang's pipeline micro-batches), at most one per stage when prefill is
  modelled. A step walks the route as a unit (each device serves steps first come first served);
  after the last segment its requests have their next token.
* ``micro-batch``: fixed slots of up to ``micro_batch`` requests, one slot per ``micro_batch``
  live requests; a slot's step decodes its decoding members and prefills chunks of its other
  members within the token budget, and walks the route as above.

Times are in microseconds. The result holds the figures ``placer simulate --json`` reports plus
the closed-form anchors (unloaded token latency, per-stage step times, the pipeline's throughput
bound) and the power boundary the power figures use (the fleet's, :meth:`placer.specs.fleet.Fleet.with_power`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import simpy

from placer.problem.instance import Instance
from placer.simulate import arguments, error_band
from placer.simulate.arguments import (
    DEFAULT_ROUNDS,
    DEFAULT_RUNTIME,
    RUNTIME_MAX_BATCH,
    SCHEDULES,
    RunSettings,
    Serving,
    Traffic,
    split_options,
    traced_arrivals,
)
from placer.simulate.contexts import ContextDist, parse_context_dist
from placer.simulate.cost import cached_tokens, segments_of
from placer.simulate.prefill import Chunk, step_time_us, sum_min
from placer.simulate.requests import Request, Reserve
from placer.simulate.result import Interval, SimResult, token_stats
from placer.simulate.speculative import target_and_draft
from placer.specs.errors import ARGUMENT, InfeasiblePlacement, InvalidSpec

__all__ = ["ContextDist", "parse_context_dist", "SimResult", "Simulation", "simulate", "simulate_mapping", "simulate_group",
           "Interval", "SCHEDULES", "RUNTIME_MAX_BATCH", "DEFAULT_RUNTIME", "DEFAULT_MAX_NUM_BATCHED_TOKENS",
           "DEFAULT_ROUNDS", "sum_min", "Traffic", "Serving", "RunSettings", "split_options"]

MAX_REQUESTS = 1_000_000
# Tokens one step may carry (decodes + prefill chunks): vLLM V1's max_num_batched_tokens for its
# API server on GPUs of 70 GiB or more (vllm/engine/arg_utils.py; 16,384 offline, 2,048 on smaller
# GPUs). Used for every runtime and device: no wafer serving stack publishes its own.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192


class Simulation:
    """One simulation run of ``instance`` placed by ``assignment`` (device index per node).

    The constructor checks the arguments (:class:`InvalidSpec` naming the argument) and sizes the
    run; :meth:`run` simulates it once and returns the :class:`SimResult`. The simpy processes are
    the methods ``_scheduler`` (continuous schedule), ``_slot`` (micro-batch schedule), ``_step``
    (one continuous step) and ``_arrivals``; ``_walk`` is a step's way through the route. See the
    module docstring for what is modelled and :func:`simulate` for the arguments
    (:mod:`placer.simulate.arguments`).
    """

    def __init__(self, instance: Instance, assignment: Sequence[int], traffic: Traffic = Traffic(),
                 serving: Serving = Serving(), run: RunSettings = RunSettings()):
        self.instance = instance
        self.assignment = list(assignment)
        t = traffic
        (self.continuous, self.micro_batch, self.schedule, self.runtime, self.max_batch) = arguments.settle_schedule(
            serving, instance.workload.micro_batch)
        arguments.check_counts(output_tokens=t.output_tokens, arrival_rate=t.arrival_rate, duration_s=t.duration_s,
                               max_live=t.max_live, max_num_batched_tokens=serving.max_num_batched_tokens,
                               rounds=t.rounds)
        t, self.shapes = arguments.resolve(t, instance)
        self.output_tokens = max(1, round(self.shapes.mean_output))
        self.arrival_rate, self.max_live = t.arrival_rate, t.max_live
        self.end_us = t.duration_s * 1e6 if t.duration_s is not None else None
        self.decode_only = bool(t.decode_only)
        self.budget = serving.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
        self.trace_times = traced_arrivals(t) if not self.decode_only else None
        self.closed_loop = not self.decode_only and t.arrival_rate is None and self.trace_times is None
        self.cached_prompt = 0 if self.decode_only else t.cached_prompt_tokens
        self.segs = segments_of(instance, self.assignment)
        self.reserve = Reserve(instance, self.assignment)
        if any(v < 0 for v in self.reserve.free.values()):
            raise InfeasiblePlacement("a device's weights exceed its memory: the placement cannot run")
        self.rng = np.random.default_rng([run.seed, 104729])
        self.n_stages = len({s.device for s in self.segs})
        self.windows = set().union(*(s.windows() for s in self.segs)) or {None}
        self._size(t.requests, t.rounds)
        self.traffic = arguments.served(
            replace(t, cached_prompt_tokens=self.cached_prompt) if self.decode_only else t,
            t.requests if self.arrival_rate is not None and self.end_us is not None else self.base_requests,
            self.live_cap)
        self._speculation(*arguments.spec_of(instance, serving.spec_k, serving.spec_accept))
        self.trace: list[Interval] | None = [] if run.trace else None

    # ------------------------------------------------------------------ arguments and sizes
    def _size(self, requests: int | None, rounds: int) -> None:
        """Live cap, users and requests of the run, and each device's batch limit."""
        sizing = self.shapes.sizing_context
        kv_cap = self.reserve.ceiling(sizing) if sizing is not None else None
        caps = [x for x in (kv_cap, self.max_live) if x is not None]
        self.live_cap = min(caps) if caps else None
        if self.live_cap == 0:
            raise InfeasiblePlacement("no request of this context fits the KV reserve of the placement",
                                      max_concurrency=0)
        timed = self.arrival_rate is not None and self.end_us is not None
        if requests is None:
            if timed:
                requests = MAX_REQUESTS
            elif self.trace_times is not None:
                requests = len(self.trace_times)
            elif self.live_cap is not None:
                requests = self.live_cap
            else:
                requests = self.n_stages * (self.max_batch or 1 if self.continuous else self.micro_batch)
        if not 1 <= requests <= MAX_REQUESTS:
            raise InvalidSpec(ARGUMENT, "requests", f"must be between 1 and {MAX_REQUESTS}")
        self.base_requests = requests
        self.users = None
        if self.closed_loop:
            self.users = min(x for x in (requests, self.live_cap) if x is not None)
            requests = MAX_REQUESTS if self.end_us is not None and requests == self.users \
                else max(requests, rounds * self.users)
        self.requests = min(requests, MAX_REQUESTS)
        self.limit: dict[int, float] = {}
        for d in {s.device for s in self.segs}:
            own = self.reserve.device_ceiling(d, sizing) if sizing is not None else None
            limits = [x for x in (self.max_batch, own) if x is not None]
            self.limit[d] = max(1, min(limits)) if limits else math.inf
        # every step is capped by the smallest device limit (a runtime cuts every stage to it)
        self.batch_cap = min(self.limit.values())

    def _speculation(self, k: int, accept: float | None) -> None:
        """Speculative decoding with the placement's MTP layers: each decode step verifies ``k``
        drafted tokens (a forward of k + 1 positions per request through the target layers) and
        then drafts ``k`` more (k passes of the MTP layers, one position each), emitting ``accept``
        tokens per request per step on average (the acceptance length, bonus token included)."""
        self.spec_k, self.spec_accept = int(k), accept
        self.target_segs, self.draft_segs = self.segs, []
        if k < 0 or (k and accept is None) or (not k and accept is not None):
            raise InvalidSpec(ARGUMENT, "spec_k" if k < 0 or accept is None else "spec_accept",
                              "speculative decoding takes spec_k >= 1 draft tokens and spec_accept, the mean tokens "
                              "a verify step emits" if k >= 0 else "must not be negative")
        if not k:
            return
        if not 1.0 <= accept <= k + 1:
            raise InvalidSpec(ARGUMENT, "spec_accept", f"an acceptance length is between 1 and spec_k + 1 = {k + 1} "
                                                       f"tokens per step, got {accept!r}")
        self.target_segs, self.draft_segs = target_and_draft(self.instance, self.segs)
        if not self.draft_segs:
            raise InvalidSpec(ARGUMENT, "spec_k", "the placement has no MTP layers to draft with (place the model "
                                                  "with its multi-token-prediction layers)")

    # ------------------------------------------------------------------ running
    def run(self) -> SimResult:
        """Simulate once; the result's figures are over the measured window."""
        env = self.env = simpy.Environment()
        self.free_at = {s.device: 0.0 for s in self.segs}
        self.busy = [0.0] * self.n_stages
        self.steps = [0, 0, 0, 0]                     # decode steps, requests in them, largest batch, with a chunk
        self.waiting: deque[Request] = deque()           # issued, not yet admitted
        self.prefilling: list[Request] = []              # continuous: admitted, prompt not all in the KV cache
        self.ready: deque[Request] = deque()             # waiting for a step
        self.idle: list = []
        self.reqs: list[Request] = []
        self.live = self.peak = self.completed = self.slots = self.in_flight = 0
        self.last_change = self.live_area = 0.0
        self.first_done: set[int] = set()
        self.t_warm: float | None = None
        self.t_stop: float | None = None
        self.arrivals_over = False
        self.all_done = env.event()
        self.entry_ready: simpy.Event | None = None
        if self.continuous:
            env.process(self._scheduler())
        env.process(self._arrivals())
        env.run(until=self.end_us if self.end_us is not None else self.all_done)
        self._set_live(0)
        return self._result()

    def _set_live(self, delta: int) -> None:
        now = self.env.now
        self.live_area += self.live * (now - self.last_change)
        self.last_change = now
        self.live += delta
        self.peak = max(self.peak, self.live)

    def _wake(self) -> None:
        while self.idle and self.ready:
            self.idle.pop(0).succeed()
        ev = self.entry_ready
        if ev is not None and not ev.triggered:
            ev.succeed()

    def _issue(self, user: int) -> None:
        """A new request of ``user`` arrives now (its lengths drawn from the traffic's shapes)."""
        prompt, out, cached = self.shapes.draw(self.rng, len(self.reqs))
        r = Request(id=len(self.reqs), arrival=self.env.now, context=prompt + out, output=out, prompt=prompt,
                    user=user)
        # decode only: the prompt is in place; else a prefix-cache hit: those tokens' KV is in place
        r.prefilled = r.prompt if self.decode_only else cached
        self.reqs.append(r)
        self.waiting.append(r)
        if len(self.reqs) >= self.requests:
            self.arrivals_over = True
            if self.t_stop is None:
                self.t_stop = self.env.now

    def _arrivals(self):
        if self.closed_loop:
            for u in range(self.users):
                self._issue(u)
            self._admit()
            return
        t = 0.0
        for i in range(self.requests):
            if self.trace_times is not None:
                t = arguments.arrival_at(self.trace_times, i) * 1e6
                if self.end_us is not None and t > self.end_us:
                    break
                yield self.env.timeout(max(0.0, t - self.env.now))
            elif self.arrival_rate is not None:
                t += self.rng.exponential(1e6 / self.arrival_rate)
                if self.end_us is not None and t > self.end_us:
                    break
                yield self.env.timeout(t - self.env.now)
            self._issue(i)
            self._admit()
        self.arrivals_over = True
        self._check_all_done()

    def _check_all_done(self) -> None:
        if self.arrivals_over and self.completed == len(self.reqs) and not self.all_done.triggered:
            self.all_done.succeed()

    def _admit(self) -> None:
        while self.waiting:
            r = self.waiting[0]
            if self.max_live is not None and self.live >= self.max_live:
                break
            if not self.reserve.fits(r.context):
                if self.live == 0:
                    raise InfeasiblePlacement(f"a request of {r.context} tokens does not fit the KV reserve "
                                              "even alone", max_concurrency=0)
                break
            self.waiting.popleft()
            self.reserve.take(r.context)
            self._set_live(+1)
            if not self.continuous:
                while self.slots * self.micro_batch < self.live:    # one slot per micro_batch live requests
                    self.env.process(self._slot(self.slots))
                    self.slots += 1
            if r.prefilling and self.continuous:
                self.prefilling.append(r)
            else:
                self.ready.append(r)
        self._wake()

    def _token(self, r: Request, now: float) -> None:
        r.generated += 1
        r.times.append(now)
        if r.first is None:
            r.first = now
        r.last = now

    def _finish(self, r: Request) -> None:
        self.reserve.take(r.context, -1)
        self._set_live(-1)
        self.completed += 1
        if self.closed_loop:
            self.first_done.add(r.user)
            if self.t_warm is None and len(self.first_done) == self.users:
                self.t_warm = self.env.now
            if len(self.reqs) < self.requests:
                self._issue(r.user)           # the user's next request, at once
        self._check_all_done()

    def _take_chunks(self, candidates, budget: float, seats: float) -> list[tuple[Request, Chunk]]:
        """Prompt chunks for a step: in order, each ``min(remaining prompt, remaining budget)``."""
        out = []
        for r in candidates:
            if budget <= 0 or seats <= 0:
                break
            if r.busy or not r.prefilling:
                continue
            n = int(min(r.prompt - r.prefilled, budget))
            out.append((r, Chunk(r.prefilled, n)))
            r.busy = True
            budget -= n
            seats -= 1
        return out

    def _stepped(self, decodes: list[Request], chunks: list[tuple[Request, Chunk]],
                 members: list[Request] | None = None) -> list[Request]:
        """A step is through the route: decodes have their next token, a prompt whose last chunk
        ran has its first; the finished leave (waiting requests take their room). Returns the
        ``members`` (a slot's; default the step's decoding requests) that go on."""
        now = self.env.now
        for r in decodes:
            n = 1
            if self.spec_k:         # the verify step's accepted tokens: on average spec_accept
                r.credit += self.spec_accept
                n = max(1, min(int(r.credit + 1e-9), self.spec_k + 1, r.output - r.generated))
                r.credit -= n
            for _ in range(n):
                self._token(r, now)
        for r, ch in chunks:
            r.busy = False
            r.prefilled += ch.tokens
            if not r.prefilling:
                if self.continuous:
                    self.prefilling.remove(r)
                self._token(r, now)
        if members is None:
            members = decodes + [r for r, _ in chunks if not r.prefilling]
        done = [r for r in members if r.done]
        for r in done:
            self._finish(r)
        if done:
            self._admit()
        return [r for r in members if not r.done]

    def _walk(self, slot: int, decodes: list[Request], chunks: list[tuple[Request, Chunk]]):
        # Each device serves one step at a time, first come first served. Arrivals at a device
        # are handled in time order (simpy's event queue), so booking the device from
        # max(arrival, when it frees up) is that FIFO queue, with one event per visit.
        env, b = self.env, len(decodes)
        cached = cached_tokens([r.kv_len for r in decodes], self.windows)
        parts = tuple(ch for _, ch in chunks)
        n = sum(ch.tokens for ch in parts)
        k = self.spec_k
        if k:   # each decoding request verifies k drafts: k + 1 positions after its KV, like a chunk
            verify = tuple(Chunk(r.kv_len, k + 1) for r in decodes)
            zero = dict.fromkeys(cached, 0.0)
        for s in self.target_segs:
            dt = step_time_us(s, 0, zero, verify + parts) if k and b else step_time_us(s, b, cached, parts)
            begin = max(env.now, self.free_at[s.device])
            self.free_at[s.device] = begin + dt
            self._record(s.stage, begin, dt, slot, b, n)
            yield env.timeout(begin + dt + s.hop_time_us(b * (k + 1) + n) - env.now)
        if not b:
            return
        for s in self.draft_segs:           # k draft passes of the MTP layers, one position each
            dt = k * s.duration_us(s.terms_for(b, cached))
            begin = max(env.now, self.free_at[s.device])
            self.free_at[s.device] = begin + dt
            self._record(s.stage, begin, dt, slot, 0, 0)
            yield env.timeout(begin + dt - env.now)

    def _record(self, stage: int, start: float, dt: float, slot: int, b: int, n: int) -> None:
        self.busy[stage] += dt
        if b:
            self.steps[0] += 1
            self.steps[1] += b
            self.steps[2] = max(self.steps[2], b)
            self.steps[3] += n > 0
        if self.trace is not None:
            self.trace.append(Interval(stage, start, start + dt, slot, n > 0, b, n))

    # ---- micro-batch schedule: fixed slots of up to micro_batch requests
    def _slot(self, k: int):
        members: list[Request] = []
        while True:
            while len(members) < self.micro_batch and self.ready:
                members.append(self.ready.popleft())
            if not members:
                ev = self.env.event()
                self.idle.append(ev)
                yield ev
                continue
            decodes = [r for r in members if not r.prefilling]
            chunks = self._take_chunks([r for r in members if r.prefilling], self.budget - len(decodes) * (1 + self.spec_k),
                                       math.inf)
            yield from self._walk(k, decodes, chunks)
            members = self._stepped(decodes, chunks, members)

    # ---- continuous schedule: the entry forms a step whenever its device is free
    def _step(self, k: int, decodes: list[Request], chunks: list[tuple[Request, Chunk]]):
        self.in_flight += 1
        yield from self._walk(k, decodes, chunks)
        self.in_flight -= 1
        for r in self._stepped(decodes, chunks):
            self.ready.append(r)
        self._wake()

    def _scheduler(self):
        env, entry, k = self.env, self.segs[0].device, 0
        while True:
            if self.free_at[entry] > env.now:
                yield env.timeout(self.free_at[entry] - env.now)
                continue
            # prefill modelled: at most one step per pipeline stage in flight (vLLM's PP batches)
            full = not self.decode_only and self.in_flight >= self.n_stages
            # one batch per pipeline stage in flight: the entry takes its share of the live requests
            share = int(min(self.batch_cap, -(-self.live // self.n_stages)))
            decodes = [] if full else [self.ready.popleft() for _ in range(min(share, len(self.ready)))]
            chunks = [] if full else self._take_chunks(self.prefilling, self.budget - len(decodes) * (1 + self.spec_k),
                                                       self.batch_cap - len(decodes))
            if not decodes and not chunks:
                ev = self.entry_ready = env.event()
                yield ev
                self.entry_ready = None
                continue
            env.process(self._step(k, decodes, chunks))
            k += 1
            # the step books the entry device when its process starts, at this same instant
            yield env.timeout(0)

    # ------------------------------------------------------------------ the result
    def _run_end(self) -> float:
        return self.end_us if self.end_us is not None else \
            max((r.last for r in self.reqs if r.last is not None), default=0.0)

    def _window(self) -> tuple[float, float]:
        """(start, end) of the measured window: a closed loop's steady part, else the whole run."""
        end = self._run_end()
        if self.closed_loop and self.t_warm is not None:
            hi = end if self.end_us is not None else self.t_stop
            if hi is not None and hi > self.t_warm:
                return self.t_warm, hi
        return 0.0, end

    def _anchor_batch(self) -> int:
        """The batch of the closed-form anchors (stage times, pipeline bound)."""
        if self.continuous and self.arrival_rate is not None:
            return max(1, self.steps[2])          # the largest batch the stream made: still a bound
        if self.continuous:
            live = min(self.base_requests, self.live_cap) if self.live_cap is not None else self.base_requests
            return int(min(live, self.batch_cap, -(-live // self.n_stages)))
        return self.micro_batch

    def _result(self) -> SimResult:
        inst, segs = self.instance, self.segs
        lo, hi = self._window()
        window = hi - lo
        st = token_stats(self.reqs, lo, hi, ttft=not self.decode_only, arrivals_from=lo)
        run = self._run_end()
        util = [b / run if run > 0 else 0.0 for b in self.busy]
        # a stage on a group of devices draws the power of each of them
        powers = [None if inst.devices[d].type.power_w is None else
                  inst.devices[d].type.power_w * len(inst.members(d)) for d in sorted(set(self.assignment))]
        power = float(sum(powers)) if all(p for p in powers) else None
        agg = st.tokens / window * 1e6 if window > 0 else 0.0
        B = self._anchor_batch()
        mean_ctx = max(1, int(self.shapes.mean_context) - self.output_tokens // 2)
        one = [s.time_us([mean_ctx]) for s in segs]
        stage_time = [0.0] * len(util)
        for s in segs:
            stage_time[s.stage] += s.time_us([mean_ctx] * B)
        stage_ids = [None] * len(util)
        for s in segs:
            stage_ids[s.stage] = s.device_id
        p50, p99 = st.percentiles(st.gaps)
        t50, t99 = st.percentiles(st.ttft)
        fleet = inst.fleet
        return SimResult(
            per_user_tokens_per_s=float(np.mean(st.rates)) if st.rates else None,
            aggregate_tokens_per_s=agg, itl_p50_us=p50, itl_p99_us=p99, ttft_p50_us=t50, ttft_p99_us=t99,
            stage_utilization=util, bubble_fraction=1.0 - float(np.mean(util)) if util else 0.0,
            live_requests=self.peak, live_requests_mean=self.live_area / run if run > 0 else 0.0,
            power_w=power, tokens_per_s_per_mw=agg / (power / 1e6) if power and agg else None,
            joules_per_token=power / agg if power and agg else None,
            requests=len(self.reqs), requests_completed=self.completed, tokens=st.tokens, window_us=window,
            micro_batch=self.micro_batch, concurrency_cap=self.live_cap, stages=stage_ids, segments=len(segs),
            hop_latency_us=sum(s.hop_us for s in segs), unloaded_token_latency_us=sum(one) + sum(
                s.hop_time_us(1) for s in segs),
            stage_time_us=stage_time, pipeline_bound_tokens_per_s=B * 1e6 / max(stage_time) if stage_time else 0.0,
            context=self.shapes.describe(), output_tokens=self.output_tokens,
            completion_mean_us=float(np.mean(st.completions)) if st.completions else None,
            schedule=self.schedule, max_batch=self.max_batch,
            batch_mean=self.steps[1] / self.steps[0] if self.steps[0] else 0.0, runtime=self.runtime,
            decode_only=self.decode_only, closed_loop=self.closed_loop, users=self.users,
            max_num_batched_tokens=None if self.decode_only else self.budget, window_start_us=lo,
            prefill_step_fraction=self.steps[3] / self.steps[0] if self.steps[0] else 0.0,
            power_boundary=getattr(fleet, "power_boundary", None), pue=getattr(fleet, "pue", None),
            spec_k=self.spec_k, spec_accept=self.spec_accept,
            cached_prompt_tokens=0 if self.decode_only else self.cached_prompt, traffic=self.traffic,
            speed_error=error_band.error_band(inst, max(1, round(self.steps[1] / max(self.steps[0], 1))), int(self.shapes.mean_context), self.assignment),
            trace=self.trace)


def simulate(instance: Instance, assignment: Sequence[int], traffic: Traffic = Traffic(),
             serving: Serving = Serving(), run: RunSettings = RunSettings()) -> SimResult:
    """Simulate serving ``traffic`` on ``instance`` placed by ``assignment`` (device index per node),
    batched and decoded as ``serving`` says: one :class:`Simulation` run.

    ``serving.schedule`` is ``"continuous"`` (each step batches the requests waiting for it, up to
    ``max_batch``, default ``RUNTIME_MAX_BATCH[runtime]`` with ``runtime`` defaulting to
    :data:`DEFAULT_RUNTIME`, and never beyond what the KV reserve holds) or ``"micro-batch"``
    (fixed micro-batches of ``micro_batch``, default the workload's); without ``schedule``, giving
    ``micro_batch`` selects the micro-batch schedule and anything else the continuous one.
    ``traffic.requests`` defaults to the live-request cap (the KV reserve's, or ``max_live``), so the run
    measures the placement at its concurrency ceiling; with ``arrival_rate`` and ``duration_s``
    arrivals continue for the whole window. ``context`` (tokens) or ``context_dist`` (see
    :func:`parse_context_dist`) default to the workload's context.

    Prompts are prefilled in chunks of at most ``max_num_batched_tokens`` tokens per step (default
    :data:`DEFAULT_MAX_NUM_BATCHED_TOKENS`) and, without ``arrival_rate``, the run is a closed
    loop of ``min(requests, live cap)`` users, at least ``rounds`` requests each; ``decode_only``
    leaves prefill out. ``spec_k`` > 0 decodes speculatively with the placement's MTP layers,
    ``spec_accept`` tokens accepted per verify step on average (:meth:`Simulation._speculation`);
    ``spec_k=None`` (the default) takes the instance's own speculation (``instance.speculation``, an
    instance built for speculative decoding) when its acceptance length is known, and ``spec_k=0``
    decodes without it. Options by name: :func:`placer.simulate.arguments.split_options`.
    """
    return Simulation(instance, assignment, traffic, serving, run).run()


def simulate_mapping(doc, *, model=None, hardware=None, power: str | None = None, pue: float | None = None,
                     **kw) -> SimResult:
    """:func:`simulate` for a one-pool stage mapping (``placer simulate MAPPING``: the document or
    its :func:`~placer.mapping.view.mapping_view`); ``power`` and ``pue`` choose the boundary the
    power figures are counted at (:meth:`placer.specs.fleet.Fleet.with_power`; default the fleet's).
    A mapping made for speculative decoding (``speculative``: draft tokens and a known acceptance
    length) is simulated with it unless ``spec_k`` is given."""
    from placer.mapping import instance_from_mapping, specs_from_mapping
    from placer.mapping.view import MappingView, mapping_view

    view = mapping_view(doc)
    if not isinstance(view, MappingView):
        raise InvalidSpec("<mapping>", "/pools", "a two-pool mapping: simulate it with simulate_pooled")
    spec = view.speculative
    if "spec_k" not in kw and spec is not None and spec.accept is not None:
        kw.update(spec_k=spec.tokens, spec_accept=float(spec.accept))

    if power is not None or pue is not None:
        m, fleet, _wl = specs_from_mapping(view.doc, model=model, hardware=hardware)
        model, hardware = m, fleet.with_power(power or fleet.power_boundary, pue)
    _m, _f, _wl, inst = instance_from_mapping(view.doc, model=model, hardware=hardware)
    route = view.route
    if len(route) != inst.n_nodes:
        raise InvalidSpec("<mapping>", "route", f"expected {inst.n_nodes} devices, one per node")
    index = inst.device_index
    unknown = [d for d in route if d not in index]
    if unknown:
        raise InvalidSpec("<mapping>", "route", f"unknown or unavailable device {unknown[0]!r}")
    return simulate_group(inst, [index[d] for d in route], **kw)


def simulate_group(instance: Instance, assignment, **options) -> SimResult:
    """:func:`simulate` with its options by name (:func:`~placer.simulate.arguments.split_options`),
    ``requests`` and ``max_live`` in live requests of a group (the heaviest rank's share of them under
    attention data parallelism), the result stated for the whole group
    (:mod:`placer.simulate.data_parallel`); the plain run when the instance is not attention-data-parallel."""
    from placer.simulate.data_parallel import for_group, rank_traffic

    traffic, serving, run = split_options(**options)
    return for_group(simulate(instance, assignment, rank_traffic(traffic, instance), serving, run), instance)
