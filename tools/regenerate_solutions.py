"""Regenerate ``solutions/``: each catalog model on its natural hardware, in every mode, by CP-SAT.

    python tools/regenerate_solutions.py [--stale] [--time-limit 60] [--threads 2] [--seed 0] [--model NAME ...]
                               [--mode contiguous|free|split ...] [--objective LEVELS] [--out solutions]

For every model of the catalog and every mode (``contiguous``, ``free``, ``split`` at
``shards:4``) it solves at the model's default workload with ``place(method="cpsat")`` and the
objective ``placer solve`` uses (default: devices, then guaranteed concurrency, then latency), checks
the mapping with the independent validator and writes it atomically to
``<out>/<model>__<hardware>__<mode>.json``. A mode with no placement is skipped with its reason; a
mapping that fails validation is not written and the command exits 1. With ``--stale`` only the
mappings that are missing or no longer validate (a spec changed since) are solved again.

Contiguous solutions are exported to every runtime (vLLM, SGLang, Megatron-LM, torch), so they are
solved under the rules of all of them (:func:`exported_requirements`, recorded in the mapping's
``require``). When those rules hold fewer live requests than the model's default workload (a rank
of only the LM head is what the default would need), the solution is made at the largest
concurrency that fits under them, proven, and the log says so.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from placer.algorithms.objectives import DEFAULT_OBJECTIVE
from placer.mapping import read_mapping, write_mapping
from placer.mapping.validate import validate_mapping
from placer.problem.runtime_rules import RUNTIMES, runtime_requirements
from placer.specs.catalog import list_models
from placer.specs.errors import PlacerError
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import workload_for

__all__ = ["NATURAL_HARDWARE", "MODES", "EXPORTED_TO", "natural_hardware", "exported_requirements", "regenerate"]

# Wafers unless a model sits naturally on a few GPUs: at its default workload gpt-oss-120b needs
# ~213 GB (58 GB of 4-bit weights + 32 requests x 4.8 GB of KV) and kimi-linear-48b ~132 GB, a few
# 80 GB H100s each, where a wafer pipeline would spread them over 5 and 4 wafers.
NATURAL_HARDWARE = {
    "gpt-oss-120b": "h100",
    "kimi-linear-48b": "h100",
}
DEFAULT_HARDWARE = "wse-3t"
MODES = ("contiguous", "free", "split")
SPLIT_GRANULARITY = "shards:4"


# the runtimes each mode's solutions are exported to (tests/package/test_solutions.py exports them)
EXPORTED_TO = {"contiguous": RUNTIMES}


def natural_hardware(model_name: str) -> str:
    return NATURAL_HARDWARE.get(model_name, DEFAULT_HARDWARE)


def exported_requirements(model, mode: str) -> tuple[str, ...]:
    """The requirement kinds of every runtime ``mode``'s solutions of ``model`` are exported to."""
    kinds: list[str] = []
    for runtime in EXPORTED_TO.get(mode, ()):
        kinds += [k for k in runtime_requirements(runtime, model) if k not in kinds]
    return tuple(sorted(kinds))


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _up_to_date(path: Path, model, fleet) -> bool:
    """True when ``path`` holds a mapping that validates against the current specs."""
    if not path.exists():
        return False
    try:
        return validate_mapping(read_mapping(path), model=model, fleet=fleet, source=str(path)) == []
    except PlacerError:
        return False


def _place(model, fleet, req, solver, objective, workload):
    """The placement step (:mod:`placer.planning.solve`) of one solution at ``workload``."""
    from placer.planning import build_instance, place_instance

    return place_instance(build_instance(model, fleet, workload, req), solver, objective=objective)


