"""Discrete-event simulation (simpy) of decode on a full-size placement.

Requests arrive (all at once, or as a Poisson stream of ``arrival_rate`` per second), each with a
total context drawn from a distribution (``fixed:256k``, ``uniform:64k:256k``,
``lognormal:32k:1.0``, ``choice:8k,32k,256k``) of which the last ``output_tokens`` are generated.
A request is admitted when every device of the route still has room for its KV cache and state
at its full context (the KV reserve: with the mapping's own context this admits exactly its
concurrency ceiling) and, optionally, fewer than ``max_live`` are live.

Admitted requests decode under one of two schedules:

* ``continuous`` (the default, as serving runtimes batch): every device, whenever it is free,
  takes the requests waiting for it (in arrival order) up to its batch limit and runs them as one
  step; the limit is ``max_batch`` (default: the modelled runtime's, :data:`RUNTIME_MAX_BATCH`)
  and never more than the requests the smallest KV reserve on the route holds at the context
  (a runtime cuts every stage to it). The entry also takes at most ``ceil(live / stages)``: a
  pipeline-parallel runtime keeps one batch per stage in flight (vLLM's virtual engines, one
  scheduler per pipeline stage; SGLang's pipeline micro-batches), so a deep pipeline is not left
  with one batch and idle stages. A batch then walks the route as a unit (each device serves
  batches first come first served); after the last segment each of its requests has its next
  token and is ready again, and a finished one frees its reserve for a waiting one.
* ``micro-batch``: fixed micro-batches of up to ``micro_batch`` requests. There is one
  micro-batch slot per ``micro_batch`` live requests (made as requests are admitted); a slot takes
  waiting requests when it starts a step (a finished request frees its reserve and a waiting one
  moves in) and walks the route: at each segment it queues for the device (one micro-batch at a
  time, first come first served), holds it for the cost model's step time
  (:mod:`placer.simulate.cost`), then crosses the hop to the next segment.

With ``prefill=True`` an admitted request first runs its prompt through the same devices as one
job of its own (compute-bound estimate), which gives the time to first token.

Times are in microseconds. The result holds the figures ``docs/interfaces.md`` names for
``placer simulate --json`` plus the closed-form anchors (unloaded token latency, per-stage step
times, the pipeline's throughput bound).
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import simpy

from .. import memory
from ..errors import ARGUMENT, InfeasiblePlacement, InvalidSpec
from ..instance import Instance
from ..units import parse_tokens
from .cost import Segment, Terms, cached_tokens, segments_of

__all__ = ["ContextDist", "parse_context_dist", "SimResult", "simulate", "simulate_mapping", "Interval",
           "SCHEDULES", "RUNTIME_MAX_BATCH", "DEFAULT_RUNTIME"]

MAX_REQUESTS = 1_000_000
SCHEDULES = ("continuous", "micro-batch")
# Requests one decode step may batch, by serving runtime (None: only the KV reserve limits it).
# vllm: --max-num-seqs defaults to 256 (docs.vllm.ai, "Engine Arguments"); sglang: with
# --max-running-requests unset the limit follows the KV pool (sglang server_args.py), i.e. the
# reserve. Cerebras publishes no batch limit for its wafer serving stack.
RUNTIME_MAX_BATCH: dict[str, int | None] = {"vllm": 256, "sglang": None}
DEFAULT_RUNTIME = "vllm"


# ----------------------------------------------------------------------------- contexts
@dataclass(frozen=True)
class ContextDist:
    """Total context tokens per request: ``fixed``, ``uniform`` (lo, hi), ``lognormal`` (median,
    sigma) or ``choice`` (values, drawn uniformly)."""

    kind: str
    values: tuple[float, ...]

    def sample(self, rng: np.random.Generator) -> int:
        if self.kind == "fixed":
            return int(self.values[0])
        if self.kind == "uniform":
            return int(rng.integers(int(self.values[0]), int(self.values[1]) + 1))
        if self.kind == "lognormal":
            return max(1, int(round(self.values[0] * math.exp(self.values[1] * rng.standard_normal()))))
        return int(self.values[int(rng.integers(0, len(self.values)))])

    @property
    def mean(self) -> float:
        if self.kind == "fixed":
            return self.values[0]
        if self.kind == "uniform":
            return (self.values[0] + self.values[1]) / 2
        if self.kind == "lognormal":
            return self.values[0] * math.exp(self.values[1] ** 2 / 2)
        return sum(self.values) / len(self.values)

    @property
    def max(self) -> float:
        if self.kind in ("fixed", "uniform", "choice"):
            return max(self.values)
        return math.inf

    def describe(self) -> str:
        if self.kind == "choice":
            return "choice:" + ",".join(str(int(v)) for v in self.values)
        if self.kind == "lognormal":
            return f"lognormal:{int(self.values[0])}:{self.values[1]:g}"
        return f"{self.kind}:" + ":".join(str(int(v)) for v in self.values)


def parse_context_dist(text: str) -> ContextDist:
    """``256k`` / ``fixed:256k``, ``uniform:64k:256k``, ``lognormal:32k:1.0``, ``choice:8k,32k,256k``."""
    where = ("--context-dist", "context_dist")
    text = str(text).strip()
    try:
        if ":" not in text:
            return ContextDist("fixed", (float(parse_tokens(text)),))
        kind, rest = text.split(":", 1)
        if kind == "fixed":
            return ContextDist("fixed", (float(parse_tokens(rest)),))
        if kind == "uniform":
            lo, hi = (parse_tokens(x) for x in rest.split(":"))
            if lo > hi:
                raise ValueError("uniform needs lo <= hi")
            return ContextDist("uniform", (float(lo), float(hi)))
        if kind == "lognormal":
            median, sigma = rest.split(":")
            s = float(sigma)
            if not 0 <= s <= 5:
                raise ValueError("lognormal sigma must be between 0 and 5")
            return ContextDist("lognormal", (float(parse_tokens(median)), s))
        if kind == "choice":
            vals = tuple(float(parse_tokens(x)) for x in re.split(r"[,\s]+", rest) if x)
            if not vals:
                raise ValueError("choice needs at least one value")
            return ContextDist("choice", vals)
    except (ValueError, TypeError) as exc:
        raise InvalidSpec(*where, f"cannot read {text!r}: {exc}") from None
    raise InvalidSpec(*where, f"unknown distribution {text!r} (fixed, uniform, lognormal or choice)")


# ----------------------------------------------------------------------------- result
@dataclass(frozen=True)
class Interval:
    """A device busy with one micro-batch (or a prefill when ``prefill``) from ``start`` to ``end`` (us)."""

    stage: int
    start: float
    end: float
    slot: int
    prefill: bool = False
    batch: int = 1


@dataclass
class SimResult:
    per_user_tokens_per_s: float | None
    aggregate_tokens_per_s: float
    itl_p50_us: float | None
    itl_p99_us: float | None
    ttft_p50_us: float | None
    ttft_p99_us: float | None
    stage_utilization: list[float]
    bubble_fraction: float
    live_requests: int
    live_requests_mean: float
    power_w: float | None
    tokens_per_s_per_mw: float | None
    joules_per_token: float | None
    requests: int
    requests_completed: int
    tokens: int
    window_us: float
    micro_batch: int
    concurrency_cap: int | None
    stages: list[str]
    segments: int
    hop_latency_us: float
    unloaded_token_latency_us: float
    stage_time_us: list[float]
    pipeline_bound_tokens_per_s: float
    context: str
    output_tokens: int
    completion_mean_us: float | None = None   # arrival to last token, over the requests that finished
    schedule: str = "continuous"
    max_batch: int | None = None          # continuous: the per-device batch limit (None: KV reserve only)
    batch_mean: float = 0.0               # requests per decode step, averaged over device steps
    runtime: str | None = None
    trace: list[Interval] | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("trace")
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in d.items()}


@dataclass
class _Req:
    id: int
    arrival: float
    context: int                  # total tokens: prompt + output
    output: int
    prompt: int
    generated: int = 0
    first: float | None = None
    last: float | None = None
    times: list = field(default_factory=list)

    @property
    def kv_len(self) -> int:
        return self.prompt + self.generated

    @property
    def done(self) -> bool:
        return self.generated >= self.output


# ----------------------------------------------------------------------------- simulation
class _Reserve:
    """Per-device KV/state room and what one request of a given context needs there."""

    def __init__(self, instance: Instance, assignment: Sequence[int]):
        wl = instance.workload
        self.devices = sorted(set(assignment))
        self.free = {d: instance.capacity_bytes[d] for d in self.devices}
        self.coef: dict[int, dict] = {d: {} for d in self.devices}   # window -> KV bytes per token
        self.state = {d: 0 for d in self.devices}
        for i, d in enumerate(assignment):
            layer = instance.nodes[i]
            self.free[d] -= instance.weight_bytes[i]
            kv = memory.kv_bytes_per_token(layer, wl)
            if kv:
                self.coef[d][layer.kv_window] = self.coef[d].get(layer.kv_window, 0) + kv
            self.state[d] += memory.state_bytes_per_request(layer, wl)

    def need(self, d: int, context: int) -> int:
        kv = sum(b * (context if w is None else min(context, w)) for w, b in self.coef[d].items())
        return kv + self.state[d]

    def fits(self, context: int) -> bool:
        return all(self.need(d, context) <= self.free[d] for d in self.devices)

    def take(self, context: int, sign: int = 1) -> None:
        for d in self.devices:
            self.free[d] -= sign * self.need(d, context)

    def device_ceiling(self, d: int, context: int) -> int | None:
        """Requests of ``context`` tokens device ``d``'s reserve holds (None: it keeps no KV or state)."""
        n = self.need(d, context)
        return max(self.free[d] // n, 0) if n > 0 else None

    def ceiling(self, context: int) -> int | None:
        caps = [self.free[d] // n for d in self.devices if (n := self.need(d, context)) > 0]
        return max(min(caps), 0) if caps else None


def simulate(instance: Instance, assignment: Sequence[int], *, requests: int | None = None,
             output_tokens: int = 32, context: int | str | None = None,
             context_dist: str | ContextDist | None = None, schedule: str | None = None,
             max_batch: int | None = None, runtime: str | None = None, micro_batch: int | None = None,
             arrival_rate: float | None = None, duration_s: float | None = None,
             max_live: int | None = None, seed: int = 0, prefill: bool = False,
             trace: bool = False) -> SimResult:
    """Simulate decode of ``instance`` placed by ``assignment`` (device index per node).

    ``schedule`` is ``"continuous"`` (each device batches the requests waiting for it, up to
    ``max_batch``, default ``RUNTIME_MAX_BATCH[runtime]`` with ``runtime`` defaulting to
    :data:`DEFAULT_RUNTIME`, and never beyond what its KV reserve holds) or ``"micro-batch"``
    (fixed micro-batches of ``micro_batch``, default the workload's); without ``schedule``, giving
    ``micro_batch`` selects the micro-batch schedule and anything else the continuous one.
    ``requests`` defaults to the live-request cap (the KV reserve's, or ``max_live``), so the run
    measures the placement at its concurrency ceiling; with ``arrival_rate`` and ``duration_s``
    arrivals continue for the whole window. ``context`` (tokens) or ``context_dist`` (see
    :func:`parse_context_dist`) default to the workload's context.
    """
    wl = instance.workload
    if schedule is None:
        schedule = "micro-batch" if micro_batch is not None else "continuous"
    if schedule not in SCHEDULES:
        raise InvalidSpec(ARGUMENT, "schedule", f"unknown schedule {schedule!r} (choose from {', '.join(SCHEDULES)})")
    if runtime is not None and runtime not in RUNTIME_MAX_BATCH:
        raise InvalidSpec(ARGUMENT, "runtime", f"unknown runtime {runtime!r} "
                                                  f"(choose from {', '.join(RUNTIME_MAX_BATCH)})")
    if max_batch is not None and max_batch < 1:
        raise InvalidSpec(ARGUMENT, "max_batch", "must be at least 1")
    continuous = schedule == "continuous"
    if continuous and micro_batch is not None:
        raise InvalidSpec(ARGUMENT, "micro_batch", "applies to the micro-batch schedule only "
                                                          "(use --max-batch with continuous batching)")
    if not continuous and max_batch is not None:
        raise InvalidSpec(ARGUMENT, "max_batch", "applies to the continuous schedule only")
    B = micro_batch if micro_batch is not None else wl.micro_batch
    if B < 1:
        raise InvalidSpec(ARGUMENT, "micro_batch", "must be at least 1")
    if continuous:
        runtime = runtime or DEFAULT_RUNTIME
        if max_batch is None:
            max_batch = RUNTIME_MAX_BATCH[runtime]
    if output_tokens < 1:
        raise InvalidSpec(ARGUMENT, "output_tokens", "must be at least 1")
    if arrival_rate is not None and not arrival_rate > 0:
        raise InvalidSpec(ARGUMENT, "arrival_rate", "must be a positive number of requests per second")
    if duration_s is not None and not duration_s > 0:
        raise InvalidSpec(ARGUMENT, "duration", "must be positive (seconds)")
    if max_live is not None and max_live < 1:
        raise InvalidSpec(ARGUMENT, "max_live", "must be at least 1")
    if context_dist is not None and context is not None:
        raise InvalidSpec(ARGUMENT, "context_dist", "give --context or --context-dist, not both")
    if isinstance(context_dist, str):
        dist = parse_context_dist(context_dist)
    elif context_dist is not None:
        dist = context_dist
    else:
        c = wl.context_tokens if context is None else parse_tokens(context)
        dist = ContextDist("fixed", (float(c),))
    segs = segments_of(instance, assignment)
    reserve = _Reserve(instance, assignment)
    if any(v < 0 for v in reserve.free.values()):
        raise InfeasiblePlacement("a device's weights exceed its memory: the placement cannot run")
    rng = np.random.default_rng([seed, 104729])
    kv_cap = reserve.ceiling(int(dist.mean)) if dist.kind == "fixed" else None
    live_cap = min(x for x in (kv_cap, max_live) if x is not None) if (kv_cap, max_live) != (None, None) \
        else None
    if live_cap == 0:
        raise InfeasiblePlacement("no request of this context fits the KV reserve of the placement",
                                  max_concurrency=0)
    n_stages = len({s.device for s in segs})
    if requests is None:
        if arrival_rate is not None and duration_s is not None:
            requests = MAX_REQUESTS
        elif live_cap is not None:
            requests = live_cap
        else:
            requests = n_stages * (B if not continuous else (max_batch or 1))
    if not 1 <= requests <= MAX_REQUESTS:
        raise InvalidSpec(ARGUMENT, "requests", f"must be between 1 and {MAX_REQUESTS}")
    # per-device batch limit (continuous): max_batch, and what the device's own reserve holds
    limit: dict[int, float] = {}
    for d in {s.device for s in segs}:
        own = reserve.device_ceiling(d, int(dist.mean)) if dist.kind == "fixed" else None
        caps = [x for x in (max_batch, own) if x is not None]
        limit[d] = max(1, min(caps)) if caps else math.inf

    env = simpy.Environment()
    free_at = {s.device: 0.0 for s in segs}
    busy = [0.0] * n_stages
    steps = [0, 0, 0]                                # device steps, requests in them, largest batch
    intervals: list[Interval] | None = [] if trace else None
    waiting: deque[_Req] = deque()
    ready: deque[_Req] = deque()
    idle: list = []
    reqs: list[_Req] = []
    state = dict(live=0, peak=0, completed=0, tokens=0, last_change=0.0, live_area=0.0)
    all_done = env.event()
    slots = [0]
    end_us = duration_s * 1e6 if duration_s is not None else None
    windows = set().union(*(s.windows() for s in segs)) or {None}
    # continuous: every batch is capped by the smallest device limit (a runtime cuts every stage
    # to it), and the entry forms a batch whenever its device is free
    batch_cap = min(limit.values())
    entry_ready: list[simpy.Event | None] = [None]

    def set_live(delta: int):
        now = env.now
        state["live_area"] += state["live"] * (now - state["last_change"])
        state["last_change"] = now
        state["live"] += delta
        state["peak"] = max(state["peak"], state["live"])

    def wake():
        while idle and ready:
            idle.pop(0).succeed()
        ev = entry_ready[0]
        if ev is not None and ready and not ev.triggered:
            ev.succeed()

    def start(r: _Req):
        """An admitted request (or one whose prefill is done) joins the decode schedule."""
        ready.append(r)

    def admit():
        while waiting:
            r = waiting[0]
            if max_live is not None and state["live"] >= max_live:
                break
            if not reserve.fits(r.context):
                if state["live"] == 0:
                    raise InfeasiblePlacement(f"a request of {r.context} tokens does not fit the KV reserve "
                                              "even alone", max_concurrency=0)
                break
            waiting.popleft()
            reserve.take(r.context)
            set_live(+1)
            if not continuous:
                while slots[0] * B < state["live"]:      # one micro-batch slot per B live requests
                    env.process(slot_proc(slots[0]))
                    slots[0] += 1
            if prefill:
                env.process(prefill_job(r))
            else:
                start(r)
        wake()

    def finish(r: _Req):
        reserve.take(r.context, -1)
        set_live(-1)
        state["completed"] += 1
        if state["completed"] == len(reqs) and arrivals_over[0] and not all_done.triggered:
            all_done.succeed()

    def token(r: _Req, now: float):
        r.generated += 1
        r.times.append(now)
        if r.first is None:
            r.first = now
        r.last = now
        state["tokens"] += 1

    def prefill_terms(r: _Req):
        p = r.prompt

        def terms(s: Segment) -> Terms:
            t = s.terms_for(1, {w: 0.0 for w in s.windows()})
            kvb = sum(c.kv_bytes_per_token * (p if c.kv_window is None else min(p, c.kv_window))
                      for c in s.costs)
            kve = sum(c.kv_elements_per_token * sum_min(p, c.kv_window) for c in s.costs)
            act = sum(2.0 * c.active_params * p + 4.0 * c.state_elements * p for c in s.costs)
            st = sum(2 * c.state_bytes for c in s.costs)      # read once, written once
            return Terms(t.fixed_us, sum(c.weight_bytes_read(p) for c in s.costs) + kvb + st, act + 2.0 * kve,
                         t.comm_us)
        return terms

    def prefill_done(r: _Req):
        token(r, env.now)
        if r.done:
            finish(r)
            admit()
        else:
            start(r)
            wake()

    def decoded(members: list[_Req]) -> list[_Req]:
        """Every member got its next token now; the finished ones leave. Returns those that go on."""
        now = env.now
        for r in members:
            token(r, now)
        done = [r for r in members if r.done]
        for r in done:
            finish(r)
        if done:
            admit()
        return [r for r in members if not r.done]

    def record(s: Segment, start_t: float, dt: float, slot: int, is_prefill: bool, b: int):
        busy[s.stage] += dt
        if not is_prefill:
            steps[0] += 1
            steps[1] += b
            steps[2] = max(steps[2], b)
        if intervals is not None:
            intervals.append(Interval(s.stage, start_t, start_t + dt, slot, is_prefill, b))

    # ---- both schedules: a batch walks the route, devices serve batches first come first served
    def walk(slot: int, step_terms, b: int, is_prefill: bool = False):
        # Each device serves one batch at a time, first come first served. Arrivals at a device
        # are handled in time order (simpy's event queue), so booking the device from
        # max(arrival, when it frees up) is that FIFO queue, with one event per visit.
        for s in segs:
            dt = s.duration_us(step_terms(s))
            begin = max(env.now, free_at[s.device])
            free_at[s.device] = begin + dt
            record(s, begin, dt, slot, is_prefill, b)
            yield env.timeout(begin + dt + s.hop_time_us(b) - env.now)

    def prefill_job(r: _Req):
        yield from walk(-1 - r.id, prefill_terms(r), 1, True)
        prefill_done(r)

    def step_terms(members: list[_Req]):
        cached = cached_tokens([r.kv_len for r in members], windows)
        b = len(members)
        return lambda s: s.terms_for(b, cached)

    # ---- micro-batch schedule: fixed slots of up to B requests
    def slot_proc(k: int):
        members: list[_Req] = []
        while True:
            while len(members) < B and ready:
                members.append(ready.popleft())
            if not members:
                ev = env.event()
                idle.append(ev)
                yield ev
                continue
            yield from walk(k, step_terms(members), len(members))
            members = decoded(members)

    # ---- continuous schedule: the entry batches the ready requests whenever its device is free
    def batch_proc(k: int, members: list[_Req]):
        yield from walk(k, step_terms(members), len(members))
        for r in decoded(members):
            ready.append(r)
        wake()

    def scheduler():
        entry = segs[0].device
        k = 0
        while True:
            if not ready:
                ev = entry_ready[0] = env.event()
                yield ev
                entry_ready[0] = None
                continue
            if free_at[entry] > env.now:
                yield env.timeout(free_at[entry] - env.now)
                continue
            # one batch per pipeline stage in flight: the entry takes its share of the live requests
            share = int(min(batch_cap, -(-state["live"] // n_stages)))
            members = [ready.popleft() for _ in range(min(share, len(ready)))]
            env.process(batch_proc(k, members))
            k += 1
            # the batch books the entry device when its process starts, at this same instant
            yield env.timeout(0)

    if continuous:
        env.process(scheduler())

    arrivals_over = [False]

    def new_request(i: int, t: float) -> _Req:
        c = dist.sample(rng)
        if c < 2:
            c = 2
        out = min(output_tokens, c - 1)
        r = _Req(id=i, arrival=t, context=c, output=out, prompt=c - out)
        reqs.append(r)
        return r

    def arrivals():
        t = 0.0
        for i in range(requests):
            if arrival_rate is not None:
                t += rng.exponential(1e6 / arrival_rate)
                if end_us is not None and t > end_us:
                    break
                yield env.timeout(t - env.now)
            waiting.append(new_request(i, env.now))
            admit()
        arrivals_over[0] = True
        if state["completed"] == len(reqs) and not all_done.triggered:
            all_done.succeed()

    env.process(arrivals())
    env.run(until=end_us if end_us is not None else all_done)

    window = end_us if end_us is not None else max((r.last for r in reqs if r.last is not None), default=0.0)
    set_live(0)
    if continuous and arrival_rate is not None:
        step_batch = max(1, steps[2])          # the largest batch the stream made: still a bound
    elif continuous:
        live = min(requests, live_cap) if live_cap is not None else requests
        step_batch = int(min(live, batch_cap, -(-live // n_stages)))
    else:
        step_batch = B
    return _summarise(instance, assignment, segs, reqs, state, busy, window, step_batch, live_cap, dist,
                      output_tokens, intervals, prefill, schedule=schedule, max_batch=max_batch if continuous else None,
                      batch_mean=steps[1] / steps[0] if steps[0] else 0.0, runtime=runtime if continuous else None,
                      micro_batch=B)


def sum_min(p: int, window: int | None) -> float:
    """Sum over positions t = 1..p of min(t, window): KV entries a causal prefill reads."""
    if window is None or window >= p:
        return p * (p + 1) / 2
    return window * (window + 1) / 2 + (p - window) * window


def _summarise(instance, assignment, segs, reqs, state, busy, window, B, live_cap, dist, output_tokens,
               intervals, prefill, *, schedule, max_batch, batch_mean, runtime, micro_batch) -> SimResult:
    """The result; ``B`` is the batch of the closed-form anchors (stage times, pipeline bound)."""
    gaps = []
    rates = []
    ttft = []
    tokens = 0
    for r in reqs:
        times = [t for t in r.times if t <= window + 1e-9]
        tokens += len(times)
        if len(times) >= 2:
            gaps.extend(np.diff(times))
            rates.append((len(times) - 1) / (times[-1] - times[0]) * 1e6)
        if prefill and r.first is not None:
            ttft.append(r.first - r.arrival)
    finished = [r.last - r.arrival for r in reqs if r.done and r.last is not None and r.last <= window + 1e-9]
    completion = float(np.mean(finished)) if finished else None
    util = [b / window if window > 0 else 0.0 for b in busy]
    used = sorted(set(assignment))
    # a stage on a group of devices draws the power of each of them
    powers = [None if instance.devices[d].type.power_w is None else
              instance.devices[d].type.power_w * len(instance.members(d)) for d in used]
    power = float(sum(powers)) if all(p for p in powers) else None
    agg = tokens / window * 1e6 if window > 0 else 0.0
    mean_ctx = max(1, int(dist.mean) - output_tokens // 2)
    one = [s.time_us([mean_ctx]) for s in segs]
    hops = sum(s.hop_time_us(1) for s in segs)
    stage_time = [0.0] * len(util)
    for s in segs:
        stage_time[s.stage] += s.time_us([mean_ctx] * B)
    p50, p99 = (float(np.percentile(gaps, q)) for q in (50, 99)) if gaps else (None, None)
    t50, t99 = (float(np.percentile(ttft, q)) for q in (50, 99)) if ttft else (None, None)
    stage_ids = [None] * len(util)
    for s in segs:
        stage_ids[s.stage] = s.device_id
    return SimResult(
        per_user_tokens_per_s=float(np.mean(rates)) if rates else None,
        aggregate_tokens_per_s=agg, itl_p50_us=p50, itl_p99_us=p99, ttft_p50_us=t50, ttft_p99_us=t99,
        stage_utilization=util, bubble_fraction=1.0 - float(np.mean(util)) if util else 0.0,
        live_requests=state["peak"], live_requests_mean=state["live_area"] / window if window > 0 else 0.0,
        power_w=power, tokens_per_s_per_mw=agg / (power / 1e6) if power and agg else None,
        joules_per_token=power / agg if power and agg else None,
        requests=len(reqs), requests_completed=state["completed"], tokens=tokens, window_us=window,
        micro_batch=micro_batch, concurrency_cap=live_cap, stages=stage_ids, segments=len(segs),
        hop_latency_us=sum(s.hop_us for s in segs), unloaded_token_latency_us=sum(one) + hops,
        stage_time_us=stage_time, pipeline_bound_tokens_per_s=B * 1e6 / max(stage_time) if stage_time else 0.0,
        context=dist.describe(), output_tokens=output_tokens, completion_mean_us=completion,
        schedule=schedule, max_batch=max_batch,
        batch_mean=batch_mean, runtime=runtime, trace=intervals)


def simulate_mapping(doc: dict, *, model=None, hardware=None, **kw) -> SimResult:
    """:func:`simulate` for a stage-mapping document (``placer simulate MAPPING``)."""
    from ..mapping import instance_from_mapping

    _m, _f, _wl, inst = instance_from_mapping(doc, model=model, hardware=hardware)
    route = doc.get("route")
    if not isinstance(route, list) or len(route) != inst.n_nodes:
        raise InvalidSpec("<mapping>", "route", f"expected {inst.n_nodes} devices, one per node")
    index = inst.device_index
    unknown = [d for d in route if d not in index]
    if unknown:
        raise InvalidSpec("<mapping>", "route", f"unknown or unavailable device {unknown[0]!r}")
    return simulate(inst, [index[d] for d in route], **kw)
