"""CP-SAT placement benchmarks: the published kimi-k3 example, a heterogeneous 42-device fleet with
80-layer models, and Falkenauer-like bin packing in free mode.

    python benchmarks/bench_cpsat.py                    # every suite
    python benchmarks/bench_cpsat.py kimi hetero        # some suites
    python benchmarks/bench_cpsat.py binpack --seeds 0 1 2 --time-limit 60
    python benchmarks/bench_cpsat.py sparse             # irregular fleets: no structure to exploit
    python benchmarks/bench_cpsat.py kimi-seeds --seeds 0 1 2 3 4   # free mode at 184 and 76 requests

Each row: the instance, mode and objective levels solved, status, devices (bound), hop latency
(bound), whether every level is proven, wall seconds of the whole ``cpsat`` call (model building
included; instance setup excluded) and CP-SAT's deterministic time summed over phases. Goals
(issue 3): kimi contiguous < 5 s, kimi free < 10 s, heterogeneous 42 devices x 80 layers < 30 s,
bin packing 120-1,000 items < 10 s each, all proven.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generators import (  # noqa: E402
    binpacking_instance,
    falkenauer_triplets,
    falkenauer_uniform,
    sparse_fleet_instance,
)

from placer.algorithms import place  # noqa: E402
from placer.problem.instance import make_instance  # noqa: E402
from placer.specs.fleet import load_fleet  # noqa: E402
from placer.specs.model import load_model  # noqa: E402
from placer.specs.workload import workload_for  # noqa: E402

HETERO = str(Path(__file__).resolve().parent / "data" / "hetero-42.yaml")


def run(name: str, inst, *, objective: str, time_limit: float, seed: int, threads: int, extra=None) -> dict:
    t0 = time.perf_counter()
    r = place(inst, "cpsat", time_limit=time_limit, seed=seed, threads=threads, objective=objective)
    wall = time.perf_counter() - t0
    lat = r.level("latency")
    row = dict(name=name, mode=inst.mode, objective=objective, nodes=inst.n_nodes, devices_in_fleet=inst.n_devices,
               status=str(r.status), devices=r.devices_used, device_bound=r.bound,
               latency_us=r.hop_latency_us if objective != "devices" else None,
               latency_bound_us=None if lat is None else lat.bound, proven=r.proven_optimal, seconds=round(wall, 2),
               det_time=round(sum(p.get("deterministic_time", 0.0) or 0.0 for p in r.stats.get("phases", [])), 3),
               strategy=r.stats.get("strategy"), seed=seed, threads=threads, message=r.message)
    row.update(extra or {})
    return row


def kimi(args):
    model = load_model("kimi-k3")
    fleet = load_fleet("wse-3t")
    wl = workload_for(model)
    for mode, objective, gran in [("contiguous", "lex", "layer"), ("free", "devices", "layer"),
                                  ("free", "lex", "layer"), ("split", "lex", "shards:2")]:
        inst = make_instance(model, fleet, wl, mode=mode, granularity=gran)
        yield run(f"kimi-k3/wse-3t {gran}", inst, objective=objective, time_limit=args.time_limit,
                  seed=args.seeds[0], threads=args.threads)


def kimi_seeds(args):
    """kimi-k3 on wse-3t, free mode, devices then hop latency, at 184 and 76 live requests, per seed."""
    model = load_model("kimi-k3")
    fleet = load_fleet("wse-3t")
    for concurrency in (184, 76):
        wl = workload_for(model, concurrency=concurrency)
        inst = make_instance(model, fleet, wl, mode="free")
        for seed in args.seeds:
            yield run(f"kimi-k3/wse-3t free x{concurrency}", inst, objective="lex", time_limit=args.time_limit,
                      seed=seed, threads=args.threads, extra=dict(concurrency=concurrency))


def hetero(args):
    fleet = load_fleet(HETERO)
    cases = [("minimax-text-01", "1M", 32), ("llama-3.1-70b", "128k", 64)]
    for name, context, concurrency in cases:
        model = load_model(name)
        wl = workload_for(model, context=context, concurrency=concurrency)
        for mode, objective in [("contiguous", "lex"), ("free", "devices")]:
            inst = make_instance(model, fleet, wl, mode=mode)
            for seed in args.seeds:
                yield run(f"{name} {context}x{concurrency} / hetero-42", inst, objective=objective,
                          time_limit=args.time_limit, seed=seed, threads=args.threads)


def binpack(args):
    sets = [("u", n) for n in (120, 250, 500, 1000)] + [("t", n) for n in (60, 120, 249)]
    for kind, n in sets:
        for seed in args.seeds:
            sizes, cap = falkenauer_uniform(n, seed) if kind == "u" else falkenauer_triplets(n, seed)
            inst = binpacking_instance(sizes, cap, devices=int(0.6 * n) + 8)
            extra = dict(distinct_sizes=len(set(sizes)), known_optimum=n // 3 if kind == "t" else None)
            yield run(f"{kind}{n}", inst, objective="devices", time_limit=args.time_limit, seed=seed,
                      threads=args.threads, extra=extra)


def sparse(args):
    for racks, layers in [(8, 30), (12, 40), (14, 80)]:
        if args.quick and layers > 40:
            continue
        for seed in args.seeds:
            inst = sparse_fleet_instance(racks, layers, seed)
            yield run(f"random {layers} layers / sparse {3 * racks}", inst, objective="lex",
                      time_limit=args.time_limit, seed=seed, threads=args.threads)


SUITES = {"kimi": kimi, "kimi-seeds": kimi_seeds, "hetero": hetero, "binpack": binpack, "sparse": sparse}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suites", nargs="*", default=list(SUITES), choices=list(SUITES))
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    ap.add_argument("--quick", action="store_true", help="skip the largest sparse instances")
    args = ap.parse_args(argv)
    if not args.json:
        print("| instance | mode | objective | seed | status | devices (bound) | latency us (bound) | proven "
              "| s | det |")
        print("|---|---|---|---|---|---|---|---|---|---|")
    for suite in args.suites:
        for row in SUITES[suite](args):
            if args.json:
                print(json.dumps(row), flush=True)
                continue
            lat = "-" if row["latency_us"] is None else f"{row['latency_us']:g} ({row['latency_bound_us']:g})" \
                if row["latency_bound_us"] is not None else f"{row['latency_us']:g}"
            extra = f" [{row['distinct_sizes']} sizes]" if "distinct_sizes" in row else ""
            print(f"| {row['name']}{extra} | {row['mode']} | {row['objective']} | {row['seed']} | {row['status']} "
                  f"| {row['devices']} ({row['device_bound']:g}) | {lat} | {row['proven']} | {row['seconds']} "
                  f"| {row['det_time']} |", flush=True)


if __name__ == "__main__":
    main()
