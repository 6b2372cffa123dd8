"""Ray's fixed cost against local processes, in one run: when do Ray tasks pay?

    PYTHONPATH=$PWD /tmp/xvenv/bin/python benchmarks/bench_ray.py [--model M] [--hardware H] [--jobs N]

Three measurements, each on local processes (``--jobs`` spawned workers) and on Ray (one task per
item, :func:`placer.planning.tasks.run_tasks`), with the ratio Ray / processes:

* **empty tasks**: ``--jobs`` tasks that return at once: the backend's fixed cost alone, Ray
  started for the run (as ``--backend ray`` does without ``--address``) and Ray already running
  (a cluster joined: the cost per run without the start-up);
* **a GPU plan's layouts**: the per-degree search of one plan (default llama-3.1-70b on h100 at
  8k, every allowed degree a task: :func:`placer.planning.solve.search_layouts`), Ray started for
  the run, and the same on the running cluster; with one process beside them (``jobs=1``);
* that the layouts' results and proofs are the same on every backend (devices, levels, bounds,
  proofs, assignments), which the script says.

No figure is asserted: timings depend on the machine. On one machine Ray cannot reach more cores
than the processes do, so its fixed cost is all it adds; it pays only on a cluster of several
machines, once the work it spreads exceeds that fixed cost several times.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from placer import load_fleet, load_model, workload_for  # noqa: E402
from placer.planning import Requirements, SolverSettings, search_layouts  # noqa: E402
from placer.planning.tasks import run_tasks  # noqa: E402


def _nothing(item):
    return item


def _timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def _empty(backend: str, jobs: int) -> float:
    return _timed(lambda: run_tasks(_nothing, (), list(range(jobs)), lambda i, v: None, backend=backend,
                                    jobs=jobs))[0]


def _layouts(search) -> list[tuple]:
    return [(s.instance.tp, s.instance.ep, s.result.status, s.result.devices_used, tuple(s.per_group.assignment or ()),
             tuple((lv.name, lv.value, lv.bound, lv.proven) for lv in s.result.levels)) for s in search.solved]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--hardware", default="h100")
    ap.add_argument("--context", default="8k")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--jobs", type=int, default=2, help="processes, and Ray's CPUs (default 2)")
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args(argv)
    try:
        import ray
    except ImportError:
        print("Ray is not installed (pip install -e '.[ray]'); nothing to compare", file=sys.stderr)
        return 2
    model, fleet = load_model(args.model), load_fleet(args.hardware)
    wl = workload_for(model, context=args.context, concurrency=args.concurrency)

    def plan(**kw):
        return search_layouts(model, fleet, wl, Requirements(), SolverSettings(time_limit=args.time_limit, threads=1,
                                                                              **kw))

    rows: list[tuple[str, float, float]] = []
    empty_p = _empty("process", args.jobs)
    empty_r = _empty("ray", args.jobs)                    # starts Ray, runs, shuts it down
    t_one, one = _timed(lambda: plan())
    t_proc, proc = _timed(lambda: plan(jobs=args.jobs))
    t_ray, by_ray = _timed(lambda: plan(backend="ray"))
    ray.init(num_cpus=args.jobs, include_dashboard=False, log_to_driver=False)
    try:
        _empty("ray", args.jobs)                          # warm the cluster's workers once
        joined_empty = _empty("ray", args.jobs)
        t_joined, joined = _timed(lambda: plan(backend="ray"))
    finally:
        ray.shutdown()
    rows += [("empty tasks, Ray started for the run", empty_r, empty_p),
             ("empty tasks, Ray already running", joined_empty, empty_p),
             (f"{len(one.solved)} layouts, Ray started for the run", t_ray, t_proc),
             (f"{len(one.solved)} layouts, Ray already running", t_joined, t_proc)]
    print(f"{args.model} on {args.hardware} at {args.context}, concurrency {args.concurrency}: "
          f"{len(one.solved)} layouts ({', '.join(f'tp {s.instance.tp}' for s in one.solved)}); "
          f"{args.jobs} processes / Ray CPUs")
    print(f"one process: {t_one:.2f} s; {args.jobs} processes: {t_proc:.2f} s")
    print(f"{'what':<42} {'Ray s':>8} {'processes s':>12} {'Ray / processes':>16}")
    for what, r, p in rows:
        print(f"{what:<42} {r:>8.2f} {p:>12.2f} {r / p:>15.1f}x")
    same = _layouts(one) == _layouts(proc) == _layouts(by_ray) == _layouts(joined)
    print(f"results and proofs: {'identical on every backend' if same else 'DIFFER between backends'} "
          f"(proven: one process {one.proven}, processes {proc.proven}, Ray {by_ray.proven}, "
          f"Ray running {joined.proven})")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
