"""Device-group benchmarks: MoE models on 64 H200 at tensor-parallel degrees 1, 2, 4, 8 with and
without expert parallelism, each degree solved by the reduction (groups of tp GPUs of one node as
super-devices, per-rank bytes) and proven per degree.

    python benchmarks/bench_groups.py                      # deepseek-v3 and qwen3-235b, 64 H200
    python benchmarks/bench_groups.py --models qwen3-235b --time-limit 30

Each row: model, degree, EP, devices (GPUs = stages x tp) and lower bound, stages, concurrency
ceiling, hop latency, whether the device count and every level are proven, and the wall seconds
of that degree's solve (instance building, bounds, CP-SAT, exact re-check). Goal (issue 14):
every degree proven, under 10 s each.
"""

from __future__ import annotations

import argparse
import time

from placer.planning import Requirements, SolverSettings, build_instance, place_instance
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import workload_for


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["deepseek-v3", "qwen3-235b"])
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--racks", type=int, default=8, help="nodes of 8 GPUs (default 8: 64 GPUs)")
    ap.add_argument("--degrees", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    fleet = load_fleet(args.hardware, racks=args.racks)
    print(f"{'model':<12} {'tp':>3} {'ep':>3} {'GPUs':>5} {'bound':>5} {'stages':>6} {'ceiling':>7} "
          f"{'hop us':>7} {'devices':>8} {'all':>6} {'s':>6}")
    for name in args.models:
        model = load_model(name)
        wl = workload_for(model)
        for ep in (False, True):
            for tp in args.degrees:
                t0 = time.perf_counter()
                solved = place_instance(build_instance(model, fleet, wl, Requirements(), tp=tp, ep=ep),
                                        SolverSettings(time_limit=args.time_limit, threads=args.threads))
                dt = time.perf_counter() - t0
                r = solved.result
                stages = "-" if solved.stages is None else solved.stages
                print(f"{name:<12} {tp:>3} {'yes' if ep else 'no':>3} {str(r.devices_used):>5} "
                      f"{str(r.lower_bound_devices):>5} {str(stages):>6} {str(r.concurrency_ceiling):>7} "
                      f"{'-' if r.hop_latency_us is None else f'{r.hop_latency_us:g}':>7} "
                      f"{'proven' if r.devices_proven else 'no':>8} {'proven' if r.proven_optimal else 'no':>6} "
                      f"{dt:>6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
