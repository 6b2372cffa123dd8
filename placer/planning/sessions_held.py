"""Sessions held: the most live sessions a placement holds under a per-turn TTFT target, with and
without a KV tier below the chip; the planner chooses the on-chip KV reserve and the tier's size.

For a session shape (:mod:`placer.simulate.session_traffic`) whose longest context is ``C`` tokens
(its last turn's prompt and output, cut to the placement's context), ``s_d`` the bytes one session
holds at ``C`` on device ``d`` (one rank: KV and per-request state), ``N_chip`` the most sessions of
``C`` tokens every device's free bytes hold:

* **On the chip** (no tier): every live session keeps its KV in the KV reserve, so the sessions
  held are ``N_chip``: a proof on memory, as the concurrency level is (one more session cannot be
  held at its longest context). Every turn's TTFT is the prefill of its new tokens, the prefix in
  place (each turn alone).
* **With a tier**, the model this module proves the level in (every figure exact within it):

  - the on-chip KV reserve is ``K <= N_chip`` slots of ``s_d`` bytes. ``R`` sessions stay resident
    (a slot each, always); the other ``M`` are *parked*: between turns their KV is in the tier
    only, and a turn takes a slot for ``T = target + output x ITL(K) + W``: its TTFT budget, its
    decode at the step time of ``ceil(K / stages)`` sessions of ``C`` tokens per stage, and the write
    of its new KV to the tier (the slot is free once the copy is there); then the session's tool
    runs ``Z`` s (the think time), so a parked session's turns come every ``P = T + Z``;
  - a parked turn's TTFT is its reload (each device's share at its tier's bandwidth plus the
    latency) and the prefill of its new tokens (alone); every turn of the shape must meet the
    target (a resident turn: its prefill alone), else nothing parks;
  - each device's link to its tier carries a reload per parked turn one way and a write the other
    way (the links are full duplex: a tier's bandwidth is one direction's).

  Then ``M`` parked sessions fit iff (1) ``M x s_d <= tier capacity`` on every device; (2)
  ``M x T <= (K - R) x P`` (chip room for the turns: over a period the slots' busy time is
  ``M x T``, so some instant has ``ceil(M T / P)`` turns at once, and evenly spaced turns, ``P / M``
  apart, never have more); (3) ``M x reload <= P`` and ``M x write <= P`` on every link (each
  link's busy time per period; evenly spaced turns never queue on it when it holds). The same even
  spacing meets (2) and (3) at once, so the most sessions are
  ``max over K, R of R + min(floor((K - R) P / T), floor(P / reload), floor(P / write), floor(tier / s))``:
  every ``K`` is tried (``ITL`` grows with ``K``, so the count is not monotone in it) and, for each,
  the best ``R`` is found exactly (:func:`best_split`: the count rises with ``R`` while a link or the
  tier binds and falls once the slots bind, as ``P / T >= 1``). The brute force of
  ``tests/planning/test_sessions_proof.py`` enumerates the schedules of small instances and finds
  the same maxima.

  The level is **proven** when the think time is fixed (a periodic schedule holds every session to
  its slot); with think times that vary (``think_sigma > 0``) the same count, at the mean think
  time, is a bound on the mean load and is printed **not proven**. Outside the model (stated with
  the figures): a turn's prefill is priced alone (under load it shares the chip's steps), slots
  are sized for the longest turn, and a turn that ends early leaves its slot idle.

The tier size it needs: the parked sessions' copies, ``M x s_d`` on the device that needs most;
the on-chip KV reserve ``K x s_d``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from placer.problem.instance import Instance
from placer.simulate.cost import segments_of
from placer.simulate.des import DEFAULT_MAX_NUM_BATCHED_TOKENS
from placer.simulate.prefill import prompt_time_us
from placer.simulate.requests import Reserve
from placer.simulate.session_traffic import SessionShape
from placer.simulate.sessions import route_tiers, tier_power_w

__all__ = ["SessionsHeld", "sessions_held", "best_split", "MODEL"]

MODEL = ("slots sized for the longest turn", "each turn's prefill priced alone",
         "a parked session reloads its whole prefix and writes each turn's new KV through")


def best_split(k: int, period: float, turn: float, link: int, cap: int) -> tuple[int, int]:
    """(resident R, parked M) of ``k`` slots that hold the most sessions ``R + M``, ``M`` the least of
    ``floor((k - R) x period / turn)`` (``period >= turn``), ``link`` and ``cap``: with ``B = min(link,
    cap)`` the count is ``R + B`` (rising) while ``floor((k - R) period / turn) >= B``, then
    ``R + floor((k - R) period / turn)``, which does not rise with ``R`` as ``period >= turn``; so the
    best ``R`` is the largest with ``floor((k - R) period / turn) >= B`` or the one after it (its
    neighbours and both ends are tried too; ties keep fewer resident)."""
    b = min(link, cap)

    def parked(r: int) -> int:
        return min(math.floor((k - r) * period / turn), b)

    # the largest r with (k - r) period / turn >= b
    r0 = k - math.ceil(b * turn / period)
    cands = {0, k} | {r for r in (r0 - 1, r0, r0 + 1) if 0 <= r <= k}
    best = max(sorted(cands), key=lambda r: r + parked(r))
    return best, parked(best)


@dataclass(frozen=True)
class SessionsHeld:
    sessions: int                   # the most sessions held (the level's value)
    on_chip: int                    # N_chip: every session's KV on the chip (proven on memory)
    proven: bool
    binding: str                    # what limits it
    longest_context: int
    turn_ttft_us: float             # the worst turn's TTFT alone (its reload included when it parks)
    reload_us: float | None = None
    tier: str | None = None
    slots: int | None = None            # K: the on-chip KV reserve in sessions of the longest context
    resident: int | None = None         # R
    parked: int | None = None           # M
    duty_sessions: int | None = None    # floor((K - R) P / T) at the chosen K
    link_sessions: int | None = None    # floor(P / reload) and floor(P / write), the lesser
    tier_sessions: int | None = None    # floor(tier capacity / s), the least over devices
    tier_bytes: int | None = None       # per device, the most any device needs (M x s_d)
    kv_reserve_bytes: int | None = None  # per device, the most (K x s_d)
    turn_us: float | None = None        # T at the chosen K
    think_s: float | None = None
    user_tokens_per_s: float | None = None     # while generating, at the chosen K's batch
    tokens_per_s_per_mw: float | None = None   # held sessions' output over their turn cycles, tier power included
    power_w: float | None = None

    def lines(self, target_ms: float) -> list[str]:
        proof = "proven" if self.proven else "a bound, not proven: think times vary"
        out = [f"sessions held: {self.sessions:,} ({proof}; {self.binding}); longest context "
               f"{self.longest_context:,} tokens, its turn's TTFT alone {self.turn_ttft_us / 1e3:,.1f} ms"
               + (f" (reload {self.reload_us / 1e3:,.1f} ms)" if self.reload_us is not None else "")
               + f" against the {target_ms:g} ms target"]
        out.append(f"  on the chip: {self.on_chip:,} sessions at their longest context (proven: the KV reserve "
                   f"holds no more)")
        if self.user_tokens_per_s is not None:
            mw = "-" if self.tokens_per_s_per_mw is None else f"{self.tokens_per_s_per_mw:,.0f}"
            out.append(f"  per user {self.user_tokens_per_s:,.1f} tokens/s while generating; {mw} tokens/s per MW over "
                       f"the held sessions' turn cycles ({(self.power_w or 0) / 1e3:,.1f} kW, tier included)")
        if self.tier is not None and self.slots is not None:
            out.append(f"  {self.tier} tier: KV reserve {self.slots:,} session slots "
                       f"({(self.kv_reserve_bytes or 0) / 1e9:,.1f} GB per device), {self.resident:,} resident and "
                       f"{self.parked:,} parked; tier size {(self.tier_bytes or 0) / 1e9:,.1f} GB per device")
            out.append(f"  bounds at that reserve: slots {self.duty_sessions:,} parked (turns of "
                       f"{self.turn_us / 1e6:,.2f} s, {self.think_s:g} s think), reload link {self.link_sessions:,}, "
                       f"tier capacity {self.tier_sessions:,}; model: {'; '.join(MODEL)}")
        return out

    def record(self, preset: str, target_ms: float) -> dict:
        """The mapping's ``sessions`` record (:mod:`placer.mapping.tiers`)."""
        slots = self.on_chip if self.slots is None else self.slots
        return {"preset": preset, "ttft_target_ms": target_ms, "longest_context": self.longest_context,
                "tier": self.tier if self.parked else None, "kv_reserve_sessions": slots,
                "resident": slots if self.resident is None else self.resident, "parked": self.parked or 0,
                "tier_bytes_per_device": self.tier_bytes or 0, "sessions_held": self.sessions,
                "proven": self.proven}


