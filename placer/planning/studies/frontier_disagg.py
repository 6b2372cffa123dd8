"""Disaggregated points of a speed frontier: for each decode fleet, prefill fleet and speed floor,
the disaggregated plan (:func:`placer.planning.disagg.plan_disagg`) serving the most requests/s
the fleets hold under the floor's TPOT and the TTFT target, as one frontier row.

A row's figures are the whole plan's: every device of both pools, their power, the decode pool's
simulated per-user speed at its load (``1 / TPOT``), and the output tokens/s the rate gives
(``rate x output tokens``). The workload is the aggregated points': requests of the workload's
context, of which the last ``output_tokens`` are generated, so both kinds of point serve the same
requests. The TTFT the plan is chosen by is the disaggregated model's (M/D/1 queueing mean +
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

__all__ = ["disagg_label", "disagg_points"]


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
    prompt = workload.context_tokens - output_tokens
    if prompt < 1:
        from placer.specs.errors import ARGUMENT, InvalidSpec

        raise InvalidSpec(ARGUMENT, "output_tokens", f"must be below the context ({workload.context_tokens:,} "
                                                     "tokens) to leave a prompt")
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
                rows.append(_row(label, fleet, dp, floor, workload, output_tokens, verdict))
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
