"""placer's cost model and NVIDIA's aiconfigurator side by side on the calibration corpus' GPU points.

    python benchmarks/compare_aiconfigurator.py                     # from the recorded estimates
    python benchmarks/compare_aiconfigurator.py --run /path/to/aiconfigurator [--jobs 3] [--missing]

aiconfigurator 0.12.0 (PyPI, Apache-2.0) estimates a configuration from its measured kernel tables
(``aiconfigurator cli estimate``, CPU only). It is not a dependency of placer: install it in its
own environment (``python3.11 -m venv /work/acvenv && /work/acvenv/bin/pip install
aiconfigurator==0.12.0``) and pass its executable to ``--run``; each point's estimate is then run
once, as measured (model, system, backend, precision, TP / EP / attention-DP layout, lengths,
batch), and its TPOT, TTFT and output tokens/s are recorded with the command line in
``benchmarks/data/aiconfigurator-estimates.yaml`` (nothing of aiconfigurator's code or tables is
copied). Without ``--run`` the recorded estimates are compared.

Errors are model speed / measured speed, as in ``calibrate_simulator.py``; placer's column is the
error that point counts with there (leave-one-source-out for fit points, the full fit for
held-out ones). The summary compares both on the points where aiconfigurator ran, the TTFT points
(mean time to first token, never fitted by placer) on a line of their own.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_simulator import GPU_SPECS, counted, evaluate, families  # noqa: E402
from calibration_corpus import ROOT, load_corpus  # noqa: E402

RECORD = ROOT / "benchmarks" / "data" / "aiconfigurator-estimates.yaml"
HF = {"llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B", "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
      "llama-3.1-405b": "meta-llama/Meta-Llama-3.1-405B", "deepseek-v3": "deepseek-ai/DeepSeek-V3",
      "qwen3-235b": "Qwen/Qwen3-235B-A22B", "gpt-oss-120b": "openai/gpt-oss-120b", "qwen3-32b": "Qwen/Qwen3-32B"}
SYSTEM = {"h100": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm"}
BACKEND = {"tensorrt-llm": "trtllm", "sglang": "sglang", "vllm": "vllm"}


def command(w, exe: str) -> list[str] | None:
    """The ``aiconfigurator cli estimate`` line of the point behind ``w`` (None: not expressible)."""
    p = w.point
    if p.model not in HF or p.hardware not in SYSTEM or p.runtime not in BACKEND:
        return None
    moe = any(c.num_experts for c in w.segments[0].costs)
    gemm = {16: "bfloat16", 8: "fp8_block" if p.model == "deepseek-v3" else "fp8", 4: "nvfp4"}[p.weight_bits]
    cmd = [exe, "cli", "estimate", "--model-path", HF[p.model], "--system", SYSTEM[p.hardware],
           "--backend", BACKEND[p.runtime], "--estimate-mode", "agg", "--isl", str(p.isl), "--osl", str(p.osl),
           "--batch-size", str(w.batch), "--gemm-quant-mode", gemm,
           "--kvcache-quant-mode", "fp8" if p.kv_bits == 8 else "bfloat16"]
    if p.attention_dp:
        cmd += ["--tp-size", "1", "--attention-dp-size", str(p.tp), "--moe-tp-size", "1", "--moe-ep-size", str(p.tp)]
    else:
        cmd += ["--tp-size", str(p.tp)]
        if moe:
            cmd += ["--moe-tp-size", "1", "--moe-ep-size", str(p.tp)] if p.ep else \
                ["--moe-tp-size", str(p.tp), "--moe-ep-size", "1"]
    if moe:
        cmd += ["--moe-quant-mode", {16: "bfloat16", 8: "fp8_block" if p.model == "deepseek-v3" else "fp8",
                                     4: "nvfp4"}[p.weight_bits]]
    return cmd


def run_one(cmd: list[str]) -> dict:
    """TPOT (ms) and output tokens/s of one estimate, or the reason it gave none."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd="/tmp")
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    text = out.stdout + out.stderr
    tpot = re.search(r"TPOT:\s+([\d,.]+) ms", text)
    ttft = re.search(r"TTFT:\s+([\d,.]+) ms", text)
    tps = re.search(r"^\s*tokens/s:\s+([\d,.]+)", text, re.M)
    if out.returncode or not (tpot and tps):
        last = [ln for ln in text.splitlines() if "error" in ln.lower()] or text.splitlines()[-1:]
        return {"error": last[-1].strip()[:200] if last else f"exit {out.returncode}"}
    out = {"tpot_ms": float(tpot.group(1).replace(",", "")), "tokens_per_s": float(tps.group(1).replace(",", ""))}
    if ttft:
        out["ttft_ms"] = float(ttft.group(1).replace(",", ""))
    return out


