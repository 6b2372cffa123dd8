"""The 80 Falkenauer "u" bin-packing instances of OR-Library (binpack1-4: 20 each of 120, 250, 500
and 1,000 items, capacity 150) through placer's free mode, every level proven.

    PYTHONPATH=. python benchmarks/bench_falkenauer.py [--data DIR] [--time-limit 60] [--threads 2] [--json]

Each item of size s becomes a layer of s x 10^8 bytes, each bin a device of 150 x 10^8 bytes, all
in one rack whose links cost 0 us (the instance of issue 10, item 7: hop latency is trivially 0,
and the solver must not spend its budget proving it). The default objective is solved (devices,
then guaranteed concurrency, skipped here since no layer holds per-request bytes, then latency).
Reports per instance: devices, the file's best known count, proven, wall seconds; then the total.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from placer.algorithms import place
from placer.problem.instance import make_instance
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

DATA = Path("/work/shared/data/orlib-binpack")
UNIT = 10**8


def read_orlib(path: Path):
    """(name, capacity, best known, sizes) per problem of an OR-Library binpack file."""
    tokens = path.read_text().split()
    k = 0
    count = int(tokens[k])
    k += 1
    for _ in range(count):
        name = tokens[k]
        cap, n, best = int(tokens[k + 1]), int(tokens[k + 2]), int(tokens[k + 3])
        sizes = [int(x) for x in tokens[k + 4:k + 4 + n]]
        k += 4 + n
        yield name, cap, best, sizes


def instance(sizes, cap):
    layers = [{"kind": "linear_attention", "weight_bytes": s * UNIT, "state_bytes_per_request": 1} for s in sizes]
    model = model_from_dict({"name": "items", "layers": layers})
    fleet = fleet_from_dict({"name": "bins", "device": {"memory": cap * UNIT},
                             "fleet": {"racks": 1, "per_rack": len(sizes) // 2 + 8, "intra_rack_latency_us": 0}})
    return make_instance(model, fleet, Workload(concurrency=0, context_tokens=1), mode="free")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    total, proven, rows = 0.0, 0, 0
    for k in range(1, 5):
        for name, cap, best, sizes in read_orlib(args.data / f"binpack{k}.txt"):
            inst = instance(sizes, cap)
            t0 = time.perf_counter()
            r = place(inst, "cpsat", time_limit=args.time_limit, seed=args.seed, threads=args.threads)
            wall = time.perf_counter() - t0
            total += wall
            rows += 1
            proven += bool(r.proven_optimal)
            row = dict(name=name, items=len(sizes), devices=r.devices_used, best_known=best,
                       proven=r.proven_optimal, latency_us=r.hop_latency_us, seconds=round(wall, 2))
            print(json.dumps(row) if args.json else
                  f"{name:<10} {len(sizes):>5} items  devices {r.devices_used:>4} (file {best:>4})  "
                  f"{'proven' if r.proven_optimal else 'NOT proven':<10} {wall:7.2f} s", flush=True)
    print(f"total: {rows} instances, {proven} proven, {total:.1f} s wall", flush=True)
    return 0 if proven == rows else 1


if __name__ == "__main__":
    sys.exit(main())
