"""Which Hugging Face configs plan at tensor parallelism 8 on B200 nodes (issue 30).

    python benchmarks/tp_coverage.py                     # every config of the project's HF fixtures
    python benchmarks/tp_coverage.py --degrees-only      # the degree check alone (no solve)
    python benchmarks/tp_coverage.py tests/fixtures/hf_released/Step-3.7-Flash.json

Each config is read as ``placer solve <config> -H b200 --tp 8 --text-only --context 8k
--concurrency 1`` reads it and planned at tp 8 with experts tensor-split; where tp 8 alone is
refused, with experts spread whole (``--ep``), as the issue measures. A solve uses the exact chain
DP (contiguous mode), which places exactly what CP-SAT's first level places. Each row: the config,
how it planned (``tp8``, ``tp8 ep``, ``tp8 attention-dp``) with the devices, or the reason it did
not; and the degrees of 1, 2, 4, 8 the model allows, its stored formats included (the degrees a
user gets without ``--tp``; ``8e``: with experts spread whole, ``--ep``). Meta-device imports need the
``hf`` extra (transformers and torch); without it they are counted as import refusals.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from placer.planning import Placement, Requirements, SolverSettings, plan
from placer.problem.parallel import allowed_degrees
from placer.specs.errors import InvalidSpec
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import workload_for

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ("hf_corpus", "hf_released", "hf_families", "hf")


def configs() -> list[Path]:
    """Every model config of the fixtures (quantization siblings and count tables left out)."""
    out = []
    for d in FIXTURES:
        for p in sorted((ROOT / "tests" / "fixtures" / d).glob("*.json")):
            if not p.name.endswith("hf_quant_config.json") and p.name != "meta_counts.json":
                out.append(p)
    return out


def refused(model, wl, g: int, ep: bool) -> str | None:
    """Why the model's layers (kept in their stored formats under ``wl``) refuse degree ``g``."""
    return allowed_degrees(model, [g], ep, wl)[1].get(g)


def degrees(model, wl) -> str:
    """The degrees of 1, 2, 4, 8 the model allows (``e`` where only experts spread whole do)."""
    out = []
    for g in (1, 2, 4, 8):
        if refused(model, wl, g, False) is None:
            out.append(str(g))
        elif any(x.ffn == "moe" for x in model.layers) and refused(model, wl, g, True) is None:
            out.append(f"{g}e")
    return ",".join(out) or "-"


def plan_tp8(model, fleet, wl) -> tuple[bool, str]:
    """(planned, what): tp 8 with experts tensor-split, else spread whole, else attention-DP."""
    last = ""
    moe = any(x.ffn == "moe" for x in model.layers)
    for ep in (False, True):
        if ep and not moe:
            break
        try:
            p = plan(model, fleet, wl, Requirements(placement=Placement(degrees=(8,), expert_parallel=ep)),
                     SolverSettings(method="dp"))
        except InvalidSpec as exc:
            last = exc.message if hasattr(exc, "message") else str(exc)
            continue
        s = p.solved
        if s is not None and s.result.feasible:
            how = "tp8 attention-dp" if s.instance.attention_dp else ("tp8 ep" if ep else "tp8")
            return True, f"{how}: {s.result.devices_used} GPUs"
        last = p.message or "infeasible"
    return False, last or "no layout placed"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("configs", nargs="*", help="configs to read (default: every HF fixture)")
    ap.add_argument("--degrees-only", action="store_true", help="check the degrees, do not solve")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.configs] or configs()
    fleet = load_fleet("b200")
    planned, split = 0, 0
    print(f"{'config':<58} {'degrees':<10} tp 8")
    for path in paths:
        name = f"{path.parent.name}/{path.stem}"
        try:
            model = load_model(path, text_only=True)
        except InvalidSpec as exc:
            print(f"{name:<58} {'-':<10} import refused: {str(exc).splitlines()[0][:160]}", flush=True)
            continue
        wl = workload_for(model, context=8192, concurrency=1)
        if args.degrees_only:
            why = refused(model, wl, 8, False) and (refused(model, wl, 8, True) if any(
                x.ffn == "moe" for x in model.layers) else "refused")
            ok, what = why is None, "allowed" if why is None else refused(model, wl, 8, False)
        else:
            ok, what = plan_tp8(model, fleet, wl)
        planned += ok
        allowed = degrees(model, wl)
        split += allowed not in ("1", "-")
        print(f"{name:<58} {allowed:<10} {what[:200]}", flush=True)
    print(f"{planned} of {len(paths)} configs plan at tp 8 on b200 ({'degree check' if args.degrees_only else 'solved'}); "
          f"{split} of {len(paths)} run at some tp > 1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
