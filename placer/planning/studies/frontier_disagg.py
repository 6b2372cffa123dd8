"""Disaggregated points of a speed frontier: for each decode fleet, prefill fleet and speed floor,
the disaggregated plan (:func:`placer.planning.disagg.plan_disagg`) serving the most requests/s
the fleets hold under the floor's TPOT and the TTFT target, as one frontier row.

A row's figures are the whole plan's: every device of both pools, their power, the decode pool's
simulated per-user speed at its load (``1 / TPOT``), and the output tokens/s the rate gives
(``rate x output tokens``). The requests are the aggregated points': the frontier's traffic
(:func:`traffic_prompt`: its prompt, the standard or the spec's default where it gives none) then
``output_tokens`` generated, so both kinds of point serve the same requests; a row states that
traffic, the decode run's calibrated error band, and its $/million tokens (both pools' devices,
each at its type's price). The TTFT the plan is chosen by is the disaggregated model's (M/D/1 queueing mean +
prefill + KV transfer), in ``ttft_model_us``; ``ttft_p99_us`` is the p99 of a discrete-event run of
one prefill replica at its share of the rate (Poisson arrivals) plus the transfer, the statistic the
aggregated points report. A plan whose p99 misses the target is made again with a tighter mean
target (:func:`_plan_for_p99`), so a disaggregated point meets the TTFT target by its p99, as the
aggregated points do (``ttft_budget_ms``: the mean target it was made for). The two-pool mapping is
validated (:mod:`placer.mapping.validate_pools`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from placer.planning.requirements import Pools, Requirements, SolverSettings
from placer.specs.fleet import Fleet
from placer.specs.model import LayerGraph
from placer.specs.units import plural
from placer.specs.workload import Workload

if TYPE_CHECKING:
    from placer.planning.studies.frontier import FrontierGrid

__all__ = ["disagg_label", "disagg_points", "traffic_prompt"]


def traffic_prompt(model: LayerGraph, workload: Workload, req: Requirements, output_tokens: int) -> int:
    """The prompt tokens of the frontier's traffic (``req.traffic``, the one the aggregated points
    are simulated under; what it leaves open resolved as theirs is: the model spec's default
    traffic, else the standard prompt cut to fit the context), a distribution's or trace's mean,
    rounded: the prompt every disaggregated point's prefill pool is planned for."""
    from dataclasses import replace

    from placer.simulate.arguments import Traffic, resolve_lengths

    t = req.traffic or Traffic()
    if t.output_tokens is None and t.replay is None:
        t = replace(t, output_tokens=output_tokens)
    _, shapes = resolve_lengths(t, workload.context_tokens, getattr(model, "default_traffic", None) or {})
    return max(1, round(shapes.mean_context - shapes.mean_output))


def disagg_label(decode: Fleet, prefill: Fleet | None) -> str:
    """The frontier's platform name of a disaggregated plan: ``wse-3t disagg`` (both pools on one
    fleet) or ``wse-3t decode + b200 prefill``."""
    if prefill is None or prefill.name == decode.name:
        return f"{decode.name} disagg"
    return f"{decode.name} decode + {prefill.name} prefill"


def disagg_points(model: LayerGraph, fleets: Sequence[Fleet], workload: Workload, req: Requirements,
                  solver: SolverSettings, grid: FrontierGrid) -> tuple[list[dict], list[str]]:
    """(rows, notes): per fleet of ``fleets`` (the decode pool's), per prefill fleet (the same
    fleet, and ``grid.prefill_fleet`` when it is another one) and per speed of ``grid.speeds``,
    the disaggregated plan with the most requests/s (``maximize_rate``) under ``grid.max_ttft_ms``,
    generating ``grid.output_tokens`` per request. ``req`` carries the rest of what every pool is
    planned under (speculation, the prefix cache, a runtime's rules, degrees)."""
    from placer.mapping.validate import validate_mapping

    output_tokens, max_ttft_ms, prefill_fleet = grid.output_tokens, grid.max_ttft_ms, grid.prefill_fleet
    if output_tokens >= workload.context_tokens:
        from placer.specs.errors import ARGUMENT, InvalidSpec

        raise InvalidSpec(ARGUMENT, "output_tokens", f"must be below the context ({workload.context_tokens:,} "
                                                     "tokens) to leave a prompt")
    prompt = traffic_prompt(model, workload, req, output_tokens)
    rows: list[dict] = []
    notes: list[str] = []
    for fleet in fleets:
        pairs = [None] + ([prefill_fleet] if prefill_fleet is not None and prefill_fleet.name != fleet.name else [])
        for pf in pairs:
            label = disagg_label(fleet, pf)
            for floor in grid.speeds:
                targets = req.targets.replace(min_user_tps=float(floor), max_ttft_ms=max_ttft_ms,
                                              output_tokens=min(req.targets.output_tokens, output_tokens))
                want = req.replace(targets=targets, pools=Pools(prefill_fleet=pf, maximize_rate=True,
                                                                prompt_tokens=prompt, decode_tokens=output_tokens))
                dp, budget = _plan_for_p99(model, fleet, workload, want, solver, max_ttft_ms)
                c = dp.chosen
                if c is None:
                    notes.append(f"{label} at {floor:,.0f} tokens/s per user: {dp.message}")
                    continue
                p99 = _simulated_p99(dp, c)
                if p99 is not None and p99 > max_ttft_ms * 1e3:
                    notes.append(f"{label} at {floor:,.0f} tokens/s per user: no plan found whose simulated p99 TTFT "
                                 f"meets {max_ttft_ms:,.0f} ms ({p99 / 1e3:,.0f} ms at a mean target of "
                                 f"{budget:,.0f} ms); its point is kept, off the answers")
                problems = validate_mapping(dp.mapping, model=model)
                if problems:
                    notes.append(f"{label} at {floor:,.0f} tokens/s per user: the two-pool mapping fails validation "
                                 f"({problems[0].message}); its point is kept and marked invalid")
                verdict = dict(valid=not problems, ttft_p99_us=p99, meets_ttft=p99 is None or p99 <= max_ttft_ms * 1e3,
                               ttft_budget_ms=budget)
                row = _row(label, fleet, dp, floor, workload, output_tokens, verdict)
                rows.append({**row, **_priced(c, row["aggregate_tokens_per_s"]),
                             "traffic": _traffic_text(req, prompt, output_tokens, c.rate),
                             "error_band": getattr(c.decode_sim or c.decode.sim, "speed_error", None)})
    return rows, notes


