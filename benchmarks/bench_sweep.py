"""A 500-point sweep of kimi-k3 on wse-3t, in worker processes and (when Ray is installed) on Ray.

    python benchmarks/bench_sweep.py                    # processes, then Ray if importable
    python benchmarks/bench_sweep.py --backend process  # processes only
    python benchmarks/bench_sweep.py --backend ray      # Ray only (local cluster of --workers CPUs)
    python benchmarks/bench_sweep.py --compare /tmp/placer-bench-sweep/process.csv /tmp/placer-bench-sweep/ray.csv

Grid: 5 contexts x 25 concurrencies x 2 modes (contiguous: exact DP; free: CP-SAT) x 2 KV
precisions = 500 points. Goal: under 10 minutes on a 2-core machine. With both backends the rows
must be identical apart from timings; the script says which differ.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from placer import load_fleet, load_model, workload_for
from placer.planning.studies.sweep import Grid, SweepSettings, read_rows, run_sweep
from placer.specs.units import parse_tokens

CONTEXTS = tuple(parse_tokens(x) for x in ("32k", "64k", "128k", "256k", "1M"))
CONCURRENCIES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 75, 96, 128, 160, 184, 192, 256, 320, 384, 512,
                 640, 768, 1024)
GRID = Grid(contexts=CONTEXTS, concurrencies=CONCURRENCIES, modes=("contiguous", "free"), kv_bits=(8, 16))
_TIMING = ("seconds",)


def run(backend: str, out: Path, workers: int, time_limit: float, simulate: bool) -> dict:
    model = load_model("kimi-k3")
    fleet = load_fleet("wse-3t")
    settings = SweepSettings(time_limit=time_limit, seed=0, simulate=simulate, base_workload=workload_for(model))
    if out.exists():
        out.unlink()
    if backend == "ray":
        import ray

        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    t0 = time.perf_counter()
    try:
        report = run_sweep(model, fleet, GRID, settings, out=out, jobs=workers, backend=backend)
    finally:
        if backend == "ray":
            import ray

            ray.shutdown()
    wall = time.perf_counter() - t0
    rows = report.rows
    return {"backend": backend, "points": len(rows), "wall_s": round(wall, 1), "workers": workers,
            "status": dict(Counter(r["status"] for r in rows)),
            "proven": sum(bool(r["proven_optimal"]) for r in rows),
            "pareto": sum(bool(r["pareto"]) for r in rows),
            "solve_s_by_mode": {m: round(sum(r["seconds"] for r in rows if r["mode"] == m), 1)
                                for m in GRID.modes},
            "rows": rows}


def compare(a: list[dict], b: list[dict]) -> list[str]:
    """Differences between two sweeps' rows, timings aside."""
    diffs = []
    if len(a) != len(b):
        diffs.append(f"{len(a)} rows against {len(b)}")
    for ra, rb in zip(a, b):
        for k in ra:
            if k not in _TIMING and ra[k] != rb.get(k):
                diffs.append(f"{ra['mode']} ctx={ra['context_tokens']} kv={ra['kv_bits']} c={ra['concurrency']}: "
                             f"{k} {ra[k]!r} != {rb.get(k)!r}")
    return diffs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["process", "ray", "both"], default="both")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--time-limit", type=float, default=30.0, help="CP-SAT seconds per point")
    p.add_argument("--simulate", action="store_true", help="also simulate every placed point")
    p.add_argument("--out", type=Path, default=Path("/tmp/placer-bench-sweep"))
    p.add_argument("--compare", nargs=2, type=Path, metavar="CSV",
                   help="only compare two results files (e.g. process.csv ray.csv) and exit")
    args = p.parse_args(argv)
    if args.compare:
        diffs = compare(read_rows(args.compare[0]), read_rows(args.compare[1]))
        print(json.dumps({"identical": not diffs, "differences": diffs[:20], "n_differences": len(diffs)}))
        return 0 if not diffs else 1
    args.out.mkdir(parents=True, exist_ok=True)
    backends = ["process", "ray"] if args.backend == "both" else [args.backend]
    if "ray" in backends:
        try:
            import ray  # noqa: F401
        except ImportError:
            print("Ray is not installed: skipping the Ray run (pip install 'placer[ray]')", file=sys.stderr)
            backends.remove("ray")
    results = {}
    for backend in backends:
        res = run(backend, args.out / f"{backend}.csv", args.workers, args.time_limit, args.simulate)
        results[backend] = res
        print(json.dumps({k: v for k, v in res.items() if k != "rows"}))
        sys.stdout.flush()
    if len(results) == 2:
        diffs = compare(results["process"]["rows"], results["ray"]["rows"])
        print(json.dumps({"identical": not diffs, "differences": diffs[:20], "n_differences": len(diffs)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
