"""The fast simulator path (placer.simulate.steady) against the event run (placer.simulate.des) on a
battery of placements and traffic: wafers and GPUs, dense, MoE, linear-attention and hybrid models,
tensor-parallel and attention-data-parallel groups, a free placement that revisits devices,
speculative decoding, closed loops, decode-only batches and Poisson streams, short and long
prompts, with and without a prefix-cache hit.

    python benchmarks/bench_steady.py [--quick]

Prints, per case, both runs' per-user and aggregate tokens/s, mean TTFT, the relative errors and
the two wall times; then the largest errors and the time ratio. ``tests/simulate/test_steady.py``
runs the ``--quick`` battery and asserts every case within ``STATED_ERROR``.
"""

from __future__ import annotations

import json
import sys
import time
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from placer.simulate.des import Simulation  # noqa: E402
from placer.simulate.steady import STATED_ERROR, steady  # noqa: E402

__all__ = ["CASES", "QUICK", "run_case", "main"]


@cache
def mapping(name: str):
    """(instance, route, speculation options) of a stored solution."""
    from placer.mapping import instance_from_mapping
    from placer.mapping.view import mapping_view

    view = mapping_view(json.loads((ROOT / "solutions" / f"{name}.json").read_text()))
    _m, _f, _wl, inst = instance_from_mapping(view.doc)
    spec = view.speculative
    opts = {} if spec is None or spec.accept is None else dict(spec_k=spec.tokens, spec_accept=float(spec.accept))
    return inst, [inst.device_index[d] for d in view.route], opts


@cache
def placed(model: str, hardware: str, tp: int, ep: bool = False, attention_dp: bool = False, context: str = "8k"):
    """(instance, assignment, {}) of a model placed at a degree by the dynamic programme."""
    from placer import load_fleet, load_model, workload_for
    from placer.planning import Requirements, SolverSettings, build_instance, place_instance

    m = load_model(model)
    wl = workload_for(m, context=context, concurrency=8)
    inst = build_instance(m, load_fleet(hardware), wl, Requirements(), tp=tp, ep=ep, attention_dp=attention_dp)
    solved = place_instance(inst, SolverSettings(method="dp"), reports=False)
    return inst, list(solved.per_group.assignment), {}


@cache
def toy():
    """Three stages of a hand-sized linear-attention model on a four-device toy fleet."""
    from placer.problem.instance import make_instance
    from placer.specs.fleet import fleet_from_dict
    from placer.specs.model import model_from_dict
    from placer.specs.workload import Workload

    fleet = fleet_from_dict({
        "name": "hand", "device": {"memory": "10 MB", "memory_bandwidth": "1 TB/s", "compute": "1 PFLOPS",
                                   "power": "25 kW", "perf": {"fixed_overhead_us_per_layer": 10,
                                                              "fixed_overhead_us_per_stage": 5,
                                                              "bandwidth_efficiency": 0.5, "compute_efficiency": 0.5}},
        "fleet": {"racks": 1, "per_rack": 4, "intra_rack_latency_us": 2, "inter_rack_latency_us": 3}})
    model = model_from_dict({"name": "linear4", "layers": [
        {"kind": "linear_attention", "weight_bytes": w, "state_bytes_per_request": 1000}
        for w in (2_000_000, 2_000_000, 5_000_000, 3_000_000)]})
    return make_instance(model, fleet, Workload(context_tokens=1000)), [0, 0, 1, 2], {}