P99_ROUNDS = 6      # re-plans with a tighter mean target until the simulated p99 meets the target


def _plan_for_p99(model, fleet, workload, want: Requirements, solver, max_ttft_ms: float):
    """(plan, the mean TTFT target it was made for): the plan for ``max_ttft_ms``, re-made with the
    mean target scaled by target / p99 while its prefill replica's simulated p99 TTFT (plus the
    transfer) exceeds it, so that its point stands on the statistic the aggregated points report."""
    from placer.planning.disagg import plan_disagg

    budget = max_ttft_ms
    dp = plan_disagg(model, fleet, workload, want, solver)
    for _ in range(P99_ROUNDS):
        c = dp.chosen
        p99 = None if c is None else _simulated_p99(dp, c)
        if p99 is None or p99 <= max_ttft_ms * 1e3:
            break
        tighter = budget * max_ttft_ms * 1e3 / p99 * 0.98
        again = plan_disagg(model, fleet, workload, want.replace(targets=want.targets.replace(max_ttft_ms=tighter)),
                            solver)
        if again.chosen is None:
            break                     # no tighter plan: keep the last one (its point is off the answers)
        dp, budget = again, tighter
    return dp, budget


def _row(label: str, fleet: Fleet, dp, floor: float, workload: Workload, output_tokens: int, verdict: dict) -> dict:
    """The frontier row of the plan ``dp`` (its chosen candidate) at ``floor``; ``verdict``: its
    validity, simulated p99 TTFT, whether that meets the target and the mean target it was made for."""
    c = dp.chosen
    tokens_per_s = c.rate * output_tokens
    power = c.power_w
    decode = dp.decode_solved or c.decode.solved
    inst = decode.instance
    return dict(platform=label, serving="disaggregated", tp=inst.tp, ep=inst.ep, devices=c.devices, replicas=1,
                target=None, live_per_replica=c.load * c.y, live_total=c.load * c.y,
                per_user_tokens_per_s=1e6 / c.tpot_us, aggregate_tokens_per_s=tokens_per_s, itl_p50_us=c.tpot_us,
                power_w=power, tokens_per_s_per_mw=None if not power else tokens_per_s / power * 1e6,
                tokens_per_s_per_device=tokens_per_s / c.devices,
                joules_per_token=None if not power else power / tokens_per_s,
                hop_latency_us=decode.result.hop_latency_us, valid=verdict["valid"], schedule="continuous",
                context_tokens=workload.context_tokens, route=" ".join(decode.mapping["route"]),
                ttft_p99_us=verdict["ttft_p99_us"], ttft_model_us=c.ttft_us, meets_ttft=verdict["meets_ttft"],
                ttft_budget_ms=verdict["ttft_budget_ms"], floor=floor, rate_per_s=c.rate,
                prefill_layout=f"{c.x} x {c.prefill.layout} ({dp.prefill_fleet.name}, {plural(c.prefill.devices, 'device')})",
                decode_layout=f"{c.y} x {c.decode.layout} ({fleet.name}, {plural(c.decode.devices, 'device')})",
                proven=dp.proven, spec_tokens=getattr(inst.speculation, "tokens", 0),
                spec_accept=getattr(inst.speculation, "accept", None),
                cached_prompt_tokens=inst.cached_prompt_tokens, power_boundary=fleet.power_boundary)


def _simulated_p99(dp, c) -> float | None:
    """p99 time to first token of the plan's prefill replica simulated at its share of the rate, plus
    the KV transfer (None when the run gave no figure)."""
    sim = dp.prefill_sim
    if sim is None or sim.ttft_p99_us is None:
        return None
    return sim.ttft_p99_us + c.transfer_us


def _priced(c, tokens_per_s: float) -> dict:
    """$/million tokens of a disaggregated candidate: every replica of both pools, each device at its
    own type's price (:func:`placer.planning.price.placement_price`), over the output tokens/s."""
    from placer.planning.price import placement_price, usd_per_million_tokens

    parts = [(n, placement_price(shape.solved.instance, shape.solved.per_group.assignment))
             for n, shape in ((c.x, c.prefill), (c.y, c.decode))]
    missing = [source for _n, (price, source) in parts if price is None]
    if missing:
        return dict(usd_per_million_tokens=None, price_source=missing[0])
    price = sum(n * p for n, (p, _s) in parts)
    return dict(usd_per_million_tokens=usd_per_million_tokens(price, tokens_per_s),
                price_source="; ".join(dict.fromkeys(s for _n, (_p, s) in parts)))


def _traffic_text(req: Requirements, prompt: int, output_tokens: int, rate: float) -> str:
    """The traffic of a disaggregated point, as its row's ``traffic`` states it (no ``traffic:``)."""
    from dataclasses import replace

    from placer.simulate.arguments import Traffic

    t = replace(req.traffic or Traffic(), prompt_tokens=prompt, output_tokens=output_tokens, replay=None,
                context=None, context_dist=None, arrival_rate=rate, closed_loop=False)
    return t.describe().removeprefix("traffic: ")