def aic_error(w, est: dict) -> float | None:
    """aiconfigurator's speed / measured speed for the point behind ``w``."""
    if not est or "tpot_ms" not in est:
        return None
    p = w.point
    if p.metric == "ttft_ms":
        return w.measured_us / (est["ttft_ms"] * 1e3) if "ttft_ms" in est else None
    if p.metric in ("tpot_ms", "user_tokens_per_s"):
        return w.measured_us / (est["tpot_ms"] * 1e3)
    measured = p.value * (w.devices if p.metric == "gpu_tokens_per_s" else 1)
    return est["tokens_per_s"] / measured


def _summary(errs) -> str:
    e = [max(r, 1 / r) for r in errs]
    return f"median {statistics.median(e):.2f}x, worst {max(e):.2f}x" if e else "no points"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", metavar="EXE", help="aiconfigurator executable: run the estimates and record them")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--missing", action="store_true", help="with --run: only the points with no recorded estimate")
    args = ap.parse_args(argv)
    gfam = families(load_corpus())[0]
    rows = [r for r in evaluate(gfam)["rows"]
            if r["work"].point.hardware in GPU_SPECS and r["work"].point.set in ("fit", "held_out")]
    record = yaml.safe_load(RECORD.read_text()) if RECORD.exists() else {"estimates": {}}
    est = record["estimates"]
    if args.run:
        todo = {r["work"].point.id: command(r["work"], args.run) for r in rows}
        todo = {k: v for k, v in todo.items() if v and not (args.missing and k in est)}
        with ThreadPoolExecutor(args.jobs) as pool:
            for k, res in zip(todo, pool.map(run_one, todo.values())):
                est[k] = dict(res, command=" ".join(["aiconfigurator"] + todo[k][1:]))
                print(f"  {k}: {res}", flush=True)
        record = {"aiconfigurator": "0.12.0 (PyPI), cli estimate, agg mode, run on CPU in its own venv",
                  "estimates": est}
        RECORD.write_text("# Written by benchmarks/compare_aiconfigurator.py --run (aiconfigurator's estimates of\n"
                          "# the corpus' GPU points; its figures, not its code or tables)\n"
                          + yaml.safe_dump(record, sort_keys=True, width=200))
    print(f"  {'point':<46} {'set':<8} {'placer':>7} {'aiconfigurator':>15}")
    both, ttft = [], []
    for r in rows:
        p = r["work"].point
        ours, theirs = counted(r), aic_error(r["work"], est.get(p.id))
        why = "" if theirs is not None else f"  ({(est.get(p.id) or {}).get('error', 'not run')})"
        print(f"  {p.id:<46} {p.set:<8} {ours:>6.2f}x {('-' if theirs is None else f'{theirs:.2f}x'):>15}{why}")
        if ours is not None and theirs is not None:
            (ttft if p.metric == "ttft_ms" else both).append((ours, theirs))
    print(f"\n  on the {len(both)} points both models ran: placer {_summary([a for a, _ in both])}; "
          f"aiconfigurator {_summary([b for _, b in both])}")
    if ttft:
        print(f"  TTFT, on the {len(ttft)} points both models ran: placer {_summary([a for a, _ in ttft])}; "
              f"aiconfigurator {_summary([b for _, b in ttft])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
