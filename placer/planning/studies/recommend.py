"""``placer plan --rate R``: the fewest devices (or least power) meeting TTFT and TPOT targets at
a request rate, aggregated and disaggregated side by side (the question NVIDIA aiconfigurator's
``recommend`` answers for GPUs, here with proofs of each placement).

* **Disaggregated**: :func:`placer.planning.disagg.plan_disagg` at the rate.
* **Aggregated**: one pool that prefills and decodes on the same devices (chunked prefill). At a
  rate ``R`` a request is live from its arrival to its last token, at most ``TTFT + OSL x TPOT``
  at the targets, so the pool holds at most ``L = ceil(R x (TTFT + OSL x TPOT))`` live requests
  (Little's law); the speed-floor search (:func:`placer.planning.speed.speed_search`; each
  simulated request decodes OSL tokens, so prompts interleave as often as at the rate) finds the
  fewest devices holding ``L`` at the TPOT target, with KV for ``ISL + OSL`` tokens per request.
  Its TTFT is the simulation's (the closed loop with chunked prefill), checked against the target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from placer.planning.layouts import layout_label
from placer.planning.planner import Plan, plan
from placer.planning.requirements import Placement, Requirements, SolverSettings, Targets

__all__ = ["Recommendation", "recommend"]


@dataclass
class Recommendation:
    """Both answers at ``rate``: the aggregated plan (a speed-floor :class:`Plan` holding
    ``live_aggregated`` requests) judged against ``max_ttft_ms``, and the disaggregated plan."""

    rate: float
    aggregated: Plan | None
    disaggregated: Plan
    live_aggregated: int
    max_ttft_ms: float

    def rows(self) -> list[dict]:
        """One row per serving; ``error_band``: the calibration's error band of its decode speeds (the
        aggregated run's, the decode pool's), ``prefill_error_band``: the prefill replica's run's."""
        out = []
        a = self.aggregated
        if a is not None:
            sim = a.simulation
            ttft = None if sim is None or getattr(sim, "ttft_p50_us", None) is None else sim.ttft_p50_us / 1e3
            tpot = None if sim is None or not sim.per_user_tokens_per_s else 1e3 / sim.per_user_tokens_per_s
            meets = a.feasible and ttft is not None and ttft <= self.max_ttft_ms
            out.append(dict(serving="aggregated", feasible=a.feasible, devices=a.devices, replicas=a.replicas,
                            layout=None if not a.feasible else layout_label(a.instance.tp, a.instance.ep),
                            live_requests=self.live_aggregated, ttft_ms=ttft, tpot_ms=tpot,
                            meets_ttft=bool(meets), proven=a.feasible and a.result.proven_optimal,
                            power_w=None if not a.feasible or a.speed.chosen is None else a.speed.chosen.power_w,
                            error_band=getattr(sim, "speed_error", None), message=a.message))
        d = self.disaggregated
        c = d.pools.chosen if d is not None else None
        out.append(dict(serving="disaggregated", feasible=c is not None, devices=None if c is None else c.devices,
                        replicas=None if c is None else dict(prefill=c.x, decode=c.y),
                        layout=None if c is None else f"prefill {c.prefill.layout}, decode {c.decode.layout}",
                        live_requests=None if c is None else c.load * c.y,
                        ttft_ms=None if c is None else c.ttft_us / 1e3, tpot_ms=None if c is None else c.tpot_us / 1e3,
                        meets_ttft=c is not None, proven=bool(d is not None and d.proven),
                        power_w=None if c is None else c.power_w,
                        error_band=None if c is None else getattr(c.decode_sim or c.decode.sim, "speed_error", None),
                        prefill_error_band=getattr(d.pools.prefill_sim, "speed_error", None) if c is not None else None,
                        message=d.message if d is not None else ""))
        return out

    def to_dict(self) -> dict:
        return dict(rate=self.rate, rows=self.rows())


def recommend(model, fleet, workload, req: Requirements, solver: SolverSettings | None = None, *,
              log=None) -> Recommendation:
    """Both answers at ``req.pools.rate`` under ``req.targets.max_ttft_ms`` and the TPOT floor (see
    the module docstring); the disaggregated plan is ``req``'s, the aggregated one keeps its
    placement's mode, degrees, expert parallelism, reserve and constraints."""
    from placer.simulate.arguments import Traffic as _Traffic
    from placer.specs.errors import ARGUMENT, InvalidSpec

    pools, targets, placement = req.pools, req.targets, req.placement
    if pools is None or pools.rate is None:
        raise InvalidSpec(ARGUMENT, "rate", "a recommendation is for a request rate (--rate)")
    solver = solver or SolverSettings(method=None)
    disagg = plan(model, fleet, workload, req, solver, log=log)
    isl = pools.prompt_tokens if pools.prompt_tokens is not None else workload.context_tokens
    tpot_s = 1.0 / targets.speed_floor
    live = max(1, math.ceil(pools.rate * (targets.max_ttft_ms / 1e3 + pools.decode_tokens * tpot_s) - 1e-9))
    agg_req = Requirements(Placement(mode=placement.mode, degrees=placement.degrees,
                                     expert_parallel=placement.expert_parallel, reserve=placement.reserve,
                                     constraints=placement.constraints),
                           Targets(min_user_tps=targets.min_user_tps, max_itl_ms=targets.max_itl_ms,
                                   speed_objective=targets.speed_objective, output_tokens=pools.decode_tokens),
                           traffic=_Traffic(prompt_tokens=isl, output_tokens=pools.decode_tokens,
                                            cached_prompt_tokens=targets.cached_prompt_tokens or None))
    agg_wl = workload.replace(context_tokens=isl + pools.decode_tokens, concurrency=live)
    aggregated = plan(model, fleet, agg_wl, agg_req, solver, log=log)
    return Recommendation(pools.rate, aggregated, disagg, live, targets.max_ttft_ms)