def _ttfts(segs, reserve: Reserve, turns, tiers: dict) -> tuple[float, float, float, float]:
    """(the worst turn's prefill alone, the worst parked turn's reload plus prefill, the longest
    reload, the longest write), each turn's reload its whole prefix, its write the KV it adds."""
    alone = parked = reload = write = 0.0
    before = 0
    for t in turns:
        a = prompt_time_us(segs, t.prompt, DEFAULT_MAX_NUM_BATCHED_TOKENS, cached=before)
        r = max((tr.transfer_us(reserve.need(d, before)) for d, tr in tiers.items()), default=0.0) if before else 0.0
        after = t.prompt + t.output
        w = max((tr.transfer_us(reserve.need(d, after) - reserve.need(d, before)) for d, tr in tiers.items()),
                default=0.0)
        alone, parked, reload, write = max(alone, a), max(parked, a + r), max(reload, r), max(write, w)
        before = after
    return alone, parked, reload, write


def sessions_held(instance: Instance, assignment: Sequence[int], shape: SessionShape, ttft_target_ms: float,
                  tier: str | None = None) -> SessionsHeld:
    """The most sessions of ``shape`` the placement holds with each turn's TTFT (alone) under the
    target (module docstring); ``tier``: a tier name of the devices' hardware spec, or None."""
    segs = segments_of(instance, assignment)
    reserve = Reserve(instance, assignment)
    turns = shape.turns_of(np.random.default_rng(0), instance.workload.context_tokens)
    if not turns:
        return SessionsHeld(0, 0, True, "its first turn passes the placement's context", 0, 0.0)
    last = turns[-1]
    longest = last.prompt + last.output
    chip = int(reserve.ceiling(longest) or 0)
    tiers = route_tiers(instance, reserve.devices, tier) if tier else {}
    alone, ttft, reload, write = _ttfts(segs, reserve, turns, tiers)
    target_us = ttft_target_ms * 1e3
    if chip == 0 or alone > target_us:
        why = "no session fits at its longest context" if chip == 0 else "a turn's prefill alone misses the target"
        return SessionsHeld(0, chip, True, why, longest, alone)
    stages = len({s.device for s in segs})
    windows = set().union(*(s.windows() for s in segs))
    fixed = shape.think_sigma == 0
    z_us = shape.think_s * 1e6

    def itl(k: int) -> float:
        b = max(1, -(-k // stages))
        cached = {w: b * (longest if w is None else min(longest, w)) for w in windows}
        return sum(s.duration_us(s.terms_for(b, cached)) + s.hop_time_us(b) for s in segs)

    def power(held: int, cycle: float, tiers_on: dict) -> dict:
        return _power(instance, reserve.devices, tiers_on, held, last.output, cycle)

    if not tiers or ttft > target_us or len(turns) == 1:     # one turn: a session never idles, nothing parks
        t_us = target_us + last.output * itl(chip)
        why = ("on-chip KV reserve at the longest context" if not tiers
               else f"one turn a session: the {tier} tier adds none" if len(turns) == 1
               else f"the {tier} tier's reload misses the target: on-chip KV reserve")
        return SessionsHeld(chip, chip, True, why, longest, ttft if tiers else alone,
                            reload if tiers else None, tier, turn_us=t_us, think_s=shape.think_s,
                            user_tokens_per_s=1e6 / itl(chip), **power(chip, t_us + z_us, {}))
    need = {d: reserve.need(d, longest) for d in tiers}
    cap = min(t.capacity_bytes // need[d] for d, t in tiers.items())
    best = None
    for k in range(1, chip + 1):
        step = itl(k)
        t_us = target_us + last.output * step + write
        period = t_us + z_us
        link = min(math.floor(period / reload) if reload else 10**12, math.floor(period / write) if write else 10**12)
        r, m = best_split(k, period, t_us, link, cap)
        key = (r + m, -k)
        if best is None or key > best[0]:
            best = (key, k, r, m, step, t_us, link)
    (held, _), k, r, m, step, t_us, link = best
    duty = math.floor((k - r) * (t_us + z_us) / t_us)
    bounds = {"the chip's slots for turns": duty, "the reload links": link, "the tier's capacity": cap}
    binding = ("on-chip KV reserve (the tier adds none)" if m == 0
               else f"bound by {min(bounds, key=bounds.get)}, with the {tier} tier")
    # with nothing parked every session is resident: the on-chip count, proven on memory whatever the think times
    return SessionsHeld(held, chip, fixed or m == 0, binding, longest, ttft, reload, tier, k, r, m, duty, link, cap,
                        max(m * n for n in need.values()), max(k * n for n in need.values()), t_us, shape.think_s,
                        1e6 / step, **power(held, t_us + z_us, tiers if m else {}))


def _power(instance: Instance, devices, tiers: dict, held: int, output: int, cycle_us: float) -> dict:
    """The route's power at the fleet's boundary with the tiers' (None when a device has no figure) and
    the held sessions' output tokens per second per MW: each session ``output`` tokens a cycle."""
    powers = [instance.devices[d].type.power_w for d in devices]
    if any(p is None for p in powers):
        return {}
    fleet = instance.fleet
    extra = tier_power_w(instance, tiers)
    if getattr(fleet, "power_boundary", None) == "facility":
        extra *= fleet.pue if fleet.pue is not None else 1.56
    power = sum(p * len(instance.members(d)) for p, d in zip(powers, devices)) + extra
    return dict(power_w=power, tokens_per_s_per_mw=held * output / (cycle_us / 1e6) / (power / 1e6) if power else None)
