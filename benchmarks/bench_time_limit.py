"""Wall time of ``placer solve`` against ``--time-limit`` on instances that end unknown or feasible.

    python benchmarks/bench_time_limit.py --time-limit 10
    python benchmarks/bench_time_limit.py --time-limit 10 --json
    python benchmarks/bench_time_limit.py --time-limit 10 --json --before /path/to/older/checkout

``--before DIR`` solves each instance first with the placer of checkout DIR, then with this one
(alternating, so both see the same load); rows carry ``tree`` (``before`` / ``after``).

Each instance is written as model and hardware YAML files and solved by the command line in a
fresh process (``python -c "from placer.cli import main; main()" solve ...``), so the wall time
includes everything a user waits for: interpreter start, imports, reading and checking the specs,
building the instance, the solve and, for an infeasible answer, the explanation. The figure that
matters is the overshoot, wall - limit; the goal is wall <= 1.1 x limit. ``placer solve`` counts
its limit from the process's own start (``/proc/self/stat``), so interpreter start, imports and
spec reading come out of the limit rather than on top of it. ``startup`` is the wall time of
``placer inspect`` on the same model (interpreter, imports, spec reading; no OR-Tools): how much of
the limit is gone before the solve begins.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))   # this checkout's placer first

from generators import sparse_fleet_instance, sparse_ring_specs  # noqa: E402

CLI = [sys.executable, "-c", "from placer.cli import main; main()"]


def _specs_of(inst) -> tuple[dict, dict]:
    """(model, hardware) specs of a generated instance whose layers are explicit items."""
    layers = [{"kind": "linear_attention", "weight_bytes": int(w), "state_bytes_per_request": 1}
              for w in inst.weight_bytes]
    return {"name": inst.model.name, "layers": layers}, inst.fleet.spec


def instances():
    """(name, model spec or catalog name, hardware spec or catalog name, mode, extra flags): 20 rows."""
    for racks, layers in ((78, 150), (98, 180), (118, 200)):
        for seed in (0, 1, 2):
            m, h = sparse_ring_specs(racks, layers, seed, chords=True)
            yield f"ring {racks} + chords, {layers} layers, seed {seed}", m, h, "contiguous", []
    for racks, layers in ((78, 150), (118, 200)):
        for seed in (0, 1):
            m, h = sparse_ring_specs(racks, layers, seed, chords=True)
            yield f"ring {racks} + chords, {layers} layers, seed {seed}", m, h, "free", []
    for seed in (0, 1, 2):
        m, h = _specs_of(sparse_fleet_instance(14, 80, seed))
        yield f"irregular 42 devices, 80 layers, seed {seed}", m, h, "contiguous", []
    for seed in (0, 1):
        yield f"kimi-k3 / wse-3t free, seed {seed}", "kimi-k3", "wse-3t", "free", ["--seed", str(seed)]
    # a chain too long for any path of the ring that the bounds do not rule out: ends unknown
    for seed in (0, 1):
        m, h = sparse_ring_specs(78, 172, seed, chords=True)
        yield f"ring 78 + chords, 172 layers (no path found), seed {seed}", m, h, "contiguous", []


def _write(folder: Path, name: str, spec) -> str:
    if isinstance(spec, str):
        return spec
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def run_one(name, model, hardware, mode, extra, limit: float, threads: int, folder: Path, root: Path = ROOT) -> dict:
    mpath = _write(folder, "model", model)
    hpath = _write(folder, "hardware", hardware)
    t0 = time.perf_counter()
    subprocess.run(CLI + ["inspect", mpath], cwd=root, capture_output=True, text=True)
    startup = time.perf_counter() - t0
    args = CLI + ["solve", mpath, "-H", hpath, "--mode", mode, "--time-limit", str(limit),
                  "--threads", str(threads), "--quiet", *extra]
    if isinstance(model, dict):
        args += ["--context", "1", "--concurrency", "0"]
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=root, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    status = re.search(r"^status (\w+)", proc.stdout, re.M)
    if status:
        status = status.group(1)
    elif "no placement" in proc.stdout:
        status = re.search(r"^(unknown|infeasible)", proc.stdout, re.M)
        status = status.group(1) if status else "infeasible"
    else:
        status = f"exit {proc.returncode}"
    return dict(name=name, mode=mode, limit=limit, wall=round(wall, 2), startup=round(startup, 2),
                over=round(wall - limit, 2), ratio=round(wall / limit, 3), status=status, exit=proc.returncode)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--before", type=Path, default=None, help="another checkout, run before this one on each row")
    args = ap.parse_args(argv)
    trees = ([("before", args.before.resolve())] if args.before else []) + [("after", ROOT)]
    rows = []
    if not args.json:
        print("| instance | mode | status | limit s | wall s | over s | wall / limit | startup s | over - startup s |")
        print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, model, hardware, mode, extra in instances():
            for tree, root in trees:
                row = run_one(name, model, hardware, mode, extra, args.time_limit, args.threads, Path(tmp), root)
                row["tree"] = tree
                rows.append(row)
                if args.json:
                    print(json.dumps(row), flush=True)
                else:
                    print(f"| {row['name']}{' (before)' if tree == 'before' else ''} | {row['mode']} | {row['status']} "
                          f"| {row['limit']:g} | {row['wall']} | {row['over']} | {row['ratio']} | {row['startup']} "
                          f"| {row['over'] - row['startup']:.2f} |", flush=True)
    for tree, _ in trees:
        mine = [r for r in rows if r["tree"] == tree]
        worst = max(mine, key=lambda r: r["ratio"])
        ratios = sorted(r["ratio"] for r in mine)
        print(f"\n{tree}: {len(mine)} instances; median wall / limit {ratios[len(ratios) // 2]}, worst {worst['ratio']} "
              f"({worst['name']}); {sum(x > 1.1 for x in ratios)} above 1.1; load average {os.getloadavg()[0]:.1f}",
              flush=True)


if __name__ == "__main__":
    main()
