"""Every mode's placement of one model, simulated side by side.

The published Kimi K3 recipe counts wafers by layer type and leaves open what an executable
pipeline gives: :func:`compare_modes` places the model in each mode (``contiguous``, ``free``,
``split``) with :func:`placer.algorithms.place`, then simulates each placement twice: one request
alone (the per-user speed a single user sees) and at the placement's concurrency ceiling (per-user
and aggregate speed, power and tokens/s per MW with every KV slot in use).
"""

from __future__ import annotations

from placer.algorithms import MODES_OF
from placer.algorithms.deadline import interrupt_scope, interrupted
from placer.planning.requirements import FALLBACK_METHOD, Requirements, SolverSettings
from placer.planning.solve import build_instance, place_instance
from placer.problem.instance import MODES
from placer.simulate.arguments import study_traffic
from placer.simulate.des import simulate, split_options
from placer.specs.fleet import Fleet
from placer.specs.model import LayerGraph
from placer.specs.workload import Workload

__all__ = ["compare_modes", "FALLBACK_METHOD"]


def compare_modes(model: LayerGraph, fleet: Fleet, workload: Workload, requirements: Requirements | None = None,
                  solver: SolverSettings | None = None, *, modes=MODES, output_tokens: int = 16, **sim) -> dict:
    """Place and simulate ``model`` on ``fleet`` in each of ``modes``; one row per mode.

    Split mode refines the model at the requirements' granularity (default
    :data:`placer.planning.requirements.SPLIT_GRANULARITY`); the mode is each row's. ``solver``:
    the method (a mode it does not place in uses
    :data:`~placer.planning.requirements.FALLBACK_METHOD`), time limit and seed (the simulations'
    too); ``sim`` goes to :func:`simulate` for the loaded run (``micro_batch``, ``context_dist``,
    ``max_live``, ...). A mode with no placement gets a row with its status and the reason. After
    Ctrl-C the rows so far come back (the interrupted mode's with its best placement so far) with
    ``"interrupted": True``.
    """
    with interrupt_scope():     # a Ctrl-C in one mode's solve stays set until the loop has seen it
        return _compare_modes(model, fleet, workload, requirements or Requirements(), solver or SolverSettings(),
                              modes, output_tokens, sim)


# the loaded run's figures a row reports
LOADED_FIGURES = ("segments", "live_requests", "per_user_tokens_per_s", "aggregate_tokens_per_s", "itl_p50_us",
                  "itl_p99_us", "ttft_p50_us", "ttft_p99_us", "bubble_fraction", "pipeline_bound_tokens_per_s",
                  "power_w", "tokens_per_s_per_mw", "joules_per_token", "schedule", "batch_mean", "speed_error")


def _compare_modes(model, fleet, workload, req: Requirements, solver: SolverSettings, modes, output_tokens,
                   sim) -> dict:
    rows = []
    stopped = False
    method, seed = solver.method or "cpsat", solver.seed
    for mode in modes:
        if interrupted():
            stopped = True
            break
        m = method if mode in MODES_OF.get(method, ()) else FALLBACK_METHOD[mode]
        # the refinement applies to split mode
        placement = req.placement.replace(mode=mode,
                                          granularity=req.placement.granularity if mode == "split" else None)
        inst = build_instance(model, fleet, workload, req.replace(placement=placement), method=m)
        res = place_instance(inst, solver.replace(method=m), reports=False).per_group
        row = dict(mode=mode, method=m, status=str(res.status), devices_used=res.devices_used, hops=res.hops,
                   hop_latency_us=res.hop_latency_us, concurrency_ceiling=res.concurrency_ceiling,
                   proven_optimal=res.proven_optimal, granularity=inst.model.granularity)
        if not res.feasible:
            row["message"] = res.message
            rows.append(row)
            if res.interrupted:
                stopped = True
                break
            continue
        alone = simulate(inst, res.assignment, *split_options(
            requests=1, output_tokens=output_tokens, seed=seed,
            **{k: sim[k] for k in ("micro_batch", "schedule", "max_batch", "runtime", "decode_only",
                                   "max_num_batched_tokens", "prompt_tokens", "cached_prompt_tokens", "cached_share",
                                   "context_dist") if k in sim}))
        loaded = simulate(inst, res.assignment, *split_options(output_tokens=output_tokens, seed=seed, **sim))
        row.update(single_user_tokens_per_s=alone.per_user_tokens_per_s,
                   unloaded_token_latency_us=alone.unloaded_token_latency_us)
        row.update({k: getattr(loaded, k) for k in LOADED_FIGURES})
        row["single_user_tokens_per_s_per_mw"] = (alone.aggregate_tokens_per_s / (alone.power_w / 1e6)
                                                  if alone.power_w else None)
        rows.append(row)
        if res.interrupted:
            stopped = True
            break
    schedule = sim.get("schedule") or ("micro-batch" if sim.get("micro_batch") is not None else "continuous")
    return dict(model=model.name, hardware=fleet.name, workload=workload.to_dict(), schedule=schedule,
                micro_batch=sim.get("micro_batch") or workload.micro_batch, max_batch=sim.get("max_batch"),
                output_tokens=output_tokens, traffic=study_traffic(workload.context_tokens, output_tokens, sim, model).to_dict("each mode's live cap"),
                power_boundary=fleet.power_boundary, pue=fleet.pue, rows=rows,
                **({"interrupted": True} if stopped else {}))
