"""``placer compare --disagg``: every pipeline method on each pool of a disaggregated plan.

The plan (:func:`placer.planning.disagg.plan_disagg`) chooses the pools' layouts and the
concurrency each replica is placed for; each pool's instance is then placed again by every
method that places contiguous stages (greedy next-fit, pathwalk, the exact DP, CP-SAT), as
``placer compare`` does for one pool, so the heuristics' device counts stand beside the proven
ones for the prefill replica and for the decode replica, and the plan's device total follows for
each method (``x`` prefill and ``y`` decode replicas, as the plan chose them).
"""

from __future__ import annotations

from time import perf_counter

from placer.planning.requirements import Requirements, SolverSettings
from placer.planning.solve import place_instance
from placer.planning.studies.compare import COMPARE_ROWS, row_of
from placer.specs.fleet import Fleet
from placer.specs.model import LayerGraph
from placer.specs.workload import Workload

__all__ = ["POOL_METHODS", "compare_pools", "pools_traffic"]

# the methods that place pipeline (contiguous) stages, in compare's order
POOL_METHODS = tuple(method for method, mode in COMPARE_ROWS if mode == "contiguous" and method != "bound")


def compare_pools(model: LayerGraph, fleet: Fleet, workload: Workload, req: Requirements, solver: SolverSettings,
                  *, progress=None) -> dict:
    """``{"plan": the disaggregated plan's figures, "pools": [row, ...]}``: one row per pool and
    method of :data:`POOL_METHODS` (``pool``, ``replicas``, the method's devices per replica in
    devices, and ``plan_devices``: every replica of both pools with this pool placed by the
    method). No rows when the plan meets no target (its message says why)."""
    from placer.planning.disagg import plan_disagg

    dp = plan_disagg(model, fleet, workload, req, solver)
    doc: dict = {"plan": dp.to_dict(), "pools": [],
                 "traffic": pools_traffic(dp, req).to_dict("the live decode requests")}
    c = dp.chosen
    if c is None:
        return doc
    # the calibration's error band of the plan's TPOT (its decode run) and TTFT (its prefill replica's run)
    doc["plan"].update(error_band=getattr(c.decode_sim or c.decode.sim, "speed_error", None),
                       prefill_error_band=getattr(dp.prefill_sim, "speed_error", None))
    pools = (("prefill", c.prefill.solved, c.x), ("decode", dp.decode_solved or c.decode.solved, c.y))
    chosen_devices = {"prefill": c.x * c.prefill.devices, "decode": c.y * c.decode.devices}
    for pool, solved, replicas in pools:
        inst = solved.instance
        for method in POOL_METHODS:
            if progress is not None:
                progress(pool, method)
            t0 = perf_counter()
            raw = place_instance(inst, solver, method=method, reports=False, keep_interrupted=False).per_group
            raw = raw.replace(seconds=max(raw.seconds, perf_counter() - t0))
            row = row_of(raw, pool=pool, replicas=replicas, tp=inst.tp, layout=_layout(inst))
            used = None if not raw.feasible else raw.devices_used * inst.tp
            row["devices_per_replica"] = used
            other = sum(v for k, v in chosen_devices.items() if k != pool)
            row["plan_devices"] = None if used is None else other + replicas * used
            doc["pools"].append(row)
    return doc


def _layout(inst) -> str:
    from placer.planning.layouts import layout_label

    return layout_label(inst.tp, inst.ep, inst.attention_dp)


def pools_traffic(dp, req: Requirements):
    """The traffic a disaggregated plan ``dp`` serves (its requirements ``req``): its rate (or decode
    load), prompt and output tokens and the prefix-cache hit."""
    from dataclasses import replace

    from placer.simulate.arguments import Traffic

    base = req.traffic or Traffic()
    return replace(base, prompt_tokens=dp.prompt_tokens, output_tokens=dp.decode_tokens,
                   cached_prompt_tokens=base.cached_prompt_tokens if base.cached_share is not None
                   else req.targets.cached_prompt_tokens,
                   arrival_rate=dp.rate, max_live=None if dp.rate is not None else dp.concurrency)
