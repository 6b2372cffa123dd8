"""Disaggregated prefill/decode: placer's plan for DeepSeek-V3 on 16 H200 (2 nodes of 8) at TTFT
2 s and TPOT 30 ms, ISL 4,000 / OSL 1,000 (NVIDIA aiconfigurator's defaults), beside
aiconfigurator's own answer for the same question.

    python benchmarks/bench_disagg.py
    python benchmarks/bench_disagg.py --aiconfigurator /tmp/aic/bin/aiconfigurator   # also run it

placer's question is aiconfigurator's ``cli default --total-gpus 16``: the most requests/s the 16
GPUs serve with a prefill pool and a decode pool meeting both targets
(``Requirements(disagg=True, maximize_rate=True)``), each pool's placement proven by the solver,
the ratio of the pools exhaustive over the shapes tried. The row gives both pools' layouts and
devices, the replicas, requests/s, TTFT (queueing + prefill + KV transfer), TPOT (the decode
pool's decode-only simulation), output tokens/s per GPU over the 16, whether each pool's placement
is proven, and the wall seconds of the whole plan (shapes, solves, simulations, the pooled
mapping). With ``--aiconfigurator`` the same question is run through aiconfigurator (installed
in its own environment: ``python -m venv /tmp/aic && /tmp/aic/bin/pip install aiconfigurator==0.12.0``)
and its wall time and best disaggregated row are printed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import time

from placer.planning import Pools, Requirements, SolverSettings, Targets, plan
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import workload_for

AIC_ARGS = ["cli", "default", "--model-path", "deepseek-ai/DeepSeek-V3", "--system", "h200_sxm", "--total-gpus",
            "16", "--isl", "4000", "--osl", "1000", "--ttft", "2000", "--tpot", "30"]


def placer_row(args) -> dict:
    model = load_model(args.model)
    fleet = load_fleet(args.hardware, racks=args.racks)
    wl = workload_for(model, context=args.isl)
    req = Requirements(targets=Targets(max_ttft_ms=args.ttft_ms, max_itl_ms=args.tpot_ms),
                       pools=Pools(maximize_rate=True, prompt_tokens=args.isl, decode_tokens=args.osl))
    t0 = time.perf_counter()
    p = plan(model, fleet, wl, req, SolverSettings(time_limit=args.time_limit, threads=args.threads))
    seconds = time.perf_counter() - t0
    dp = p.pools
    c = dp.chosen
    gpus = len(fleet.available)
    if c is None:
        return dict(feasible=False, message=dp.message, seconds=seconds)
    return dict(feasible=True, message=dp.message, seconds=seconds, rate=c.rate, ttft_ms=c.ttft_us / 1e3,
                tpot_ms=c.tpot_us / 1e3, prefill=f"{c.x} x {c.prefill.devices} ({c.prefill.layout})",
                decode=f"{c.y} x {c.decode.devices} ({c.decode.layout})", devices=c.devices,
                tokens_per_s_per_gpu=c.rate * args.osl / gpus, live=c.load * c.y,
                prefill_proven=c.prefill.solved.result.proven_optimal,
                decode_proven=dp.decode_solved.result.proven_optimal, proven=p.proven,
                prefill_ms=c.prefill.prefill_us / 1e3, transfer_ms=c.transfer_us / 1e3,
                transfer_bytes=dp.transfer_bytes, candidates=len(dp.candidates))


def aiconfigurator_row(exe: str) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run([exe, *AIC_ARGS], capture_output=True, text=True, check=False).stdout
    seconds = time.perf_counter() - t0
    lines = out.splitlines()
    start = next((i for i, ln in enumerate(lines) if "disagg Top Configurations" in ln), None)
    row = None
    if start is not None:
        row = next((ln for ln in lines[start:] if re.match(r"^\|\s+1\s+\|", ln)), None)
    return dict(seconds=seconds, row=row, best=[ln.strip() for ln in lines if "Best Throughput" in ln
                                                 or "Request Rate" in ln])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="deepseek-v3")
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--racks", type=int, default=2, help="nodes of 8 GPUs (default 2: 16 GPUs)")
    ap.add_argument("--isl", type=int, default=4000)
    ap.add_argument("--osl", type=int, default=1000)
    ap.add_argument("--ttft-ms", type=float, default=2000.0)
    ap.add_argument("--tpot-ms", type=float, default=30.0)
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--aiconfigurator", default=None, metavar="EXE",
                    help="aiconfigurator executable (in its own venv) to run the same question through")
    args = ap.parse_args(argv)
    r = placer_row(args)
    print(f"placer: {r['message']}")
    if r["feasible"]:
        print(f"  prefill {r['prefill']}, decode {r['decode']}: {r['devices']} GPUs used; {r['rate']:.2f} req/s, "
              f"TTFT {r['ttft_ms']:,.0f} ms (prefill {r['prefill_ms']:,.0f}, transfer {r['transfer_ms']:.2f} ms of "
              f"{r['transfer_bytes']:,} B), TPOT {r['tpot_ms']:.2f} ms, {r['live']} live in decode, "
              f"{r['tokens_per_s_per_gpu']:.1f} output tokens/s per GPU (of 16)")
        print(f"  proven: prefill placement {r['prefill_proven']}, decode placement {r['decode_proven']}; "
              f"{r['candidates']} candidate pairs")
    print(f"  wall {r['seconds']:.1f} s")
    if args.aiconfigurator:
        a = aiconfigurator_row(args.aiconfigurator)
        print(f"aiconfigurator {' '.join(AIC_ARGS)}: wall {a['seconds']:.1f} s")
        for ln in a["best"]:
            print(f"  overall {ln}")
        print(f"  disagg top 1: {a['row']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