SOURCES = {
    "toy linear 3 stages": toy,
    "llama-3.1-70b wse-3t (4 wafers)": lambda: mapping("llama-3.1-70b__wse-3t__contiguous"),
    "qwen3-235b wse-3t (MoE, 16 wafers)": lambda: mapping("qwen3-235b__wse-3t__contiguous"),
    "deepseek-v3 wse-3t free (revisits)": lambda: mapping("deepseek-v3__wse-3t__free"),
    "jamba-1.5-large wse-3t (hybrid)": lambda: mapping("jamba-1.5-large__wse-3t__contiguous"),
    "gpt-oss-120b h100 (MoE, 4 GPUs)": lambda: mapping("gpt-oss-120b__h100__contiguous"),
    "kimi-linear-48b h100 (2 GPUs)": lambda: mapping("kimi-linear-48b__h100__contiguous"),
    "kimi-k3-eagle3 wse-3t (drafts)": lambda: mapping("kimi-k3-eagle3__wse-3t__contiguous"),
    "llama-3.1-8b h100 tp 2": lambda: placed("llama-3.1-8b", "h100", 2),
    "llama-3.1-70b h200 tp 8": lambda: placed("llama-3.1-70b", "h200", 8),
    "qwen3-235b h200 tp 8 ep": lambda: placed("qwen3-235b", "h200", 8, True),
    "deepseek-v3 h200 tp 8 attention-dp": lambda: placed("deepseek-v3", "h200", 8, True, True),
}

# (source, traffic options): closed loops at a few loads, short and long prompts, a prefix-cache hit,
# decode-only batches, Poisson streams for a fixed duration
QUICK = [
    ("toy linear 3 stages", dict(requests=1, output_tokens=40)),
    ("toy linear 3 stages", dict(requests=6, max_live=6, output_tokens=64)),
    ("toy linear 3 stages", dict(requests=8, output_tokens=32, decode_only=True)),
    ("toy linear 3 stages", dict(arrival_rate=3000.0, duration_s=0.2, output_tokens=32)),
    ("llama-3.1-70b wse-3t (4 wafers)", dict(requests=8, max_live=8, output_tokens=16)),
    ("llama-3.1-70b wse-3t (4 wafers)", dict(requests=11, max_live=11, output_tokens=256)),
    ("llama-3.1-70b wse-3t (4 wafers)", dict(requests=8, max_live=8, output_tokens=128, cached_prompt_tokens=7000)),
    ("llama-3.1-70b wse-3t (4 wafers)", dict(arrival_rate=20.0, duration_s=3.0, output_tokens=64)),
    ("qwen3-235b wse-3t (MoE, 16 wafers)", dict(requests=16, max_live=16, output_tokens=32, context=8192)),
    ("gpt-oss-120b h100 (MoE, 4 GPUs)", dict(requests=16, max_live=16, output_tokens=64, context=4096)),
    ("kimi-linear-48b h100 (2 GPUs)", dict(requests=8, max_live=8, output_tokens=32, context=16384)),
    ("llama-3.1-8b h100 tp 2", dict(requests=32, max_live=32, output_tokens=64)),
    ("llama-3.1-8b h100 tp 2", dict(requests=64, output_tokens=64, decode_only=True)),
    ("deepseek-v3 wse-3t free (revisits)", dict(requests=4, max_live=4, output_tokens=16, context=8192)),
]
CASES = QUICK + [
    ("qwen3-235b wse-3t (MoE, 16 wafers)", dict(requests=4, max_live=4, output_tokens=16)),
    ("qwen3-235b wse-3t (MoE, 16 wafers)", dict(arrival_rate=8.0, duration_s=5.0, output_tokens=32, context=8192)),
    ("deepseek-v3 wse-3t free (revisits)", dict(requests=16, max_live=16, output_tokens=32, context=32768)),
    ("jamba-1.5-large wse-3t (hybrid)", dict(requests=8, max_live=8, output_tokens=32, context=32768)),
    ("kimi-k3-eagle3 wse-3t (drafts)", dict(requests=8, max_live=8, output_tokens=64)),
    ("llama-3.1-70b h200 tp 8", dict(requests=64, max_live=64, output_tokens=128)),
    ("llama-3.1-70b h200 tp 8", dict(arrival_rate=10.0, duration_s=10.0, output_tokens=128)),
    ("qwen3-235b h200 tp 8 ep", dict(requests=32, max_live=32, output_tokens=64)),
    ("deepseek-v3 h200 tp 8 attention-dp", dict(requests=8, max_live=8, output_tokens=32)),
    ("gpt-oss-120b h100 (MoE, 4 GPUs)", dict(requests=64, max_live=64, output_tokens=256, context=32768)),
]


