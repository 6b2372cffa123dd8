"""Sessions held: how many live sessions a placement holds under a per-turn TTFT target, with and
without a KV tier below the chip.

For a session shape (:mod:`placer.simulate.session_traffic`) whose longest context is ``C`` tokens
(its last turn's prompt and output, cut to the placement's context):

* **On the chip** (no tier, or a tier too slow for the target): every live session keeps its KV in
  the KV reserve at its longest context, so the sessions held are the concurrency ceiling at
  ``C``: ``min over devices of free bytes // bytes of one session at C``. This is a proof on memory,
  as the concurrency level is: one more session cannot be held at its longest context. Its turns'
  TTFT is the prefill of their new tokens, the prefix in place (the longest turn alone, a lower
  bound: under load it rises).
* **With a tier**: idle sessions park there (written through: the tier holds a copy of every
  session) and a turn reloads its prefix first: the reload of the longest prefix (each device's
  share at its tier's bandwidth, plus the latency) and the prefill of the turn's new tokens must meet
  the TTFT target, or the tier adds nothing. Then three bounds, the least of them the answer:

  1. the tier's capacity: ``min over devices of tier bytes // bytes of one session at C``;
  2. the chip's room for active turns (the on-chip ceiling ``N_chip``) over the share of time a session
     is active: a turn lasts ``T = TTFT target + output tokens x ITL`` (ITL: the pipeline's step
     times at the ceiling's batch, each stage holding its share) and the session then thinks for
     the mean think time ``Z``; by Little's law the mean active turns are ``N x T / (T + Z)``,
     so ``N <= N_chip x (T + Z) / T``. A mean, not a worst case: it is *not* a proof (when more
     turns than ``N_chip`` come at once, some wait), and the printout says so;
  3. each device's link to its tier: every turn reloads a prefix, ``N / (T + Z)`` turns a second, so
     ``N <= bandwidth x (T + Z) / bytes of the longest prefix``.

The tier size it needs: the held sessions' copies at ``C`` on the device that needs most.
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
from placer.simulate.sessions import route_tiers

__all__ = ["SessionsHeld", "sessions_held"]


@dataclass(frozen=True)
class SessionsHeld:
    sessions: int                   # the most sessions held
    on_chip: int                    # held with every session's KV on the chip (proven on memory)
    proven: bool                    # the answer is the on-chip ceiling (a proof); else a mean-load bound
    binding: str                    # what limits it
    longest_context: int
    turn_ttft_us: float             # the longest turn's TTFT alone (its reload included with a tier)
    reload_us: float | None = None
    tier: str | None = None
    tier_sessions: int | None = None    # bound 1
    duty_sessions: int | None = None    # bound 2
    link_sessions: int | None = None    # bound 3
    tier_bytes: int | None = None       # per device, the most any device needs
    turn_us: float | None = None
    think_s: float | None = None
    user_tokens_per_s: float | None = None     # while generating, at the on-chip ceiling's batch
    tokens_per_s_per_mw: float | None = None   # held sessions' output over their turn cycles, tier power included
    power_w: float | None = None

    def lines(self, target_ms: float) -> list[str]:
        out = [f"sessions held: {self.sessions:,} ({self.binding}); longest context {self.longest_context:,} "
               f"tokens, its turn's TTFT alone {self.turn_ttft_us / 1e3:,.1f} ms"
               + (f" (reload {self.reload_us / 1e3:,.1f} ms)" if self.reload_us is not None else "")
               + f" against the {target_ms:g} ms target"]
        out.append(f"  on the chip: {self.on_chip:,} sessions at their longest context (proven: the KV reserve "
                   f"holds no more)")
        if self.user_tokens_per_s is not None:
            mw = "-" if self.tokens_per_s_per_mw is None else f"{self.tokens_per_s_per_mw:,.0f}"
            out.append(f"  per user {self.user_tokens_per_s:,.1f} tokens/s while generating; {mw} tokens/s per MW over "
                       f"the held sessions' turn cycles ({(self.power_w or 0) / 1e3:,.1f} kW, tier included)")
        if self.tier is not None and self.tier_sessions is not None:
            out.append(f"  {self.tier} tier: capacity {self.tier_sessions:,} sessions, active-share bound "
                       f"{self.duty_sessions:,} (turns of {self.turn_us / 1e6:,.2f} s, {self.think_s:g} s think: a "
                       f"mean, not proven), reload link {self.link_sessions:,}; tier size it needs "
                       f"{(self.tier_bytes or 0) / 1e9:,.1f} GB per device")
        return out


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
    prefix = turns[-2].prompt + turns[-2].output if len(turns) > 1 else 0
    longest = last.prompt + last.output
    chip = int(reserve.ceiling(longest) or 0)
    alone = prompt_time_us(segs, last.prompt, DEFAULT_MAX_NUM_BATCHED_TOKENS, cached=prefix)
    target_us = ttft_target_ms * 1e3
    if chip == 0 or alone > target_us:
        why = "no session fits at its longest context" if chip == 0 else "a turn's prefill alone misses the target"
        return SessionsHeld(0, chip, True, why, longest, alone)
    stages = len({s.device for s in segs})
    batch = max(1, -(-chip // stages))
    itl = sum(s.time_us([longest] * batch) + s.hop_time_us(batch) for s in segs)
    turn_us = target_us + last.output * itl
    cycle = turn_us + shape.think_s * 1e6
    speed = dict(turn_us=turn_us, think_s=shape.think_s, user_tokens_per_s=1e6 / itl)
    if tier is None:
        return SessionsHeld(chip, chip, True, "on-chip KV reserve at the longest context (proven)", longest, alone,
                            **speed, **_power(instance, reserve.devices, {}, chip, last.output, cycle))
    tiers = route_tiers(instance, reserve.devices, tier)
    reload = max(t.transfer_us(reserve.need(d, prefix)) for d, t in tiers.items())
    ttft = reload + alone
    if ttft > target_us:
        return SessionsHeld(chip, chip, True, f"the {tier} tier's reload misses the target: on-chip ceiling (proven)",
                            longest, ttft, reload, tier, **speed, **_power(instance, reserve.devices, {}, chip,
                                                                           last.output, cycle))
    cap = min(t.capacity_bytes // reserve.need(d, longest) for d, t in tiers.items())
    duty = math.floor(chip * cycle / turn_us)
    link = min(math.floor(t.bandwidth * cycle / 1e6 / max(1, reserve.need(d, prefix))) for d, t in tiers.items())
    bounds = {"tier capacity": cap, "chip room for active turns (mean load)": duty, "reload link": link}
    name, held = min(bounds.items(), key=lambda kv: kv[1])
    held = max(held, chip)
    binding = f"{name} with the {tier} tier" if held > chip else "on-chip KV reserve (the tier adds none)"
    need = max(held * reserve.need(d, longest) for d in tiers)
    return SessionsHeld(held, chip, held == chip, binding, longest, ttft, reload, tier, cap, duty, link, need,
                        **speed, **_power(instance, reserve.devices, tiers, held, last.output, cycle))


def _power(instance: Instance, devices, tiers: dict, held: int, output: int, cycle_us: float) -> dict:
    """The route's power at the fleet's boundary with the tiers' (None when a device has no figure) and
    the held sessions' output tokens per second per MW: each session ``output`` tokens a cycle."""
    powers = [instance.devices[d].type.power_w for d in devices]
    if any(p is None for p in powers):
        return {}
    fleet = instance.fleet
    extra = sum(t.power_w for t in tiers.values())
    if getattr(fleet, "power_boundary", None) == "facility":
        extra *= fleet.pue if fleet.pue is not None else 1.56
    power = sum(p * len(instance.members(d)) for p, d in zip(powers, devices)) + extra
    return dict(power_w=power, tokens_per_s_per_mw=held * output / (cycle_us / 1e6) / (power / 1e6) if power else None)
