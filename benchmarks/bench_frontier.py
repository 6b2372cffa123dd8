"""A ~300-point speed frontier simulated by the fast path and by the event run, in one run.

    python benchmarks/bench_frontier.py [--model M] [--hardware A,B] [--context 8k] [--jobs N]

Runs :func:`placer.planning.studies.frontier.speed_frontier` twice on the same inputs (default
llama-3.1-70b on h200, wse-3 and wse-3t at 8k: about 317 points), once with ``sim="fast"``
(:mod:`placer.simulate.steady`) and once with ``sim="exact"`` (every point an event run), in this
process by default (``--jobs 1``) so that both are timed alike. Prints each run's wall and CPU time
and their ratio (the issue's goal: at least 5x), the fast path's largest and mean relative error
against the event run over the points (per-user tokens/s, tokens/s per MW), how many points the
fast path covered, and whether both runs give the same Pareto sets and the same answer sentences.
No figure here is asserted: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from placer import load_fleet, load_model, workload_for  # noqa: E402
from placer.planning import Placement, Requirements, SolverSettings, Targets  # noqa: E402
from placer.planning.studies.frontier import FrontierGrid, speed_frontier  # noqa: E402

KEY = ("platform", "tp", "ep", "attention_dp", "devices", "target", "live_per_replica")


def run(args, sim: str):
    model = load_model(args.model)
    fleets = [load_fleet(h) for h in args.hardware.split(",")]
    wl = workload_for(model, context=args.context)
    req = Requirements(Placement(mode="contiguous"), Targets())
    grid = FrontierGrid(speeds=tuple(float(x) for x in args.speeds.split(",")), output_tokens=args.output_tokens,
                        sim=sim)
    wall, cpu = time.perf_counter(), time.process_time()
    rep = speed_frontier(model, fleets, wl, req, SolverSettings(threads=1), grid, jobs=args.jobs)
    return rep, time.perf_counter() - wall, time.process_time() - cpu


def errors(fast_rows, exact_rows, field: str) -> list[float]:
    exact = {tuple(r[k] for k in KEY): r for r in exact_rows}
    out = []
    for r in fast_rows:
        e = exact.get(tuple(r[k] for k in KEY))
        if e is not None and e[field] and r[field] is not None:
            out.append(abs(r[field] - e[field]) / e[field])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama-3.1-70b")
    p.add_argument("--hardware", default="h200,wse-3,wse-3t")
    p.add_argument("--context", default="8k")
    p.add_argument("--speeds", default="1000,100")
    p.add_argument("--output-tokens", type=int, default=16)
    p.add_argument("--jobs", type=int, default=1)
    args = p.parse_args(argv)
    fast, fast_wall, fast_cpu = run(args, "fast")
    exact, exact_wall, exact_cpu = run(args, "exact")
    n = len(exact.rows)
    covered = sum(1 for r in fast.rows if r.get("sim") == "steady")
    print(f"{args.model} on {args.hardware} at {args.context}: {n} points ({covered} by the fast path, the rest "
          f"by the event run where the fast path does not model the run)")
    print(f"event run: {exact_wall:7.1f} s wall, {exact_cpu:7.1f} s CPU (this process; --jobs {args.jobs})")
    print(f"fast path: {fast_wall:7.1f} s wall, {fast_cpu:7.1f} s CPU")
    print(f"ratio: {exact_wall / fast_wall:.1f}x wall, {exact_cpu / fast_cpu:.1f}x CPU (goal: at least 5x)")
    for field in ("per_user_tokens_per_s", "tokens_per_s_per_mw"):
        errs = errors(fast.rows, exact.rows, field)
        print(f"{field}: largest error {100 * max(errs, default=0):.4f}%, mean {100 * sum(errs) / max(1, len(errs)):.4f}% "
              f"over {len(errs)} points")
    same = [tuple(r[k] for k in KEY) for r in fast.rows if r["pareto"]] == \
        [tuple(r[k] for k in KEY) for r in exact.rows if r["pareto"]]
    print(f"same Pareto sets: {'yes' if same else 'no'}; same answers: {'yes' if fast.sentences == exact.sentences else 'no'}")
    for a, b in zip(fast.sentences, exact.sentences):
        if a != b:
            print(f"  fast:  {a}\n  event: {b}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