def _rel(exact, fast):
    if exact is None or fast is None or exact == 0:
        return None
    return (fast - exact) / exact


def run_case(source: str, options: dict) -> dict:
    """Both runs of one case: their figures, the relative errors and the wall times."""
    from placer.simulate.arguments import split_options
    from placer.simulate.data_parallel import for_group, rank_traffic

    inst, assignment, spec = SOURCES[source]()
    traffic, serving, run = split_options(**{**spec, **options})
    traffic = rank_traffic(traffic, inst)
    t0 = time.perf_counter()
    sim = Simulation(inst, assignment, traffic, serving, run)
    event = for_group(sim.run(), inst)
    t1 = time.perf_counter()
    fast = for_group(steady(inst, assignment, traffic, serving, run), inst)
    t2 = time.perf_counter()
    lo, _hi = sim._window()
    firsts = [r.first - r.arrival for r in sim.reqs if r.first is not None and r.arrival >= lo - 1e-9]
    ttft = float(np.mean(firsts)) if firsts and not sim.decode_only else None
    return dict(source=source, options=options, event=event, fast=fast, event_ttft_mean_us=ttft,
                per_user=_rel(event.per_user_tokens_per_s, fast.per_user_tokens_per_s),
                aggregate=_rel(event.aggregate_tokens_per_s, fast.aggregate_tokens_per_s),
                ttft=_rel(ttft, fast.ttft_mean_us), event_s=t1 - t0, fast_s=t2 - t1)


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _traffic(o: dict) -> str:
    shape = "decode-only" if o.get("decode_only") else f"Poisson {o['arrival_rate']:g}/s" if "arrival_rate" in o \
        else f"closed {o.get('max_live', o.get('requests'))}"
    extra = "".join(f", {k} {v}" for k, v in o.items() if k in ("context", "cached_prompt_tokens"))
    return f"{shape}, out {o['output_tokens']}{extra}"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cases = QUICK if "--quick" in argv else CASES
    print(f"{'case':38} {'traffic':34} {'per-user event':>14} {'fast':>9} {'err':>7} {'aggregate':>11} {'err':>7} "
          f"{'TTFT err':>8} {'event s':>8} {'fast s':>7}")
    rows = []
    for source, options in cases:
        r = run_case(source, options)
        rows.append(r)
        e, f = r["event"], r["fast"]
        print(f"{source:38} {_traffic(options):34} {e.per_user_tokens_per_s or 0:14,.1f} "
              f"{f.per_user_tokens_per_s or 0:9,.1f} {_pct(r['per_user']):>7} {e.aggregate_tokens_per_s:11,.1f} "
              f"{_pct(r['aggregate']):>7} {_pct(r['ttft']):>8} {r['event_s']:8.2f} {r['fast_s']:7.2f}", flush=True)
    worst = {k: max(abs(r[k]) for r in rows if r[k] is not None) for k in ("per_user", "aggregate", "ttft")}
    event_s, fast_s = sum(r["event_s"] for r in rows), sum(r["fast_s"] for r in rows)
    print(f"largest error over {len(rows)} cases: per-user {100 * worst['per_user']:.4f}%, aggregate "
          f"{100 * worst['aggregate']:.4f}%, mean TTFT {100 * worst['ttft']:.4f}% (stated: per-user "
          f"{100 * STATED_ERROR['per_user_tokens_per_s']:.0f}%, aggregate {100 * STATED_ERROR['aggregate_tokens_per_s']:.0f}%)")
    print(f"wall time: event {event_s:.1f} s, fast {fast_s:.1f} s ({event_s / fast_s:.1f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