def regenerate(out_dir: str | Path = "solutions", *, models=None, modes=MODES, time_limit: float = 60.0,
               threads: int = 2, seed: int = 0, stale_only: bool = False, objective: str = DEFAULT_OBJECTIVE,
               log=_say) -> dict:
    """Solve and write every (model, mode); returns the paths ``written`` and ``current`` (up to date,
    with ``stale_only``), and the ``skipped`` (no placement) and ``invalid`` (failed validation) cases."""
    from placer.planning import Placement, Requirements, SolverSettings
    from placer.planning.studies.compare import solution_path

    out_dir = Path(out_dir)
    names = models or [p.stem for p in list_models()]
    report: dict[str, list] = {"written": [], "current": [], "skipped": [], "invalid": []}
    for name in names:
        model = load_model(name)
        hw = natural_hardware(model.name)
        fleet = load_fleet(hw)
        wl = workload_for(model)
        for mode in modes:
            path = out_dir / Path(solution_path(model.name, fleet.name, mode)).name
            if stale_only and _up_to_date(path, model, fleet):
                log(f"keep  {path}: up to date")
                report["current"].append(str(path))
                continue
            require = exported_requirements(model, mode)
            req = Requirements(Placement(mode=mode, granularity=SPLIT_GRANULARITY if mode == "split" else None,
                                         constraints=require))
            solver = SolverSettings(method="cpsat", time_limit=time_limit, threads=threads, seed=seed)
            attempt = partial(_place, model, fleet, req, solver, objective)
            solved = attempt(wl)
            r = solved.result
            label = f"{model.name} on {hw}, {mode}"
            fits = r.max_concurrency
            if require and r.status == "infeasible" and fits is not None and fits < wl.concurrency \
                    and "or more" not in r.message:
                log(f"note  {label}: the runtimes' rules ({', '.join(require)}) hold at most {fits} live "
                    f"requests (the default workload asks for {wl.concurrency}); solved at {fits}")
                solved = attempt(wl.replace(concurrency=fits))
                r = solved.result
            doc = solved.mapping
            if r.interrupted:   # Ctrl-C: a best-so-far placement is no committed solution; stop here
                raise KeyboardInterrupt
            if doc is None:
                log(f"skip  {label}: {r.status}: {r.message}")
                report["skipped"].append((model.name, hw, mode, f"{r.status}: {r.message}"))
                continue
            violations = validate_mapping(doc, model=model, fleet=fleet)
            if violations:
                log(f"FAIL  {label}: {len(violations)} violation(s); first: {violations[0]}")
                report["invalid"].append((model.name, hw, mode, [str(v) for v in violations]))
                continue
            write_mapping(path, doc)
            s = doc["summary"]
            log(f"wrote {path}: {s['devices_used']} devices (bound {s['lower_bound_devices']}), {s['hops']} hops, "
                f"{s['hop_latency_us']:g} us, ceiling {s['concurrency_ceiling']}, {s['status']}"
                f"{' (proven)' if s['proven_optimal'] else ''}, {s['solve_seconds']:.1f} s")
            report["written"].append(str(path))
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/regenerate_solutions.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="solutions", help="folder to write into (default: solutions)")
    parser.add_argument("--model", action="append", dest="models", help="catalog model (repeatable; default: all)")
    parser.add_argument("--mode", action="append", dest="modes", choices=MODES, help="mode (repeatable; default: all)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="CP-SAT seconds per solve (default 60)")
    parser.add_argument("--threads", "--workers", dest="workers", type=int, default=2, metavar="N",
                        help="CP-SAT search threads per solve (default 2; --workers is the old spelling)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--objective", default=DEFAULT_OBJECTIVE,
                        help=f"CP-SAT's levels in order (default {DEFAULT_OBJECTIVE}, as placer solve)")
    parser.add_argument("--stale", action="store_true",
                        help="only solve mappings that are missing or no longer validate against the specs")
    args = parser.parse_args(argv)
    try:
        report = regenerate(args.out, models=args.models, modes=tuple(args.modes or MODES),
                            time_limit=args.time_limit, threads=args.threads, seed=args.seed,
                            stale_only=args.stale, objective=args.objective)
    except PlacerError as exc:
        _say(f"error: {exc}")
        return 2
    _say(f"{len(report['written'])} written, {len(report['current'])} up to date, {len(report['skipped'])} skipped, "
         f"{len(report['invalid'])} invalid")
    return 1 if report["invalid"] else 0


if __name__ == "__main__":
    sys.exit(main())
