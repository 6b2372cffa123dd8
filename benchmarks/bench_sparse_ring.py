"""Sparse rings: a first contiguous placement fast, then the search from it.

    python benchmarks/bench_sparse_ring.py --time-limit 60 --seeds 0 1
    python benchmarks/bench_sparse_ring.py --time-limit 60 --seeds 0 --no-chords

Instances (:func:`generators.sparse_ring_instance`): 150-200 layers of 14-29 GB on a ring of 78-118
single-device racks (44 GB or 64 GB), with one random chord per four racks unless ``--no-chords``.
Per instance: what dp and greedy find, the path walk alone (devices, seconds), and CP-SAT
(``objective devices``, 2 threads) with the walk as hint and incumbent: seconds to its first
placement (the recorded ``start`` phase), devices at the end, the device bound, the gap
(devices - bound) / devices, and whether the count is proven.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this checkout's placer first

from generators import sparse_ring_instance  # noqa: E402

from placer.algorithms import place  # noqa: E402
from placer.algorithms.pathwalk import walk_paths  # noqa: E402

SIZES = ((78, 150), (98, 180), (118, 200))


def run(racks: int, layers: int, seed: int, chords: bool, mode: str, limit: float, threads: int) -> dict:
    inst = sparse_ring_instance(racks, layers, seed, chords=chords, mode=mode)
    row = dict(racks=racks, layers=layers, seed=seed, chords=chords, mode=mode)
    if mode == "contiguous":
        for name in ("dp", "greedy"):
            r = place(inst, name)
            row[name] = r.devices_used
    t0 = time.perf_counter()
    found = walk_paths(inst)
    row["walk_devices"] = None if found is None else len(found.order)
    row["walk_proven"] = bool(found and found.proven)
    row["walk_s"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    r = place(inst, "cpsat", time_limit=limit, threads=threads, objective="devices")
    row["cpsat_s"] = round(time.perf_counter() - t0, 2)
    start = next((p for p in r.stats.get("phases", []) if p.get("phase") == "start"), None)
    row["first_s"] = None if start is None else start.get("elapsed")
    row["devices"] = r.devices_used
    row["bound"] = r.lower_bound_devices if r.bound is None else int(r.bound)
    row["gap"] = None if not r.devices_used else round((r.devices_used - row["bound"]) / r.devices_used, 4)
    row["proven"] = bool(r.levels and r.levels[0].proven)
    row["status"] = str(r.status)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-chords", action="store_true")
    ap.add_argument("--mode", default="contiguous", choices=["contiguous", "free"])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not args.json:
        print("| ring | layers | chords | seed | dp | greedy | walk (s) | first placement s | devices (bound) | gap "
              "| proven | cpsat s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for racks, layers in SIZES:
        for seed in args.seeds:
            row = run(racks, layers, seed, not args.no_chords, args.mode, args.time_limit, args.threads)
            if args.json:
                print(json.dumps(row), flush=True)
                continue
            walk = "-" if row["walk_devices"] is None else f"{row['walk_devices']} ({row['walk_s']})"
            gap = "-" if row["gap"] is None else f"{row['gap']:.1%}"
            print(f"| {racks} | {layers} | {'yes' if row['chords'] else 'no'} | {seed} | {row.get('dp') or '-'} "
                  f"| {row.get('greedy') or '-'} | {walk} | {row['first_s']} | {row['devices']} ({row['bound']}) "
                  f"| {gap} | {row['proven']} | {row['cpsat_s']} |", flush=True)


if __name__ == "__main__":
    main()
