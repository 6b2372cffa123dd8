"""Write what ``benchmarks/calibrate_simulator.py --write`` fits: the hardware specs' perf blocks, each
constant with its range and source, and the per-regime error bands every simulated speed carries
(``placer/simulate/data/error_bands.yaml``, read by :mod:`placer.simulate.error_band`)."""

from __future__ import annotations

import re
import statistics

import yaml
from calibrate_simulator import (
    CURRENT_RELEASE,
    FP4_DEVICES,
    GPU_RANGES,
    GPU_SPECS,
    UNMEASURED_NVIDIA,
    WAFER_COMPUTE_EFFICIENCY,
    WAFER_RANGES,
    counted,
)
from calibration_corpus import ROOT, model_of

from placer import load_fleet
from placer.simulate.error_band import BANDS_PATH, batch_range
from placer.specs.spec_io import atomic_write_text

_PERF = re.compile(r"^  perf:\n(?:^    .*\n|^\s*\n)*", re.M)
COMMON = ["Cost-model constants (placer/simulate/cost.py: a step is a sum of operations, each at its",
          "own roofline; docs/cost_model.md), fitted by benchmarks/calibrate_simulator.py to the measured",
          "corpus benchmarks/data/calibration.yaml (sources, precision, layout, lengths, concurrency).",
          "Each constant's physically plausible range and its source are beside it; the calibration",
          "fails when a constant lands on a bound."]


def perf_block(values: dict, ranges: dict, comment: list[str]) -> str:
    lines = ["  perf:"] + [f"    # {c}" if c else "    #" for c in comment]
    for k, v in values.items():
        r = ranges.get(k)
        note = f"  # range {r[0]:g}-{r[1]:g}{(' ' + r[2]) if r[2] else ''}: {r[3]}" if r else ""
        lines.append(f"    {k}: {v}{note}")
    return "\n".join(lines) + "\n"


def write_perf(name: str, block: str) -> None:
    """Replace the ``perf:`` block of ``hardware/<name>.yaml`` (nothing else in the file changes)."""
    path = ROOT / "hardware" / f"{name}.yaml"
    text = path.read_text()
    if not _PERF.search(text):
        raise SystemExit(f"{path}: no 'perf:' block under 'device:' to replace")
    atomic_write_text(path, _PERF.sub(lambda _m: block, text, count=1))
    load_fleet(path)   # still a valid spec


def _summary(rows, sel: str) -> str:
    e = [max(r, 1 / r) for r in (counted(x) for x in rows if x["work"].point.set == sel
                                 and x["work"].point.metric != "ttft_ms") if r is not None]
    return f"{len(e)} points, median {statistics.median(e):.2f}x, worst {max(e):.2f}x" if e else "no points"


def gpu_values(x) -> dict:
    v = {k: float(val) for k, val in zip(GPU_RANGES, x)}
    return dict(fixed_overhead_us_per_layer=round(v["fixed_overhead_us_per_layer"], 3),
                fixed_overhead_us_per_stage=0.0,
                fixed_overhead_us_per_layer_per_request=round(v["fixed_overhead_us_per_layer_per_request"], 5),
                fixed_overhead_us_per_moe_layer=round(v["fixed_overhead_us_per_moe_layer"], 3),
                bandwidth_efficiency=round(v["bandwidth_efficiency"], 4),
                expert_bandwidth_efficiency=round(v["expert_bandwidth_efficiency"], 4),
                compute_efficiency=round(v["compute_efficiency"], 4),
                compute_half_saturation_tokens=round(v["compute_half_saturation_tokens"], 2),
                collective_latency_us=round(v["collective_latency_us"], 3),
                collective_bandwidth_efficiency=round(v["collective_bandwidth_efficiency"], 4),
                compute_fp4_speedup=round(v["compute_fp4_speedup"], 4))


def wafer_values(names, x, release: str = CURRENT_RELEASE) -> dict:
    v = dict(zip(names, (float(a) for a in x)))
    return dict(fixed_overhead_us_per_layer=round(v["fixed_overhead_us_per_layer"], 3),
                fixed_overhead_us_per_stage=round(v.get(f"fixed_overhead_us_per_stage@{release}", 0.0), 3),
                bandwidth_efficiency=1.0, compute_efficiency=WAFER_COMPUTE_EFFICIENCY)


def wse2_values(wvals: dict) -> dict | None:
    """WSE-2: the wse-3 fit's per-layer cost and the per-wafer cost WaferLLM's Llama3-8B speed leaves
    (the corpus' excluded point wse2-waferllm-llama3-8b: one wafer, batch 1)."""
    from calibrate_simulator import wafer_predict_for
    from calibration_corpus import load_corpus, work
    p = next((q for q in load_corpus() if q.hardware == "wse-2"), None)
    if p is None:
        return None
    w = work(p)
    names = ("fixed_overhead_us_per_layer",)
    rest = wafer_predict_for(names)([wvals["fixed_overhead_us_per_layer"]], w)
    return dict(wvals, fixed_overhead_us_per_stage=round(max(w.measured_us - rest, 0.0) / w.devices, 3))


