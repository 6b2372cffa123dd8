"""Per-stage tensor-parallel degrees on a 4-type mixed GPU fleet, against the best uniform degree.

    python benchmarks/bench_perstage.py                         # llama-3.1-405b and deepseek-v3, 60 s
    python benchmarks/bench_perstage.py --models deepseek-v3 --time-limit 30

Fleet: ``benchmarks/data/mixed-4type.yaml`` (2 A100 and 2 H100 nodes of 8, 1 H200 node of 8, 1 B200
node of 4). For each model and workload: ``--per-stage-tp`` (one CP-SAT model, the degree chosen
per stage from 1, 2, 4, 8) within the time limit, then every uniform degree (the reduction, one
solve per degree, each with the whole time limit). Each row: GPUs and their lower bound, the gap
(GPUs - bound) / GPUs, stages, the concurrency ceiling, hop latency, whether every level is
proven, the degrees of the stages, the wall seconds (instance building included) and the levels
left unproven with their bounds.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from placer.planning import Placement, Requirements, SolverSettings, Targets, search_layouts
from placer.planning.stage_degrees import solve_per_stage
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import workload_for

FLEET = Path(__file__).parent / "data" / "mixed-4type.yaml"
# (model, context, concurrency): None keeps the model's default workload
CASES = {"llama-3.1-405b": ("128k", 16), "deepseek-v3": (None, None)}


def _row(label, r, degrees, seconds, stages):
    gap = "-" if r.devices_used is None or r.lower_bound_devices is None else \
        f"{(r.devices_used - r.lower_bound_devices) / r.devices_used:.1%}"
    lat = "-" if r.hop_latency_us is None else f"{r.hop_latency_us:g}"
    open_levels = ", ".join(f"{lv.name} bound {'-' if lv.bound is None else f'{lv.bound:g}'}"
                            for lv in r.levels if not lv.proven)
    return (f"{label:<16} {str(r.devices_used):>5} {str(r.lower_bound_devices):>5} {gap:>6} "
            f"{str(stages):>6} {str(r.concurrency_ceiling):>7} {lat:>6} "
            f"{'yes' if r.proven_optimal else 'no':>6} {degrees:<14} {seconds:>6.1f}"
            + (f"  (not proven: {open_levels})" if open_levels else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(CASES))
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    fleet = load_fleet(FLEET)
    for name in args.models:
        model = load_model(name)
        context, concurrency = CASES.get(name, (None, None))
        wl = workload_for(model, context=context, concurrency=concurrency)
        print(f"{name}: context {wl.context_tokens:,} tokens, concurrency {wl.concurrency}, "
              f"{wl.weight_bits}-bit weights, on {fleet.name} ({len(fleet.devices)} GPUs)")
        print(f"{'plan':<16} {'GPUs':>5} {'bound':>5} {'gap':>6} {'stages':>6} {'ceiling':>7} {'hop us':>6} "
              f"{'proven':>6} {'degrees':<14} {'s':>6}")
        t0 = time.perf_counter()
        s = solve_per_stage(model, fleet, wl, Requirements(placement=Placement(degrees=[1, 2, 4, 8])),
                            SolverSettings(time_limit=args.time_limit, threads=args.threads))
        dt = time.perf_counter() - t0
        degrees = "-" if s.mapping is None else ",".join(str(st.get("group", {}).get("tp", 1))
                                                         for st in s.mapping["stages"])
        print(_row("per-stage", s.result, degrees, dt, "-" if s.mapping is None else len(s.mapping["stages"])),
              flush=True)
        for g in (1, 2, 4, 8):
            t0 = time.perf_counter()
            req = Requirements(placement=Placement(degrees=[g], attention_dp=False), targets=Targets(objective="lex"))
            search = search_layouts(model, fleet, wl, req, SolverSettings(time_limit=args.time_limit,
                                                                          threads=args.threads))
            dt = time.perf_counter() - t0
            r = search.best.result
            stages = "-" if not r.feasible else search.best.stages
            print(_row(f"uniform tp {g}", r, "-" if not r.feasible else f"{g} x {stages}", dt, stages), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
