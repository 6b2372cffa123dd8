"""Scale: plans on data halls, a split-granularity kimi-k3 on 128 wafers, the chain DP on 100,000 layers.

    python benchmarks/bench_scale.py halls        # the table below (every row a fresh `placer solve`)
    python benchmarks/bench_scale.py halls --max-devices 10000   # leave out the largest halls
    python benchmarks/bench_scale.py split        # kimi-k3 shards:32 (2,976 nodes), 128 wafers, CP-SAT
    python benchmarks/bench_scale.py chain        # exact chain DP, 100,000 layers

``halls``: kimi-k3 on 96, 1,000, 10,000 and 100,000 wse-3t wafers (3 per CS-4 system), the systems
joined as a full mesh and as a ring; DeepSeek-V3 and Llama-3.1-405B on 1,024, 8,192 and 65,536
H200 (NVLink nodes of 8, 16 nodes per leaf switch of a leaf-spine fabric, 2 us more between
leaves). Each row runs ``placer solve`` in a fresh process with ``--time-limit`` and prints the
wall time (process start included), the peak memory (the process's maximum resident set), every
level's value, bound and proof, and whether the time limit held within 10 %. Goal: every level
proven in under 10 s and 1 GB wherever the plan uses a few hundred devices at most, whatever the
hall's size. Setup of ``split`` and ``chain`` (building the model, fleet and instance) is timed
apart from solving.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

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


ROOT = Path(__file__).resolve().parent.parent
# runs the command line and reports the process's peak resident set (kB) on stderr at exit
_CLI = ("import atexit, resource, sys; atexit.register(lambda: print('PEAK_KB', "
        "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)); "
        "from placer.cli import main; main()")


def hall_rows(max_devices: int | None = None):
    """(model, hardware spec, racks, devices) per row of the ``halls`` table."""
    wafers = yaml.safe_load((ROOT / "hardware" / "wse-3t.yaml").read_text())
    h200 = yaml.safe_load((ROOT / "hardware" / "h200.yaml").read_text())
    h200["name"] = "h200-leaf-spine"
    h200["fleet"].update(inter_rack_topology="leaf-spine", racks_per_leaf=16, spine_latency_us=2)
    rows = []
    for devices in (96, 1_000, 10_000, 100_000):
        for topology in ("full", "ring"):
            spec = {**wafers, "name": f"wse-3t-{topology}",
                    "fleet": {**wafers["fleet"], "inter_rack_topology": topology}}
            rows.append(("kimi-k3", spec, -(-devices // 3), -(-devices // 3) * 3))
    for model in ("deepseek-v3", "llama-3.1-405b"):
        for gpus in (1_024, 8_192, 65_536):
            rows.append((model, h200, gpus // 8, gpus))
    return [r for r in rows if max_devices is None or r[3] <= max_devices]


def bench_hall(model: str, spec: dict, racks: int, devices: int, time_limit: float, folder: Path) -> dict:
    """One ``placer solve`` of ``model`` on ``racks`` racks of ``spec`` in a fresh process."""
    path = folder / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    args = [sys.executable, "-c", _CLI, "solve", model, "-H", str(path), "--racks", str(racks),
            "--time-limit", str(time_limit), "--quiet", "--json"]
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    peak = re.search(r"PEAK_KB (\d+)", proc.stderr)
    row = {"model": model, "fleet": spec["name"], "devices": devices, "wall_s": round(wall, 2),
           "peak_mb": round(int(peak.group(1)) / 1024) if peak else None, "limit_s": time_limit,
           "limit_held": wall <= 1.1 * time_limit, "exit": proc.returncode}
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        row["error"] = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return row
    if "summary" not in doc:        # no placement: the status and why
        row["status"], row["error"] = doc.get("status"), doc.get("message", "")[:200]
        return row
    summary = doc["summary"]
    row["status"] = summary.get("status")
    row["levels"] = [{k: lv.get(k) for k in ("name", "value", "bound", "proven")} for lv in summary.get("levels", [])]
    return row


def _level_words(row: dict) -> str:
    out = []
    for lv in row.get("levels", []):
        value = f"{lv['value']:g}" if isinstance(lv["value"], float) else str(lv["value"])
        out.append(f"{lv['name']} {value}" + (" proven" if lv["proven"] else f" (bound {lv['bound']}, not proven)"))
    return "; ".join(out) or row.get("error", "")


def bench_halls(time_limit: float = 60.0, max_devices: int | None = None, as_json: bool = False) -> list[dict]:
    rows = []
    if not as_json:
        print("| model | fleet | devices | wall s | peak MB | status | levels (value, proof) | limit held |")
        print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for model, spec, racks, devices in hall_rows(max_devices):
            row = bench_hall(model, spec, racks, devices, time_limit, Path(tmp))
            rows.append(row)
            if as_json:
                print(json.dumps(row), flush=True)
            else:
                print(f"| {model} | {row['fleet']} | {devices:,} | {row['wall_s']} | {row['peak_mb']} "
                      f"| {row.get('status') or 'exit ' + str(row['exit'])} | {_level_words(row)} "
                      f"| {'yes' if row['limit_held'] else 'NO'} |", flush=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("which", nargs="*", choices=["halls", "split", "chain"], default=["halls", "chain", "split"])
    p.add_argument("--time-limit", type=float, default=60.0)
    p.add_argument("--max-devices", type=int, default=None, help="halls: leave out larger fleets")
    p.add_argument("--json", action="store_true", help="halls: one JSON object per row")
    p.add_argument("--shards", type=int, default=32)
    p.add_argument("--workers", type=int, default=None, help="CP-SAT search threads (default: the solver's)")
    p.add_argument("--layers", type=int, default=100_000)
    args = p.parse_args(argv)
    for which in args.which:
        if which == "halls":
            bench_halls(args.time_limit, args.max_devices, args.json)
            continue
        if which == "chain":
            res = bench_chain(args.layers)
        else:
            res = bench_split(args.time_limit, args.shards, args.workers)
        print(json.dumps(res, indent=1))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