def bands(fams, results) -> dict:
    """Per regime (platform, dense / MoE, batch range): the counted errors' median and worst, and
    the devices, batches and model sizes the corpus covers."""
    regimes: dict = {}
    cover: dict = {}
    for fam in fams:
        for r in results[fam.name]["rows"]:
            w, e = r["work"], counted(r)
            p = w.point
            if p.set not in ("fit", "held_out") or p.hardware not in (*GPU_SPECS, "wse-3") or p.metric == "ttft_ms":
                continue
            platform = "wafer" if p.wafer else "gpu"
            kind = "moe" if any(c.num_experts for s in w.segments for c in s.costs) else "dense"
            key = (platform, kind, batch_range(platform, w.batch))
            if e is not None:
                regimes.setdefault(key, []).append(float(max(e, 1 / e)))
            c = cover.setdefault(platform, dict(devices=set(), batch=[w.batch, w.batch], params=[None, None],
                                                context=0))
            c["devices"].add(p.hardware)
            c["context"] = max(c["context"], p.isl + p.osl)
            c["batch"] = [min(c["batch"][0], w.batch), max(c["batch"][1], w.batch)]
            n = model_of(p.model).total_params
            c["params"] = [min(n, c["params"][0] or n), max(n, c["params"][1] or n)]
    out = [dict(platform=k[0], kind=k[1], batch=k[2], points=len(v), median=round(statistics.median(v), 3),
                worst=round(max(v), 3)) for k, v in sorted(regimes.items())]
    return dict(regimes=out, coverage={k: dict(devices=sorted(v["devices"]), batch=v["batch"], params=v["params"],
                                               context=v["context"]) for k, v in cover.items()})


def write_all(fams, results) -> None:
    """Write the perf blocks of the GPU and wafer specs and the error bands."""
    gfam, wfam = fams
    gres, wres = results[gfam.name], results[wfam.name]
    gpu_comment = COMMON + [
        "One set for every NVIDIA GPU (each keeps its own bandwidth and peaks): HBM efficiency of dense",
        "and routed-expert reads, GEMM efficiency at large M and the M at half of it, per-layer (and per",
        "request of the batch) and per-MoE-layer fixed costs, time per TP/EP collective and the share",
        "of the link its bytes reach; on Blackwell the NVFP4 GEMMs' rate against the FP8 one.",
        f"Leave-one-source-out, fit set: {_summary(gres['rows'], 'fit')}.",
        f"Held-out publications: {_summary(gres['rows'], 'held_out')}."]
    unmeasured = ["No point of the corpus runs on this device: the set fitted on " + ", ".join(GPU_SPECS) + ",",
                  "with this spec's own bandwidth and peaks; its speeds print as outside the calibrated range."]
    for name in (*GPU_SPECS, *UNMEASURED_NVIDIA):
        values = gpu_values(gres["x"])
        if name not in FP4_DEVICES:         # no 4-bit tensor cores: 4-bit weights run at the 8-bit rate
            values.pop("compute_fp4_speedup")
        comment = gpu_comment + (unmeasured if name in UNMEASURED_NVIDIA else [])
        write_perf(name, perf_block(values, GPU_RANGES, comment))
    old = wafer_values(wfam.names, wres["x"], "2024-08")["fixed_overhead_us_per_stage"]
    wafer_comment = COMMON + [
        "A wafer stage costs a per-layer cost + SRAM reads at the full rate + FLOPs at half of peak;",
        "each hop adds the link latency and the activation over the link. Cerebras' serving release",
        "of 2024-10 onwards (rewritten kernels, asynchronous wafer I/O) pays no per-wafer cost beyond",
        f"the hop; the launch release (2024-08) paid {old} us per wafer.",
        f"Leave-one-source-out, fit set: {_summary(wres['rows'], 'fit')}.",
        f"Held-out publications: {_summary(wres['rows'], 'held_out')}."]
    wvals = wafer_values(wfam.names, wres["x"])
    write_perf("wse-3", perf_block(wvals, WAFER_RANGES, wafer_comment))
    write_perf("wse-3t", perf_block(wvals, WAFER_RANGES, COMMON + [
        "No CS-4 speed is published: the wse-3 fit's per-layer cost, SRAM at this wafer's 43.2 PB/s.",
        "A higher clock (U: ~2.8 GHz vs ~1.4) would shrink it; not assumed."]))
    w2 = wse2_values(wvals)
    if w2 is not None:
        write_perf("wse-2", perf_block(w2, WAFER_RANGES, COMMON + [
            "WaferLLM's Llama3-8B at 2,700 tok/s on one WSE-2 (V: OSDI 2025) with the wse-3 fit's",
            "per-layer cost sets the per-wafer cost. WaferLLM's kernels are not Cerebras' serving stack."]))
    text = ("# Calibrated error of the simulator's speeds per regime, written by\n"
            "# `python benchmarks/calibrate_simulator.py --write` (leave-one-source-out errors of the fit\n"
            "# points, full-fit errors of the held-out ones; errors as max(model/measured, measured/model)).\n"
            + yaml.safe_dump(bands(fams, results), sort_keys=False))
    BANDS_PATH.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(BANDS_PATH, text)
    print("wrote the perf blocks of " + ", ".join(f"hardware/{n}.yaml" for n in (*GPU_SPECS, *UNMEASURED_NVIDIA, "wse-3", "wse-3t", "wse-2"))
          + f" and {BANDS_PATH.relative_to(ROOT)}")
