"""Scale: a split-granularity kimi-k3 on a 128-wafer fleet, and the chain DP on a 100,000-layer chain.

    python benchmarks/bench_scale.py              # both
    python benchmarks/bench_scale.py split        # kimi-k3 shards:32 (2,976 nodes), 128 wafers, CP-SAT
    python benchmarks/bench_scale.py chain        # exact chain DP, 100,000 layers

Goals: the split instance reaches a placement with a proven gap of at most 1 % within 60 s; the
chain DP places 100,000 layers in under 1 s. Setup (building the model, fleet and instance) is
timed apart from solving.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from placer import load_fleet, load_model, make_instance, workload_for
from placer.algorithms import place
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload


def bench_split(time_limit: float = 60.0, shards: int = 32, threads: int | None = None) -> dict:
    """kimi-k3 at the published workload (256k, 184 live requests), every layer cut in ``shards``,
    on 43 CS-4 systems less one wafer (128 wafers)."""
    t0 = time.perf_counter()
    model = load_model("kimi-k3")
    fleet = load_fleet("wse-3t", racks=43)
    fleet = fleet.without([fleet.devices[-1].id])
    inst = make_instance(model, fleet, workload_for(model), mode="split", granularity=f"shards:{shards}")
    _ = inst.demand_bytes, inst.latency_us, inst.link_us
    setup = time.perf_counter() - t0
    out = {"benchmark": "split", "nodes": inst.n_nodes, "devices": inst.n_devices, "setup_s": round(setup, 2),
           "runs": []}
    opts = {"time_limit": time_limit}
    if threads:
        opts["workers"] = threads
    for method, kw in (("dp", {}), ("cpsat", opts)):
        t = time.perf_counter()
        r = place(inst, method=method, **kw)
        wall = time.perf_counter() - t
        lb = r.lower_bound_devices
        bound = max(lb or 0, int(-(-(r.bound or 0) // 1)))
        gap = None if r.devices_used is None or not bound else (r.devices_used - bound) / r.devices_used
        out["runs"].append({"method": method, "status": str(r.status), "devices": r.devices_used,
                            "bound": bound, "gap": None if gap is None else round(gap, 4),
                            "proven_optimal": r.proven_optimal, "hops": r.hops,
                            "hop_latency_us": r.hop_latency_us, "concurrency_ceiling": r.concurrency_ceiling,
                            "seconds": round(wall, 2), "strategy": r.stats.get("strategy"),
                            "phases": [{k: p.get(k) for k in ("name", "phase", "status", "objective", "bound",
                                                               "wall_s", "elapsed", "seconds") if k in p}
                                       for p in r.stats.get("phases", [])],
                            "message": r.message})
    return out


def chain_model(n_layers: int = 100_000, seed: int = 1):
    """A hybrid chain (three linear-attention layers, then one full-attention layer) of layers of
    50-150 MB of weights drawn with ``seed``."""
    rng = random.Random(seed)
    layers = []
    for i in range(n_layers):
        w = rng.randint(50_000_000, 150_000_000)
        if i % 4 == 3:
            layers.append({"kind": "attention", "weight_bytes": w, "kv_bytes_per_token": 576})
        else:
            layers.append({"kind": "linear_attention", "weight_bytes": w, "state_bytes_per_request": 4_341_760})
    return model_from_dict({"name": f"chain{n_layers}", "layers": layers})


def bench_chain(n_layers: int = 100_000, repeats: int = 3) -> dict:
    """The exact chain DP on 360 wafers: through ``place`` (bounds, DP, device path, exact re-check),
    and the DP alone (stages, bottleneck, device path) given the lower bound, and the bounds alone."""
    from placer.algorithms.bound import lower_bound
    from placer.algorithms.dp import dp

    t0 = time.perf_counter()
    model = chain_model(n_layers)
    fleet = load_fleet("wse-3t", racks=120)
    inst = make_instance(model, fleet, Workload(context_tokens=8192, concurrency=8, weight_bits=4, kv_bits=8))
    _ = inst.demand_bytes, inst.latency_us, inst.link_us
    setup = time.perf_counter() - t0
    place_s, dp_s, bound_s = [], [], []
    for _ in range(repeats):
        t = time.perf_counter()
        r = place(inst, method="dp")
        place_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        lb = lower_bound(inst)
        bound_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        dp(inst, lower_bound=lb)
        dp_s.append(time.perf_counter() - t)
    return {"benchmark": "chain", "nodes": inst.n_nodes, "devices": inst.n_devices, "setup_s": round(setup, 2),
            "status": str(r.status), "devices_used": r.devices_used, "lower_bound": r.lower_bound_devices,
            "proven_optimal": r.proven_optimal,
            "place_s_best": round(min(place_s), 3), "place_s_all": [round(x, 3) for x in place_s],
            "dp_s_best": round(min(dp_s), 3), "lower_bound_s_best": round(min(bound_s), 3)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("which", nargs="*", choices=["split", "chain"], default=["chain", "split"])
    p.add_argument("--time-limit", type=float, default=60.0)
    p.add_argument("--shards", type=int, default=32)
    p.add_argument("--workers", type=int, default=None, help="CP-SAT search threads (default: the solver's)")
    p.add_argument("--layers", type=int, default=100_000)
    args = p.parse_args(argv)
    for which in args.which:
        if which == "chain":
            res = bench_chain(args.layers)
        else:
            res = bench_split(args.time_limit, args.shards, args.threads)
        print(json.dumps(res, indent=1))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
