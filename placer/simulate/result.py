"""What a simulation reports: :class:`SimResult` (the figures of ``placer simulate --json``) and
the device busy intervals of its trace."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from placer.simulate.arguments import Traffic

__all__ = ["Interval", "SimResult", "TokenStats", "token_stats"]


@dataclass(frozen=True)
class Interval:
    """A device busy with one step from ``start`` to ``end`` (us): ``batch`` decoding requests and
    ``prefill_tokens`` prompt tokens (``prefill`` when there are any)."""

    stage: int
    start: float
    end: float
    slot: int
    prefill: bool = False
    batch: int = 1
    prefill_tokens: int = 0


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
    decode_only: bool = True              # False: prompts are prefilled in chunks on the same devices
    closed_loop: bool = False             # a finished request is replaced by its user's next one
    users: int | None = None              # closed loop: the fixed concurrency
    max_num_batched_tokens: int | None = None   # token budget of one step (decodes + prefill chunks)
    window_start_us: float = 0.0          # the figures are measured over [start, start + window_us]
    prefill_step_fraction: float = 0.0    # of the decode steps in the window, those sharing a prefill chunk
    power_boundary: str | None = None     # chip, system or facility: where power_w is counted
    pue: float | None = None              # facility boundary: the power usage effectiveness applied
    spec_k: int = 0                       # speculative decoding: draft tokens verified per step
    spec_accept: float | None = None      # and the mean tokens a verify step emits (acceptance length)
    cached_prompt_tokens: int = 0         # of every prompt, the tokens found in the prefix cache (not prefilled)
    traffic: Traffic | None = None        # the requests served, resolved (:meth:`Traffic.describe` says it in a line)
    # what the calibration says of these speeds at this batch (placer.simulate.error_band): "calibrated
    # error ±X% for <regime> ..." or "outside the calibrated range (<why>)"
    speed_error: str | None = None
    method: str = "event"                 # event: the discrete-event run; steady: the fast path (placer.simulate.steady)
    ttft_mean_us: float | None = None     # steady: the mean time to first token (it states no p50 or p99)
    trace: list[Interval] | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("trace")
        d["traffic"] = None if self.traffic is None else self.traffic.to_dict()
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in d.items()}


@dataclass(frozen=True)
class TokenStats:
    """Token figures over a window: tokens, inter-token gaps, per-request decode rates, TTFTs and
    arrival-to-last-token times (us, tokens/s)."""

    tokens: int
    gaps: list
    rates: list
    ttft: list
    completions: list

    def percentiles(self, values: list) -> tuple[float | None, float | None]:
        if not values:
            return None, None
        return float(np.percentile(values, 50)), float(np.percentile(values, 99))


def token_stats(reqs, lo: float, hi: float, *, ttft: bool, arrivals_from: float = 0.0) -> TokenStats:
    """Figures of ``reqs`` (objects with ``times``, ``arrival``, ``first``, ``last``, ``done``) over
    the window ``(lo, hi]``: tokens inside it, gaps between consecutive tokens both inside it, each
    request's rate over its tokens inside it; with ``ttft``, the time to first token of the requests
    that arrived at or after ``arrivals_from``."""
    eps = 1e-9
    gaps: list = []
    rates: list = []
    first: list = []
    completions: list = []
    tokens = 0
    for r in reqs:
        times = [t for t in r.times if lo - eps <= t <= hi + eps]
        tokens += sum(1 for t in times if t > lo + eps or lo == 0.0)
        # tokens emitted together (a speculative step's accepted ones) share the gap before them
        groups: list[list] = []
        for t in times:
            if groups and abs(t - groups[-1][0]) <= eps:
                groups[-1][1] += 1
            else:
                groups.append([t, 1])
        for (t0, _), (t1, c) in zip(groups, groups[1:]):
            gaps.extend([(t1 - t0) / c] * c)
        if len(groups) >= 2:
            rates.append((len(times) - groups[0][1]) / (times[-1] - times[0]) * 1e6)
        if ttft and r.first is not None and r.arrival >= arrivals_from - eps:
            first.append(r.first - r.arrival)
        if r.done and r.last is not None and r.last <= hi + eps and r.arrival >= arrivals_from - eps:
            completions.append(r.last - r.arrival)
    return TokenStats(tokens, gaps, rates, first, completions)
